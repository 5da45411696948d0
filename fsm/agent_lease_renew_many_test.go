package fsm

import (
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// Renewals in one entry are judged each alone, as lone renewals would be
// at that entry's time: the holder's live lease is extended, a renewal by
// another holder, of a lapsed lease or of an agent with no lease is that
// renewal's error and changes that lease not at all.
func TestAgentLeaseRenewManyJudgesEachAlone(t *testing.T) {
	b := newTaskBox(t)
	rita := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	rex := b.acquireLease("rex", hostA, api.AgentLeaseGranted)
	b.jump(rex.ExpiresAt) // both lapse; rita is granted again, rex not
	rita = b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	eve := b.acquireLease("eve", hostB, api.AgentLeaseGranted)
	res, ok := b.ok(api.OpAgentLeaseRenewMany, api.AgentLeaseRenewManyCommand{Renewals: []api.AgentLeaseRenewCommand{
		{Agent: "rita", LeaseHolder: hostA, Fence: rita.Fence, TTL: leaseTTL},
		{Agent: "rex", LeaseHolder: hostA, Fence: rex.Fence, TTL: leaseTTL},
		{Agent: "eve", LeaseHolder: hostA, Fence: eve.Fence, TTL: leaseTTL},
		{Agent: "boss", LeaseHolder: hostA, Fence: 7, TTL: leaseTTL},
	}}).(*api.AgentLeaseRenewManyResult)
	if !ok || len(res.Results) != 4 {
		t.Fatalf("result %+v, want 4 outcomes", res)
	}
	got := res.Results
	if got[0].Agent != "rita" || got[0].Error != nil || got[0].Lease == nil || !got[0].Lease.ExpiresAt.Equal(b.now().Add(10e9)) {
		t.Errorf("rita's renewal = %+v, want extended to entry time + ttl", got[0])
	}
	for i, want := range []struct{ agent, code, words string }{
		{"rex", api.CodeFenced, "expired at"},
		{"eve", api.CodeFenced, "is held by n2/bbbb2222, not n1/aaaa1111"},
		{"boss", api.CodeNotFound, "agent boss has no lease"},
	} {
		r := got[i+1]
		if r.Agent != want.agent || r.Lease != nil || r.Error == nil || r.Error.Code != want.code || !strings.Contains(r.Error.Message, want.words) {
			t.Errorf("%s's renewal = %+v (error %+v), want %s saying %q", want.agent, r, r.Error, want.code, want.words)
		}
	}
	if l, err := b.f.AgentLeaseOf("eve"); err != nil || !l.ExpiresAt.Equal(eve.ExpiresAt) {
		t.Errorf("eve's lease after another's refused renewal = %+v, %v; want it as granted", l, err)
	}
}

// A body that does not validate refuses the whole entry, naming the
// renewal and field.
func TestAgentLeaseRenewManyInvalid(t *testing.T) {
	b := newTaskBox(t)
	one := api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: 3, TTL: leaseTTL}
	bad := one
	bad.Fence = 0
	for _, c := range []struct {
		cmd  api.AgentLeaseRenewManyCommand
		want string
	}{
		{api.AgentLeaseRenewManyCommand{}, "renewals: 0 renewals: want 1..256"},
		{api.AgentLeaseRenewManyCommand{Renewals: []api.AgentLeaseRenewCommand{one, bad}}, "renewals[1].fence: required"},
		{api.AgentLeaseRenewManyCommand{Renewals: []api.AgentLeaseRenewCommand{one, one}}, "renewals[1].agent: rita is renewed twice"},
		{api.AgentLeaseRenewManyCommand{Renewals: make([]api.AgentLeaseRenewCommand, api.MaxLeaseRenewals+1)}, "257 renewals"},
	} {
		b.refused(api.OpAgentLeaseRenewMany, c.cmd, api.ErrInvalid, c.want)
	}
}
