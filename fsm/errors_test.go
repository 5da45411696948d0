package fsm

import (
	"errors"
	"strings"
	"testing"
)

func TestNameError(t *testing.T) {
	err := NameError("agent", "Alice")
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || fe.Field != "agent" {
		t.Fatalf("NameError = %#v, want a *FieldError on agent wrapping ErrInvalid", err)
	}
	if got, want := err.Error(), `agent: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Alice")`; got != want {
		t.Errorf("Error() = %s, want %s", got, want)
	}
	if !nameRE.MatchString("a") || nameRE.MatchString("A") {
		t.Errorf("NamePattern %s does not say what ValidName checks", NamePattern)
	}

	// A long value is cut, on a rune boundary, so the message stays short.
	long := strings.Repeat("a", MaxNameLen-1) + "é" + strings.Repeat("b", 1000)
	got := NameRule(long)
	if want := `(got "` + strings.Repeat("a", MaxNameLen-1) + `…")`; !strings.HasSuffix(got, want) {
		t.Errorf("NameRule(long) = %s, want it to end with %s", got, want)
	}
}
