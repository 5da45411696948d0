package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestMayInterrupt(t *testing.T) {
	type ask struct {
		from, fromRole string
		allowed        bool
	}
	for _, c := range []struct {
		name   string
		doc    string // "" for no document
		reason string // the refusal, the same for every refused ask
		asks   []ask
	}{
		{"no document: the default roles", "", DefaultInterruptReason, []ask{
			{"boss", "master", true}, {"orc", "orchestrator", true}, {"sup", "supervisor", true},
			{"w1", "agent", false}, {"master", "", false}, // an id named master is no role master
			{"lead1", "lead", false},
		}},
		{"a document without the list: the default", `{"forbidden": [{"from": "a", "to": "b"}]}`, DefaultInterruptReason, []ask{
			{"boss", "master", true}, {"w1", "engineer", false},
		}},
		{"null says nothing", `{"interrupt": null, "default": "allow"}`, DefaultInterruptReason, []ask{
			{"sup", "supervisor", true}, {"w1", "agent", false},
		}},
		{"the preset's orchestrator_role is not the default", `{"preset": "hierarchical", "orchestrator_role": "lead"}`, DefaultInterruptReason, []ask{
			{"lead1", "lead", false}, {"orc", "orchestrator", true},
		}},
		// The lists that let a sender message everyone give no interrupt
		// power: the seed's master_agent may send to all, not interrupt.
		{"allow lists do not grant it", `{"allowed_interactions": {"master_agent": {"can_send_to": "*"}}}`, DefaultInterruptReason, []ask{
			{"master_agent", "agent", false},
		}},
		{"ids and roles", `{"interrupt": ["master_agent", "role:lead"]}`, "interrupt: only master_agent, role:lead may interrupt", []ask{
			{"master_agent", "agent", true}, {"master_agent", "", true}, {"l", "lead", true},
			{"boss", "master", false}, // the list replaces the default
			{"w1", "agent", false}, {"lead", "", false},
		}},
		{"one string is a list of one", `{"interrupt": "role:supervisor"}`, "interrupt: only role:supervisor may interrupt", []ask{
			{"s", "supervisor", true}, {"o", "orchestrator", false},
		}},
		{"globs", `{"interrupt": ["ops-*", "ops-*"]}`, "interrupt: only ops-* may interrupt", []ask{
			{"ops-1", "agent", true}, {"dev-1", "agent", false},
		}},
		{"star", `{"interrupt": ["*"]}`, "", []ask{{"anyone", "", true}, {"w1", "agent", true}}},
		{"empty: nobody", `{"interrupt": []}`, "interrupt: the list is empty, nobody may interrupt", []ask{
			{"boss", "master", false}, {"w1", "agent", false},
		}},
	} {
		var r *Compiled
		if c.doc != "" {
			r = mustRules(t, c.doc)
		}
		for _, a := range c.asks {
			ok, reason := r.MayInterrupt(a.from, a.fromRole)
			switch {
			case ok != a.allowed:
				t.Errorf("%s: MayInterrupt(%s, %q) = %t (%q), want %t", c.name, a.from, a.fromRole, ok, reason, a.allowed)
			case ok && reason != "":
				t.Errorf("%s: MayInterrupt(%s, %q) allowed with a reason %q", c.name, a.from, a.fromRole, reason)
			case !ok && reason != c.reason:
				t.Errorf("%s: MayInterrupt(%s, %q) reason %q, want %q", c.name, a.from, a.fromRole, reason, c.reason)
			}
		}
	}
	if DefaultInterruptReason != "interrupt: only roles master, orchestrator, supervisor may interrupt" {
		t.Errorf("DefaultInterruptReason = %q", DefaultInterruptReason)
	}
}

func TestInterruptBadLists(t *testing.T) {
	many := make([]string, MaxSelectors+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"a%d"`, i)
	}
	for _, c := range []struct {
		doc, field, reason string
	}{
		{`{"interrupt": {"role": "master"}}`, "interrupt", "want a list, got an object"},
		{`{"interrupt": true}`, "interrupt", "want a list, got a boolean"},
		{`{"interrupt": ["role:master", 7]}`, "interrupt[1]", "want a string, got a number (7)"},
		{`{"interrupt": [""]}`, "interrupt[0]", "empty; want an agent id, role:NAME, a glob or *"},
		{`{"interrupt": ["Boss"]}`, "interrupt[0]", `"Boss" is not an agent id`},
		{`{"interrupt": ["role:Master"]}`, "interrupt[0]", `role "Master" must match ^[a-z0-9][a-z0-9._-]{0,63}$`},
		{`{"interrupt": ["ops-["]}`, "interrupt[0]", `bad glob "ops-["`},
		{`{"interrupt": [` + strings.Join(many, ",") + `]}`, "interrupt", "1001 entries, at most 1000"},
	} {
		_, err := decodeJSON(t, c.doc)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%.60s: err = %v, want a *FieldError", c.doc, err)
			continue
		}
		if fe.Field != c.field || !strings.Contains(fe.Reason, c.reason) {
			t.Errorf("%.60s: error %q, want field %s with %q", c.doc, err, c.field, c.reason)
		}
	}
	// Validate, for a document built in Go, says the same.
	err := (&Document{Interrupt: []string{"role:master", "Bad"}}).Validate()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "interrupt[1]" {
		t.Errorf("Validate = %v, want a *FieldError on interrupt[1]", err)
	}
}

func TestMayInterruptDoesNotAllocate(t *testing.T) {
	r := mustRules(t, `{"interrupt": ["master_agent", "role:lead", "ops-*"]}`)
	var none *Compiled
	allocs := testing.AllocsPerRun(100, func() {
		r.MayInterrupt("ops-2", "agent")
		r.MayInterrupt("w1", "agent")
		none.MayInterrupt("boss", "master")
		none.MayInterrupt("w1", "agent")
	})
	if allocs != 0 {
		t.Errorf("MayInterrupt allocates %.0f times, want 0", allocs)
	}
}

func TestSummaryCountsInterruptEntries(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"forbidden": [{"from": "a", "to": "b"}]}`, "0 agent entries, 1 forbidden, default allow"},
		{`{"interrupt": ["role:lead"]}`, "0 agent entries, 0 forbidden, 1 interrupt entry, default allow"},
		{`{"preset": "hierarchical", "interrupt": []}`, "preset hierarchical, 0 agent entries, 0 forbidden, 0 interrupt entries, default deny"},
	} {
		d, err := decodeJSON(t, c.doc)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Summary(); got != c.want {
			t.Errorf("%s: Summary = %q, want %q", c.doc, got, c.want)
		}
	}
}
