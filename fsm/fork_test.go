package fsm

import (
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func TestForkNames(t *testing.T) {
	if got := api.ForkName("oauth-impl", 1); got != "oauth-impl-fork-1" {
		t.Fatalf("ForkName = %q", got)
	}
	for _, c := range []struct {
		name, parent string
		ok           bool
	}{
		{"oauth-impl-fork-1", "oauth-impl", true},
		{"a-fork-64", "a", true},
		{"a-fork-2-fork-3", "a-fork-2", true}, // a fork's own fork names its direct parent
		{"a-fork-0", "", false},
		{"a-fork-01", "", false},
		{"a-fork-", "", false},
		{"a-fork-x", "", false},
		{"a-fork-12345", "", false},
		{"-fork-1", "", false},
		{"fork-1", "", false},
		{"a", "", false},
		{"A-fork-1", "", false}, // the parent is no name
		{strings.Repeat("a", 65) + "-fork-1", "", false},
	} {
		p, ok := api.ForkParent(c.name)
		if p != c.parent || ok != c.ok {
			t.Errorf("ForkParent(%q) = %q, %t; want %q, %t", c.name, p, ok, c.parent, c.ok)
		}
		if ok && !api.IsForkOf(c.name, c.parent) {
			t.Errorf("IsForkOf(%q, %q) = false", c.name, c.parent)
		}
	}
	if api.IsForkOf("a-fork-1", "b") || api.IsForkOf("a", "a") {
		t.Fatal("IsForkOf holds for a name that is not the agent's fork")
	}
}
