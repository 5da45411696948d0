package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func (b *mbox) policy(cmd api.SetPolicyCommand) *api.Policy {
	b.t.Helper()
	p, ok := b.ok(api.OpSetPolicy, cmd).(*api.Policy)
	if !ok {
		b.t.Fatalf("set_policy %+v: result is not a *Policy", cmd)
	}
	return p
}

func TestSetPolicyAppliesAndResolves(t *testing.T) {
	b := newMbox(t)
	at := time.Unix(0, b.ts+1000).UTC()
	p := b.policy(api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQuiet, ForSeconds: 60, SetBy: "lead"})
	if p.Mode != api.PolicyQuiet || p.SetBy != "lead" || !p.SetAt.Equal(at) || !p.Until.Equal(at.Add(time.Minute)) {
		t.Fatalf("set = %+v, want quiet by lead at %v until +1m", p, at)
	}
	b.policy(api.SetPolicyCommand{Agent: "ann", From: "lead", Mode: api.PolicyInterrupt, SetBy: "ann"})
	// Another agent's policy is not ann's ("ann" is a prefix of "anna").
	b.policy(api.SetPolicyCommand{Agent: "anna", Mode: api.PolicyFork, SetBy: "anna"})

	set, err := b.f.Policies("ann", at)
	if err != nil || len(set.Policies) != 2 || set.Policies[0].From != "" || set.Policies[1].From != "lead" {
		t.Fatalf("Policies(ann) = %+v, %v; want the agent-wide one, then lead's", set, err)
	}
	if got, ok := set.For("lead", at); !ok || got.Mode != api.PolicyInterrupt {
		t.Errorf("For(lead) = %+v, %v; want lead's override", got, ok)
	}
	if got, ok := set.For("bob", at); !ok || got.Mode != api.PolicyQuiet {
		t.Errorf("For(bob) = %+v, %v; want the agent-wide quiet", got, ok)
	}
	// Expiry at read time: after a minute only the override is in force.
	later := at.Add(time.Minute)
	if got, ok := set.For("bob", later); ok {
		t.Errorf("For(bob) after the end = %+v, want none (the YAML)", got)
	}
	if got, ok := set.For("lead", later); !ok || got.Mode != api.PolicyInterrupt {
		t.Errorf("For(lead) after the quiet ended = %+v, %v", got, ok)
	}
	if set, _ := b.f.Policies("ann", later); len(set.Policies) != 1 || set.Policies[0].From != "lead" {
		t.Errorf("Policies(ann) after the end = %+v, want lead's only", set)
	}

	// Replace, then clear, the override.
	if p := b.policy(api.SetPolicyCommand{Agent: "ann", From: "lead", Mode: api.PolicyQueue, SetBy: "ann"}); p.Mode != api.PolicyQueue {
		t.Errorf("replace = %+v", p)
	}
	if p := b.policy(api.SetPolicyCommand{Agent: "ann", From: "lead", SetBy: "ann"}); !p.Cleared || p.Mode != "" {
		t.Errorf("clear = %+v, want cleared", p)
	}
	if p := b.policy(api.SetPolicyCommand{Agent: "ann", From: "lead", SetBy: "ann"}); p.Cleared {
		t.Errorf("second clear = %+v, want nothing cleared", p)
	}
	if set, _ := b.f.Policies("ann", at); len(set.Policies) != 1 || set.Policies[0].From != "" {
		t.Errorf("Policies(ann) after the clear = %+v, want the agent-wide one", set)
	}
}

func TestSetPolicyDropsEndedRecords(t *testing.T) {
	b := newMbox(t)
	b.policy(api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQuiet, ForSeconds: 1, SetBy: "ann"})
	b.ts += int64(2 * time.Second)
	b.policy(api.SetPolicyCommand{Agent: "ann", From: "lead", Mode: api.PolicyFork, SetBy: "ann"})
	if n := strings.Count(dump(t, b.f), "\npolicies "); n != 1 {
		t.Errorf("%d policies stored after the next set, want 1 (the ended one dropped):\n%s", n, dump(t, b.f))
	}
}

func TestSetPolicyRefusals(t *testing.T) {
	b := newMbox(t)
	for _, tt := range []struct {
		cmd  api.SetPolicyCommand
		want string
	}{
		{api.SetPolicyCommand{Agent: "Bad", Mode: api.PolicyQueue, SetBy: "x"}, "agent"},
		{api.SetPolicyCommand{Agent: "ann", Mode: "loud", SetBy: "x"}, `mode: "loud" is not a mode`},
		{api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQueue, From: "Bad One", SetBy: "x"}, "from"},
		{api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQueue}, "set_by"},
		{api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQuiet, ForSeconds: api.MaxPolicyFor + 1, SetBy: "x"}, "for_seconds: 2592001 is out of range: 0 (no end) to 2592000"},
		{api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQuiet, ForSeconds: -1, SetBy: "x"}, "for_seconds"},
		{api.SetPolicyCommand{Agent: "ann", ForSeconds: 5, SetBy: "x"}, "for_seconds: a clear takes no duration"},
	} {
		err, ok := b.apply(api.OpSetPolicy, tt.cmd).(error)
		if !ok || !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an invalid error saying %q", tt.cmd, err, tt.want)
		}
	}
	if strings.Contains(dump(t, b.f), "\npolicies ") {
		t.Errorf("a refused set_policy left a trace:\n%s", dump(t, b.f))
	}
}

func TestSetPolicyBoundsOverrides(t *testing.T) {
	b := newMbox(t)
	for i := range api.MaxPolicyOverrides {
		b.policy(api.SetPolicyCommand{Agent: "ann", From: "s" + itoa(uint64(i)), Mode: api.PolicyQueue, SetBy: "ann"})
	}
	err, ok := b.apply(api.OpSetPolicy, api.SetPolicyCommand{Agent: "ann", From: "one-more", Mode: api.PolicyQueue, SetBy: "ann"}).(error)
	if !ok || !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "64 per-sender overrides, the most allowed") {
		t.Fatalf("override 65: %v, want the bound named", err)
	}
	// Replacing one that exists is not one more.
	b.policy(api.SetPolicyCommand{Agent: "ann", From: "s0", Mode: api.PolicyFork, SetBy: "ann"})
}

func TestPoliciesSurviveSnapshot(t *testing.T) {
	b := newMbox(t)
	b.policy(api.SetPolicyCommand{Agent: "ann", Mode: api.PolicyQuiet, ForSeconds: 60, SetBy: "ann"})
	b.policy(api.SetPolicyCommand{Agent: "ann", From: "lead", Mode: api.PolicyInterrupt, SetBy: "ann"})
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
