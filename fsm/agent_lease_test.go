package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

var (
	hostA = api.LeaseHolder{Node: "n1", Instance: "aaaa1111"}
	hostB = api.LeaseHolder{Node: "n2", Instance: "bbbb2222"}
	hostC = api.LeaseHolder{Node: "n3", Instance: "cccc3333"}
)

const leaseTTL = api.LockTTL(10 * time.Second)

func mustLease(tb testing.TB, r any, outcome string) *api.AgentLease {
	tb.Helper()
	res, ok := r.(*api.AgentLeaseResult)
	if !ok {
		tb.Fatalf("result = %T (%v), want *AgentLeaseResult", r, r)
	}
	if res.Outcome != outcome {
		tb.Fatalf("outcome = %s, want %s (lease %+v)", res.Outcome, outcome, res.Lease)
	}
	return res.Lease
}

func (b *taskBox) acquireLease(agent string, h api.LeaseHolder, outcome string) *api.AgentLease {
	b.t.Helper()
	return mustLease(b.t, b.ok(api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: agent, LeaseHolder: h, TTL: leaseTTL}), outcome)
}

func standbyNodes(l *api.AgentLease) []string {
	var out []string
	for _, s := range l.Standbys {
		out = append(out, s.String())
	}
	return out
}

// TestAgentLeaseOneHolder: the first acquire is granted with the entry's
// index as fence; the holder's acquire extends it (same fence); another
// watcher stands by and is recorded, not granted; the holder's renewal
// keeps the fence; only the first grant is audited.
func TestAgentLeaseOneHolder(t *testing.T) {
	b := newTaskBox(t)
	l := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	if l.Fence != b.idx || l.Holder != hostA || l.Reason != api.LeaseReasonFirst || !l.ExpiresAt.Equal(b.now().Add(10*time.Second)) {
		t.Fatalf("grant = %+v, want fence %d held by %s for 10s", l, b.idx, hostA)
	}
	fence := l.Fence
	if again := b.acquireLease("rita", hostA, api.AgentLeaseExtended); again.Fence != fence {
		t.Errorf("re-acquire by the holder: fence %d, want %d kept", again.Fence, fence)
	}
	sb := b.acquireLease("rita", hostB, api.AgentLeaseStandby)
	if sb.Holder != hostA || sb.Fence != fence || strings.Join(standbyNodes(sb), ",") != hostB.String() {
		t.Errorf("standby answer = %+v, want held by %s with standby %s", sb, hostA, hostB)
	}
	b.acquireLease("rita", hostC, api.AgentLeaseStandby)
	r := mustLease(t, b.ok(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: fence, TTL: leaseTTL}), api.AgentLeaseExtended)
	if r.Fence != fence || strings.Join(standbyNodes(r), ",") != hostB.String()+","+hostC.String() {
		t.Errorf("renewal = %+v, want fence %d and standbys n2, n3", r, fence)
	}
	got, err := b.f.AgentLeaseOf("rita")
	if err != nil || got.Holder != hostA || len(got.Standbys) != 2 {
		t.Errorf("AgentLeaseOf = %+v, %v", got, err)
	}
	var leaseLines []string
	for _, line := range b.auditLines() {
		if strings.Contains(line, "AGENT_") {
			leaseLines = append(leaseLines, line)
		}
	}
	if len(leaseLines) != 1 || !strings.Contains(leaseLines[0], "AGENT_LEASE: rita served by n1/aaaa1111 fence=") {
		t.Errorf("audit = %q, want one AGENT_LEASE line", leaseLines)
	}
}

// TestAgentLeaseTakeover: a standby's acquire succeeds once the lease
// lapsed by entry time (not a moment before), with a larger fence,
// audited with from, to, fence and reason; the old holder's renewal and
// replies under the old fence are then refused.
func TestAgentLeaseTakeover(t *testing.T) {
	b := newTaskBox(t)
	old := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	b.jump(old.ExpiresAt.Add(-time.Microsecond))
	b.acquireLease("rita", hostB, api.AgentLeaseStandby)
	b.jump(old.ExpiresAt)
	l := b.acquireLease("rita", hostB, api.AgentLeaseGranted)
	if l.Fence <= old.Fence || l.Holder != hostB || l.Reason != api.LeaseReasonLapsed || len(l.Standbys) != 0 {
		t.Fatalf("takeover = %+v, want n2 with a fence above %d, reason lapsed", l, old.Fence)
	}
	lines := b.auditLines()
	want := "[n1→n2] AGENT_TAKEOVER: rita from n1/aaaa1111 (fence " + itoa(old.Fence) + ") to n2/bbbb2222 fence=" + itoa(l.Fence) + ": lapsed at "
	if last := lines[len(lines)-1]; !strings.Contains(last, want) {
		t.Errorf("audit line %q, want it to contain %q", last, want)
	}
	err := b.refused(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: old.Fence, TTL: leaseTTL}, api.ErrFenced,
		"agent rita: fence "+itoa(old.Fence)+" is not the current lease's (fence "+itoa(l.Fence)+", held by n2/bbbb2222)")
	var fe *api.FenceError
	if !errors.As(err, &fe) || !errors.Is(err, api.ErrConflict) {
		t.Errorf("refusal %v is not a *FenceError matching ErrConflict", err)
	}
	// The old holder asks again: it is a standby now.
	if sb := b.acquireLease("rita", hostA, api.AgentLeaseStandby); sb.Holder != hostB {
		t.Errorf("old holder's acquire = %+v, want standby behind n2", sb)
	}
}

// TestAgentLeaseRenewRefusals: a renewal of a lapsed lease (even one
// nobody took), by another holder, or of an unknown agent is refused and
// writes nothing.
func TestAgentLeaseRenewRefusals(t *testing.T) {
	b := newTaskBox(t)
	b.refused(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: 3, TTL: leaseTTL}, api.ErrNotFound, "agent rita has no lease")
	l := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	b.refused(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostB, Fence: l.Fence, TTL: leaseTTL}, api.ErrFenced,
		"is held by n1/aaaa1111, not n2/bbbb2222")
	b.jump(l.ExpiresAt)
	b.refused(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: l.Fence, TTL: leaseTTL}, api.ErrFenced,
		"expired at "+lockTime(l.ExpiresAt.UnixNano()))
	// Acquiring again after the lapse is a new grant, a new fence.
	again := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	if again.Fence == l.Fence || again.Reason != api.LeaseReasonLapsed {
		t.Errorf("re-grant after the lapse = %+v, want a new fence", again)
	}
}

// TestAgentLeaseRelease: the holder's release lets a standby take over at
// once (reason released); a retried release answers the same; a
// release under a stale fence is refused.
func TestAgentLeaseRelease(t *testing.T) {
	b := newTaskBox(t)
	l := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	b.acquireLease("rita", hostB, api.AgentLeaseStandby)
	b.refused(api.OpAgentLeaseRelease, api.AgentLeaseReleaseCommand{Agent: "rita", LeaseHolder: hostA, Fence: l.Fence + 1}, api.ErrFenced, "is not the current lease's")
	rel := mustLease(t, b.ok(api.OpAgentLeaseRelease, api.AgentLeaseReleaseCommand{Agent: "rita", LeaseHolder: hostA, Fence: l.Fence}), api.AgentLeaseReleased)
	if !rel.Released || !rel.Expired {
		t.Errorf("release = %+v, want released and expired", rel)
	}
	mustLease(t, b.ok(api.OpAgentLeaseRelease, api.AgentLeaseReleaseCommand{Agent: "rita", LeaseHolder: hostA, Fence: l.Fence}), api.AgentLeaseReleased)
	b.refused(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: l.Fence, TTL: leaseTTL}, api.ErrFenced, "was released")
	nl := b.acquireLease("rita", hostB, api.AgentLeaseGranted)
	if nl.Reason != api.LeaseReasonReleased || nl.Fence <= l.Fence {
		t.Errorf("takeover after release = %+v", nl)
	}
	lines := b.auditLines()
	if !strings.Contains(lines[len(lines)-2], "AGENT_RELEASE: rita released by n1/aaaa1111") ||
		!strings.HasSuffix(lines[len(lines)-1], ": released") {
		t.Errorf("audit tail = %q", lines[len(lines)-2:])
	}
}

// TestAgentLeaseStandbysLapse: a standby that stops asking for longer
// than its ttl is no longer listed; at most MaxAgentStandbys are kept.
func TestAgentLeaseStandbysLapse(t *testing.T) {
	b := newTaskBox(t)
	long := api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: hostA, TTL: api.LockTTL(10 * time.Minute)}
	l := mustLease(t, b.ok(api.OpAgentLeaseAcquire, long), api.AgentLeaseGranted)
	b.acquireLease("rita", hostB, api.AgentLeaseStandby)
	b.jump(b.now().Add(11 * time.Second))
	sb := b.acquireLease("rita", hostC, api.AgentLeaseStandby)
	if got := strings.Join(standbyNodes(sb), ","); got != hostC.String() {
		t.Errorf("standbys = %s, want only n3 (n2 stopped asking 11 s ago, ttl 10 s)", got)
	}
	for i := range api.MaxAgentStandbys + 3 {
		b.acquireLease("rita", api.LeaseHolder{Node: "n9", Instance: "i" + itoa(uint64(i))}, api.AgentLeaseStandby)
	}
	got, err := b.f.AgentLeaseOf("rita")
	if err != nil || len(got.Standbys) != api.MaxAgentStandbys || got.Fence != l.Fence {
		t.Fatalf("lease = %+v (%v), want %d standbys", got, err, api.MaxAgentStandbys)
	}
	for _, s := range got.Standbys {
		if s.LeaseHolder == hostC || s.Instance == "i0" {
			t.Errorf("standby %s, seen longest ago, should have given way", s)
		}
	}
}

// TestAgentFence: a reply, a cursor move and a task report under the
// current fence are accepted; under a stale fence they are refused with
// the fence, the current fence and the holder, and write nothing; with
// no fence nothing changes; a fork answers under its parent's fence.
func TestAgentFence(t *testing.T) {
	b := newTaskBox(t)
	first := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	b.jump(first.ExpiresAt)
	cur := b.acquireLease("rita", hostB, api.AgentLeaseGranted)
	stale := "fence " + itoa(first.Fence) + " is not the current lease's (fence " + itoa(cur.Fence) + ", held by n2/bbbb2222)"

	m := b.msg("rita", "the answer", "boss")
	b.refused(api.OpSend, api.SendCommand{Message: m, AgentFence: first.Fence}, api.ErrFenced, stale)
	b.ok(api.OpSend, api.SendCommand{Message: m, AgentFence: cur.Fence})
	b.ok(api.OpSend, api.SendCommand{Message: b.msg("rita", "by hand", "boss")})
	fork := b.msg(api.ForkName("rita", 1), "from a fork", "boss")
	b.refused(api.OpSend, api.SendCommand{Message: fork, AgentFence: first.Fence}, api.ErrFenced, stale)
	b.ok(api.OpSend, api.SendCommand{Message: fork, AgentFence: cur.Fence})
	b.refused(api.OpSend, api.SendCommand{Message: b.msg("rex", "no lease", "boss"), AgentFence: 7}, api.ErrFenced, "agent rex: fence 7: the agent has no lease")

	b.refused(api.OpSetCursor, api.SetCursorCommand{Agent: "rita", Seq: 5, AgentFence: first.Fence}, api.ErrFenced, stale)
	if c := mustCursor(t, b.ok(api.OpSetCursor, api.SetCursorCommand{Agent: "rita", Seq: 5, AgentFence: cur.Fence})); c.Seq != 5 {
		t.Errorf("cursor = %d, want 5", c.Seq)
	}
	if c := mustCursor(t, b.ok(api.OpSetCursor, api.SetCursorCommand{Agent: "rita", Seq: 6})); c.Seq != 6 {
		t.Errorf("cursor without a fence = %d, want 6", c.Seq)
	}

	task := b.create(b.newTask("rita"))
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: task.ID, Agent: "rita", AgentFence: first.Fence}, api.ErrFenced, stale)
	cl := mustTaskResult(t, b.ok(api.OpTaskClaim, api.TaskClaimCommand{ID: task.ID, Agent: "rita", AgentFence: cur.Fence}))
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: task.ID, Agent: "rita", Fence: cl.Fence, AgentFence: first.Fence}, api.ErrFenced, stale)
	b.ok(api.OpTaskProgress, api.TaskProgressCommand{ID: task.ID, Agent: "rita", Fence: cl.Fence, AgentFence: cur.Fence})
	b.refused(api.OpTaskHandoff, api.TaskHandoffCommand{ID: task.ID, Agent: "rita", Fence: cl.Fence, To: "rex", AgentFence: first.Fence}, api.ErrFenced, stale)
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: task.ID, Agent: "rita", Fence: cl.Fence, AgentFence: first.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "late"}}, api.ErrFenced, stale)
	if res := mustTaskResult(t, b.ok(api.OpTaskComplete, api.TaskCompleteCommand{ID: task.ID, Agent: "rita", Fence: cl.Fence, AgentFence: cur.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "done"}})); res.State != api.TaskSucceeded {
		t.Errorf("completion under the current fence: %+v", res)
	}
}

// TestAgentLeaseInvalid: bad input names the field and the limit.
func TestAgentLeaseInvalid(t *testing.T) {
	b := newTaskBox(t)
	for _, tc := range []struct {
		op   api.Op
		body any
		want string
	}{
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{LeaseHolder: hostA, TTL: leaseTTL}, "agent: required"},
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: api.LeaseHolder{Instance: "x1"}, TTL: leaseTTL}, "node: required"},
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: api.LeaseHolder{Node: "n1"}, TTL: leaseTTL}, "instance: required"},
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: api.LeaseHolder{Node: "N 1", Instance: "x1"}, TTL: leaseTTL}, "node:"},
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: hostA}, "ttl: required"},
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: hostA, TTL: api.LockTTL(500 * time.Millisecond)}, "ttl: 500ms is outside the limits 1s to 10m0s"},
		{api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "rita", LeaseHolder: hostA, TTL: api.LockTTL(time.Hour)}, "ttl: 1h0m0s is outside the limits 1s to 10m0s"},
		{api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, TTL: leaseTTL}, "fence: required"},
		{api.OpAgentLeaseRelease, api.AgentLeaseReleaseCommand{Agent: "rita", LeaseHolder: hostA}, "fence: required"},
	} {
		b.refused(tc.op, tc.body, api.ErrInvalid, tc.want)
	}
}

func mustCursor(tb testing.TB, r any) *api.Cursor {
	tb.Helper()
	c, ok := r.(*api.Cursor)
	if !ok {
		tb.Fatalf("result = %T (%v), want *Cursor", r, r)
	}
	return c
}

// NameFrom makes an id of a host name, or gives the fallback.
func TestNameFrom(t *testing.T) {
	for in, want := range map[string]string{
		"Build-Box.example.COM": "build-box.example.com",
		"my host (2)":           "my-host-2",
		"--._":                  "fallback",
		"":                      "fallback",
		strings.Repeat("a", 70): strings.Repeat("a", 64),
	} {
		if got := api.NameFrom(in, "fallback"); got != want {
			t.Errorf("NameFrom(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAgentLeaseGoesWithTheAgent: unregistering an agent removes its
// lease, so a holder's renewal is refused (not found: the watcher
// stands by, as when fenced) and its next acquire is a new
// grant with a higher fence; another agent's lease stays.
func TestAgentLeaseGoesWithTheAgent(t *testing.T) {
	b := newTaskBox(t)
	l := b.acquireLease("rita", hostA, api.AgentLeaseGranted)
	b.acquireLease("rita", hostB, api.AgentLeaseStandby)
	other := b.acquireLease("rex", hostB, api.AgentLeaseGranted)
	b.ok(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "rita"})
	if _, err := b.f.AgentLeaseOf("rita"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("rita's lease after unregister: %v, want not found", err)
	}
	if got, err := b.f.AgentLeaseOf("rex"); err != nil || got.Fence != other.Fence {
		t.Fatalf("rex's lease = %+v, %v; want it kept", got, err)
	}
	b.refused(api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "rita", LeaseHolder: hostA, Fence: l.Fence, TTL: leaseTTL}, api.ErrNotFound, "has no lease")
	if nl := b.acquireLease("rita", hostA, api.AgentLeaseGranted); nl.Fence <= l.Fence {
		t.Fatalf("grant after unregister = %+v, want a fence above %d", nl, l.Fence)
	}
}
