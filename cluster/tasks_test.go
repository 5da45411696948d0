package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
)

// The leader expires lapsed leases by itself: nobody proposes anything
// after the claims, and still a task with attempts left is ready again
// and one at its last attempt fails with a timeout, its dependents with
// it; the messages the state machine sends about them (the creator's
// replies, the incident to the escalation target) are delivered by the
// ticks that follow; then the loop rests, proposing nothing more.
func TestLeaderExpiresLapsedLeases(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	cl := c.Follower().Client // writes forwarded, reads strong: any node will do
	for _, a := range []api.RegisterAgentCommand{{ID: "sup", Role: "supervisor"}, {ID: "rita", Role: "agent"}} {
		if _, err := cl.RegisterAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.SetConfig(ctx, "escalation_target", "role:supervisor"); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []api.TaskCreateCommand{
		{ID: "t-retry", From: "lead", To: "rita", Title: "retried", TimeoutSeconds: 1, MaxAttempts: 2},
		{ID: "t-last", From: "lead", To: "rita", Title: "last attempt", TimeoutSeconds: 1, MaxAttempts: 1},
		{ID: "t-dep1", From: "lead", To: "rita", Title: "after t-last", DependsOn: []string{"t-last"}},
		{ID: "t-dep2", From: "lead", To: "rita", Title: "after t-last too", DependsOn: []string{"t-last"}},
	} {
		if _, err := cl.CreateTask(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"t-retry", "t-last"} {
		if _, err := cl.ClaimTask(ctx, id, "rita"); err != nil {
			t.Fatal(err)
		}
	}
	task := func(id string) *api.Task {
		t.Helper()
		tk, err := cl.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	clustertest.WaitFor(t, 15*time.Second, "both leases expired", func() bool {
		return task("t-retry").State == api.TaskReady && task("t-last").State == api.TaskFailed
	})
	if r := task("t-retry"); r.Expiries != 1 || r.ClaimedBy != "" || r.ReadyAt == nil || r.Attempt != 1 {
		t.Errorf("t-retry after its lease lapsed: %+v", r)
	}
	if l := task("t-last"); l.Completion == nil || l.Completion.Error == nil || l.Completion.Error.ErrorType != api.TaskErrorTimeout {
		t.Errorf("t-last after its last lease lapsed: %+v", l)
	}
	for _, id := range []string{"t-dep1", "t-dep2"} {
		if d := task(id); d.State != api.TaskFailed || d.Completion.Error.ErrorType != api.TaskErrorDependencyFailed {
			t.Errorf("%s: %+v", id, d)
		}
	}
	// The queued messages arrive, one a tick: three completion replies to
	// lead, the incident to lead and to sup.
	types := func(agent string) []string {
		return fromMaos(ctx, t, cl, agent, func(m api.InboxEntry) string { return m.Type })
	}
	clustertest.WaitFor(t, 10*time.Second, "the replies and the incident", func() bool {
		return slices.Equal(types("lead"), []string{api.TypeTaskIncident, api.TypeTaskCompletion, api.TypeTaskCompletion, api.TypeTaskCompletion}) &&
			slices.Equal(types("sup"), []string{api.TypeTaskIncident})
	})
	// Then nothing is due and the leader proposes nothing more.
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if st2, err := cl.Status(ctx); err != nil || st2.CommitIndex != st.CommitIndex {
		t.Errorf("commit index moved from %d to %d (%v) with nothing due", st.CommitIndex, st2.CommitIndex, err)
	}
}

// The same loop serves approval deadlines: nobody proposes anything after
// the requests, and still the leader escalates one (an alert to the
// escalation target) and then expires it, expires the other, and tells
// the requester.
func TestLeaderExpiresAndEscalatesApprovals(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	cl := c.Follower().Client
	if _, err := cl.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "sup", Role: "supervisor"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SetConfig(ctx, "escalation_target", "sup"); err != nil {
		t.Fatal(err)
	}
	n := c.Follower()
	for _, cmd := range []api.ApprovalRequestCommand{
		{ID: "a-reject", From: "lead", Approvers: []string{"alice"}, Title: "expires", Action: []byte(`{"x":1}`),
			Timeout: api.ApprovalTimeout(time.Second)},
		{ID: "a-escalate", From: "lead", Approvers: []string{"alice"}, Title: "escalates", Action: []byte(`{"x":2}`),
			Timeout: api.ApprovalTimeout(time.Second), OnTimeout: api.OnTimeoutEscalate},
	} {
		cmd.Normalize(time.Now())
		if _, err := n.Apply(ctx, api.OpApprovalRequest, cmd); err != nil {
			t.Fatal(err)
		}
	}
	state := func(id string) api.ApprovalState {
		t.Helper()
		ap, err := c.Leader().FSM().Approval(id)
		if err != nil {
			t.Fatal(err)
		}
		return ap.State
	}
	clustertest.WaitFor(t, 15*time.Second, "both approvals expired", func() bool {
		return state("a-reject") == api.ApprovalExpired && state("a-escalate") == api.ApprovalExpired
	})
	if ap, _ := c.Leader().FSM().Approval("a-escalate"); !ap.Escalated {
		t.Errorf("a-escalate expired without its escalation: %+v", ap)
	}
	notices := func(agent string) []string {
		return fromMaos(ctx, t, cl, agent, func(m api.InboxEntry) string { return m.Type + " " + m.CorrelationID })
	}
	clustertest.WaitFor(t, 10*time.Second, "the alert and the expiry notices", func() bool {
		return slices.Equal(notices("sup"), []string{"alert a-escalate"}) &&
			slices.Equal(notices("lead"), []string{"hitl_decision a-escalate", "hitl_decision a-reject"})
	})
}

// fromMaos lists, sorted, what reads of each message the state machine
// (api.SystemSender) sent to agent, as its inbox stands (a strong read
// through cl, the first 100).
func fromMaos(ctx context.Context, t *testing.T, cl *client.Client, agent string, what func(api.InboxEntry) string) []string {
	t.Helper()
	page, err := cl.Inbox(ctx, agent, api.InboxQuery{Limit: 100}, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Messages {
		if m.From == api.SystemSender {
			out = append(out, what(m))
		}
	}
	slices.Sort(out)
	return out
}
