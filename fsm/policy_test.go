package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func (b *mbox) policy(cmd SetPolicyCommand) *Policy {
	b.t.Helper()
	p, ok := b.ok(OpSetPolicy, cmd).(*Policy)
	if !ok {
		b.t.Fatalf("set_policy %+v: result is not a *Policy", cmd)
	}
	return p
}

func TestSetPolicyAppliesAndResolves(t *testing.T) {
	b := newMbox(t)
	at := time.Unix(0, b.ts+1000).UTC()
	p := b.policy(SetPolicyCommand{Agent: "ann", Mode: PolicyQuiet, ForSeconds: 60, SetBy: "lead"})
	if p.Mode != PolicyQuiet || p.SetBy != "lead" || !p.SetAt.Equal(at) || !p.Until.Equal(at.Add(time.Minute)) {
		t.Fatalf("set = %+v, want quiet by lead at %v until +1m", p, at)
	}
	b.policy(SetPolicyCommand{Agent: "ann", From: "lead", Mode: PolicyInterrupt, SetBy: "ann"})
	// Another agent's policy is not ann's ("ann" is a prefix of "anna").
	b.policy(SetPolicyCommand{Agent: "anna", Mode: PolicyFork, SetBy: "anna"})

	set, err := b.f.Policies("ann", at)
	if err != nil || len(set.Policies) != 2 || set.Policies[0].From != "" || set.Policies[1].From != "lead" {
		t.Fatalf("Policies(ann) = %+v, %v; want the agent-wide one, then lead's", set, err)
	}
	if got, ok := set.For("lead", at); !ok || got.Mode != PolicyInterrupt {
		t.Errorf("For(lead) = %+v, %v; want lead's override", got, ok)
	}
	if got, ok := set.For("bob", at); !ok || got.Mode != PolicyQuiet {
		t.Errorf("For(bob) = %+v, %v; want the agent-wide quiet", got, ok)
	}
	// Expiry at read time: after a minute only the override is in force.
	later := at.Add(time.Minute)
	if got, ok := set.For("bob", later); ok {
		t.Errorf("For(bob) after the end = %+v, want none (the YAML)", got)
	}
	if got, ok := set.For("lead", later); !ok || got.Mode != PolicyInterrupt {
		t.Errorf("For(lead) after the quiet ended = %+v, %v", got, ok)
	}
	if set, _ := b.f.Policies("ann", later); len(set.Policies) != 1 || set.Policies[0].From != "lead" {
		t.Errorf("Policies(ann) after the end = %+v, want lead's only", set)
	}

	// Replace, then clear, the override.
	if p := b.policy(SetPolicyCommand{Agent: "ann", From: "lead", Mode: PolicyQueue, SetBy: "ann"}); p.Mode != PolicyQueue {
		t.Errorf("replace = %+v", p)
	}
	if p := b.policy(SetPolicyCommand{Agent: "ann", From: "lead", SetBy: "ann"}); !p.Cleared || p.Mode != "" {
		t.Errorf("clear = %+v, want cleared", p)
	}
	if p := b.policy(SetPolicyCommand{Agent: "ann", From: "lead", SetBy: "ann"}); p.Cleared {
		t.Errorf("second clear = %+v, want nothing cleared", p)
	}
	if set, _ := b.f.Policies("ann", at); len(set.Policies) != 1 || set.Policies[0].From != "" {
		t.Errorf("Policies(ann) after the clear = %+v, want the agent-wide one", set)
	}
}

func TestSetPolicyDropsEndedRecords(t *testing.T) {
	b := newMbox(t)
	b.policy(SetPolicyCommand{Agent: "ann", Mode: PolicyQuiet, ForSeconds: 1, SetBy: "ann"})
	b.ts += int64(2 * time.Second)
	b.policy(SetPolicyCommand{Agent: "ann", From: "lead", Mode: PolicyFork, SetBy: "ann"})
	if n := strings.Count(dump(t, b.f), "\npolicies "); n != 1 {
		t.Errorf("%d policies stored after the next set, want 1 (the ended one dropped):\n%s", n, dump(t, b.f))
	}
}

func TestSetPolicyRefusals(t *testing.T) {
	b := newMbox(t)
	for _, tt := range []struct {
		cmd  SetPolicyCommand
		want string
	}{
		{SetPolicyCommand{Agent: "Bad", Mode: PolicyQueue, SetBy: "x"}, "agent"},
		{SetPolicyCommand{Agent: "ann", Mode: "loud", SetBy: "x"}, `mode: "loud" is not a mode`},
		{SetPolicyCommand{Agent: "ann", Mode: PolicyQueue, From: "Bad One", SetBy: "x"}, "from"},
		{SetPolicyCommand{Agent: "ann", Mode: PolicyQueue}, "set_by"},
		{SetPolicyCommand{Agent: "ann", Mode: PolicyQuiet, ForSeconds: MaxPolicyFor + 1, SetBy: "x"}, "for_seconds: 2592001 is out of range: 0 (no end) to 2592000"},
		{SetPolicyCommand{Agent: "ann", Mode: PolicyQuiet, ForSeconds: -1, SetBy: "x"}, "for_seconds"},
		{SetPolicyCommand{Agent: "ann", ForSeconds: 5, SetBy: "x"}, "for_seconds: a clear takes no duration"},
	} {
		err, ok := b.apply(OpSetPolicy, tt.cmd).(error)
		if !ok || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an invalid error saying %q", tt.cmd, err, tt.want)
		}
	}
	if strings.Contains(dump(t, b.f), "\npolicies ") {
		t.Errorf("a refused set_policy left a trace:\n%s", dump(t, b.f))
	}
}

func TestSetPolicyBoundsOverrides(t *testing.T) {
	b := newMbox(t)
	for i := range MaxPolicyOverrides {
		b.policy(SetPolicyCommand{Agent: "ann", From: "s" + itoa(uint64(i)), Mode: PolicyQueue, SetBy: "ann"})
	}
	err, ok := b.apply(OpSetPolicy, SetPolicyCommand{Agent: "ann", From: "one-more", Mode: PolicyQueue, SetBy: "ann"}).(error)
	if !ok || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "64 per-sender overrides, the most allowed") {
		t.Fatalf("override 65: %v, want the bound named", err)
	}
	// Replacing one that exists is not one more.
	b.policy(SetPolicyCommand{Agent: "ann", From: "s0", Mode: PolicyFork, SetBy: "ann"})
}

func TestPoliciesSurviveSnapshot(t *testing.T) {
	b := newMbox(t)
	b.policy(SetPolicyCommand{Agent: "ann", Mode: PolicyQuiet, ForSeconds: 60, SetBy: "ann"})
	b.policy(SetPolicyCommand{Agent: "ann", From: "lead", Mode: PolicyInterrupt, SetBy: "ann"})
	sink := takeSnapshot(t, b.f)
	dst, _ := openTemp(t)
	if err := dst.Restore(sink.Reader()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	now := time.Unix(0, b.ts)
	want, _ := b.f.Policies("ann", now)
	got, err := dst.Policies("ann", now)
	if err != nil || len(got.Policies) != 2 || got.Policies[0] != want.Policies[0] || got.Policies[1] != want.Policies[1] {
		t.Fatalf("restored Policies = %+v, %v; want %+v", got, err, want)
	}
}
