package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func TestNameError(t *testing.T) {
	err := api.NameError("agent", "Alice")
	var fe *api.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, api.ErrInvalid) || fe.Field != "agent" {
		t.Fatalf("NameError = %#v, want a *FieldError on agent wrapping ErrInvalid", err)
	}
	if got, want := err.Error(), `agent: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Alice")`; got != want {
		t.Errorf("Error() = %s, want %s", got, want)
	}
	if !nameRE.MatchString("a") || nameRE.MatchString("A") {
		t.Errorf("NamePattern %s does not say what ValidName checks", api.NamePattern)
	}

	// A long value is cut, on a rune boundary, so the message stays short.
	long := strings.Repeat("a", api.MaxNameLen-1) + "é" + strings.Repeat("b", 1000)
	got := api.NameRule(long)
	if want := `(got "` + strings.Repeat("a", api.MaxNameLen-1) + `…")`; !strings.HasSuffix(got, want) {
		t.Errorf("NameRule(long) = %s, want it to end with %s", got, want)
	}
}

// A lookup that finds nothing says what, in words for whoever asked: no
// package or operation name, whatever wraps it on the way.
func TestNotFoundWords(t *testing.T) {
	f, _ := openTemp(t)
	_, err := f.Message("msg-x")
	var nf *api.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Message(msg-x) = %#v, want a *NotFoundError wrapping ErrNotFound", err)
	}
	if got, want := err.Error(), "message msg-x: not found"; got != want {
		t.Errorf("Message(msg-x): %q, want %q", got, want)
	}
	if _, err := f.Receipts("msg-x"); err == nil || err.Error() != "message msg-x: not found" {
		t.Errorf("Receipts(msg-x): %v", err)
	}
	if _, err := f.Thread("msg-x", 0, 0); err == nil || err.Error() != "thread msg-x: not found" {
		t.Errorf("Thread(msg-x): %v", err)
	}
	if _, err := f.Agent("zed"); err == nil || err.Error() != "agent zed: not found" {
		t.Errorf("Agent(zed): %v", err)
	}
	if _, err := f.Node("n9"); err == nil || err.Error() != "node n9: not found" {
		t.Errorf("Node(n9): %v", err)
	}
	// An apply keeps its context for the log; errors.As finds the words.
	err = mustError(t, applyOne(f, opEntry(t, 1, baseTS, api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "zed"})))
	if !errors.As(err, &nf) || nf.Error() != "agent zed: not found" {
		t.Errorf("unregister zed = %v, want a *NotFoundError saying agent zed: not found", err)
	}
}
