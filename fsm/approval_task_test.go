package fsm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// awaiting creates a task from boss for rita with a dependent, claims it
// and completes it with requires_approval (proposing action when given):
// the task, its dependent's id, the claim's fence and the approval.
func (b *apprBox) awaiting(action string) (*api.Task, string, uint64, *api.Approval) {
	b.t.Helper()
	c := b.newTask("rita")
	b.create(c)
	dep := b.newTask("eve", c.ID)
	b.create(dep)
	fence := b.claim(c.ID, "rita").Fence
	comp := api.TaskCompletion{Status: api.TaskStatusRequiresApproval, Result: "ready to merge", Outputs: []string{"pr.md"}, Rationale: "touches prod"}
	if action != "" {
		comp.ProposedAction = json.RawMessage(action)
	}
	r := b.complete(c.ID, "rita", fence, comp)
	if r.State != api.TaskAwaitingApproval {
		b.t.Fatalf("requires_approval completion = %+v, want awaiting_approval", r)
	}
	task := b.task(c.ID)
	return task, dep.ID, fence, b.approval(task.ApprovalID)
}

// A requires_approval completion makes the task await an approval opened
// in the same entry: from the claimant to the creator, quorum 1, the
// proposed action (or the result), 24 h; no lease, dependents wait, the
// claimant's reports and others' claims are refused, a retried completion
// answers.
func TestTaskRequiresApprovalAwaits(t *testing.T) {
	b := newApprBox(t)
	task, depID, fence, ap := b.awaiting("")
	completedAt := b.idx
	wantID := "appr" + strings.TrimPrefix(api.DerivedID("rita", b.now(), "task-approval:"+task.ID+":1:"+itoa(fence)), "msg")
	wantAction := `{"outputs":["pr.md"],"result":"ready to merge","task_id":"` + task.ID + `"}`
	if ap.ID != wantID || ap.Seq != completedAt || ap.From != "rita" || !slices.Equal(ap.Approvers, []string{"boss"}) || ap.Quorum != 1 ||
		ap.TaskID != task.ID || string(ap.Action) != wantAction || ap.TimeoutSeconds != int(api.DefaultTaskApprovalTimeout/time.Second) ||
		!ap.Deadline.Equal(b.now().Add(24*time.Hour)) || ap.Title != task.Title || ap.Rationale != "touches prod" || ap.State != api.ApprovalPending {
		t.Fatalf("the task's approval = %+v", ap)
	}
	if task.LeaseExpires != nil || task.ClaimedBy != "rita" || task.Completion.Status != api.TaskStatusRequiresApproval {
		t.Errorf("awaiting task = %+v", task)
	}
	if last := task.History[len(task.History)-1]; last.Event != "completed" || last.State != api.TaskAwaitingApproval ||
		last.Detail != "requires_approval; awaits approval "+ap.ID+" by boss" {
		t.Errorf("completion event = %+v", last)
	}
	m := b.lastMessage()
	if m.Seq != completedAt || m.Type != api.TypeHITLRequest || m.From != "rita" || !slices.Equal(m.Recipients, []string{"boss"}) ||
		m.InReplyTo != task.MessageID || m.ID != ap.MessageID {
		t.Errorf("the completion's message = %+v, want the approval request to boss in reply to the delegation", m)
	}
	if b.task(depID).State != api.TaskWaiting {
		t.Error("a dependent of an awaiting task is not waiting")
	}
	if b.pending("boss") != 1 {
		t.Errorf("boss has %d approvals pending, want 1", b.pending("boss"))
	}
	if _, ok := b.f.NextDeadline(); !ok {
		t.Error("the approval's deadline is not due ever")
	}
	// Retried, the completion answers; reports and claims are refused.
	comp := api.TaskCompletion{Status: api.TaskStatusRequiresApproval, Result: "ready to merge", Outputs: []string{"pr.md"}, Rationale: "touches prod"}
	before := dataDump(t, b.f)
	if r := b.complete(task.ID, "rita", fence, comp); r.Seq != completedAt || r.State != api.TaskAwaitingApproval {
		t.Errorf("retried completion = %+v", r)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried completion changed the state")
	}
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: task.ID, Agent: "rita", Fence: fence, Message: "still here"},
		api.ErrConflict, "task "+task.ID+" awaits approval "+ap.ID+" of its completion")
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: task.ID, Agent: "rita"}, api.ErrConflict, "awaits approval "+ap.ID)
	if p, _ := b.f.Tasks(api.TaskQuery{State: api.TaskAwaitingApproval}); len(p.Tasks) != 1 || p.Tasks[0].ID != task.ID {
		t.Errorf("Tasks(awaiting_approval) = %+v", p.Tasks)
	}
	// The proposed action only comes with requires_approval.
	c := b.newTask("rex")
	b.create(c)
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.ID, Agent: "rex", Fence: b.claim(c.ID, "rex").Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, ProposedAction: json.RawMessage(`{"x":1}`)}},
		api.ErrInvalid, "proposed_action: only a requires_approval completion proposes an action")
}

// Approved, the task succeeds and its dependents follow; rejected,
// expired or cancelled, it fails with the approval's error type and its
// dependents fail with it.
func TestTaskApprovalOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		decide  func(b *apprBox, ap *api.Approval)
		state   api.TaskState
		errType string
		dep     api.TaskState
	}{
		{"approved", func(b *apprBox, ap *api.Approval) { b.decide(ap.ID, "boss", api.DecisionApprove, ap.ActionHash) }, api.TaskSucceeded, "", api.TaskReady},
		{"rejected", func(b *apprBox, ap *api.Approval) { b.decide(ap.ID, "boss", api.DecisionReject, ap.ActionHash) }, api.TaskFailed, api.TaskErrorApprovalRejected, api.TaskFailed},
		{"expired", func(b *apprBox, ap *api.Approval) {
			b.jump(ap.Deadline)
			if r := b.tick(); !slices.Equal(r.ApprovalsExpired, []string{ap.ID}) || !slices.Contains(r.Failed, ap.TaskID) {
				b.t.Fatalf("tick at the approval's deadline = %+v", r)
			}
		}, api.TaskFailed, api.TaskErrorApprovalExpired, api.TaskFailed},
		{"cancelled", func(b *apprBox, ap *api.Approval) {
			b.ok(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: ap.ID, From: "rita", Reason: "wrong branch"})
		}, api.TaskFailed, api.TaskErrorApprovalCancelled, api.TaskFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newApprBox(t)
			task, depID, _, ap := b.awaiting(`{"merge":"pr-7"}`)
			if string(ap.Action) != `{"merge":"pr-7"}` {
				t.Errorf("action = %s, want the proposed action", ap.Action)
			}
			tc.decide(b, ap)
			got := b.task(task.ID)
			if got.State != tc.state || (tc.errType != "") != (got.Completion.Error != nil) ||
				(tc.errType != "" && got.Completion.Error.ErrorType != tc.errType) {
				t.Fatalf("task = %s, completion %+v; want %s %s", got.State, got.Completion, tc.state, tc.errType)
			}
			if d := b.task(depID); d.State != tc.dep {
				t.Errorf("dependent = %s, want %s", d.State, tc.dep)
			}
			if tc.state == api.TaskSucceeded {
				if !api.DependencyMet(got) || got.Completion.Status != api.TaskStatusRequiresApproval {
					t.Errorf("an approved task is not a met dependency: %+v", got.Completion)
				}
				return
			}
			// The creator hears of the failure from maos, through the outbox.
			for b.tick().Delivered != "" {
			}
			if !slices.ContainsFunc(b.messagesFrom(api.SystemSender), func(m *api.Message) bool {
				return m.Type == api.TypeTaskCompletion && m.CorrelationID == task.ID && slices.Equal(m.Recipients, []string{"boss"})
			}) {
				t.Error("no completion reply to the creator")
			}
		})
	}
}

// Modified, the task goes back to its claimant: running under a new fence
// and lease, with the approved action, and a message saying so; the
// approval is approved with the new action. The claimant then finishes.
func TestTaskApprovalModified(t *testing.T) {
	b := newApprBox(t)
	task, depID, oldFence, ap := b.awaiting("")
	action := `{"merge":"pr-7","squash":true}`
	got := b.decideCmd(api.ApprovalDecideCommand{ID: ap.ID, Approver: "boss", Decision: api.DecisionModify, ActionHash: ap.ActionHash,
		Action: json.RawMessage(action), Comment: "squash it"})
	at := b.idx
	if got.State != api.ApprovalApproved || got.ActionHash != hashOf(t, action) || got.Approvals != 1 {
		t.Errorf("the modified task approval = %+v", got)
	}
	run := b.task(task.ID)
	if run.State != api.TaskRunning || run.ClaimedBy != "rita" || run.Fence != at || run.Fence == oldFence || run.Completion != nil ||
		!run.LeaseExpires.Equal(b.now().Add(10*time.Second)) || string(run.ApprovedAction) != `{"merge":"pr-7","squash":true}` || run.Attempt != 1 {
		t.Fatalf("task after the modify = %+v", run)
	}
	if last := run.History[len(run.History)-1]; last.Event != "modified" || last.Actor != "boss" {
		t.Errorf("modify event = %+v", last)
	}
	m := b.lastMessage()
	if m.Seq != at || m.Type != api.TypeHITLDecision || m.From != "boss" || !slices.Equal(m.Recipients, []string{"rita"}) ||
		!strings.Contains(m.Content.Text, `{"merge":"pr-7","squash":true}`) || !strings.HasSuffix(m.Content.Text, "squash it") {
		t.Errorf("message to the claimant = %+v", m)
	}
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: task.ID, Agent: "rita", Fence: oldFence, Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}},
		api.ErrConflict, "fence "+itoa(oldFence)+" is not the current claim's")
	if r := b.succeed(task.ID, "rita", run.Fence); r.State != api.TaskSucceeded {
		t.Fatalf("completion under the new fence = %+v", r)
	}
	if b.task(depID).State != api.TaskReady {
		t.Error("the dependent did not follow the success")
	}
}

// A task cancelled while it awaits its approval cancels the approval: no
// one is left to decide on it.
func TestTaskCancelWhileAwaitingCancelsItsApproval(t *testing.T) {
	b := newApprBox(t)
	task, depID, _, ap := b.awaiting("")
	b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: task.ID, From: "boss", Reason: "scrapped"})
	if got := b.approval(ap.ID); got.State != api.ApprovalCancelled {
		t.Errorf("approval = %s, want cancelled", got.State)
	}
	if b.task(task.ID).State != api.TaskCancelled || b.task(depID).State != api.TaskFailed {
		t.Errorf("task %s, dependent %s; want cancelled, failed", b.task(task.ID).State, b.task(depID).State)
	}
	if b.pending("boss") != 0 {
		t.Error("the cancelled approval is still pending for boss")
	}
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: ap.ID, Approver: "boss", Decision: api.DecisionApprove, ActionHash: ap.ActionHash},
		api.ErrConflict, "is cancelled")
}

// A client's approval that names a task moves nothing: only the approval
// the task awaits does.
func TestClientApprovalNamingATaskMovesNothing(t *testing.T) {
	b := newApprBox(t)
	task, _, _, _ := b.awaiting("")
	c := b.request()
	c.TaskID, c.Approvers, c.Quorum = task.ID, []string{"alice"}, 1
	b.open(c)
	b.decide(c.ID, "alice", api.DecisionReject, hashOf(t, string(c.Action)))
	if got := b.task(task.ID); got.State != api.TaskAwaitingApproval {
		t.Errorf("task = %s after another approval naming it was rejected, want awaiting_approval", got.State)
	}
}

// A requires_approval completion meets a dependency once its approval
// approved it; one stored succeeded before approvals existed (no
// approval) never does.
func TestDependencyMetByApproval(t *testing.T) {
	for _, tc := range []struct {
		state      api.TaskState
		status     string
		approvalID string
		want       bool
	}{
		{api.TaskSucceeded, api.TaskStatusSuccess, "", true},
		{api.TaskSucceeded, api.TaskStatusPartialSuccess, "", true},
		{api.TaskSucceeded, api.TaskStatusRequiresApproval, "appr-1", true},
		{api.TaskSucceeded, api.TaskStatusRequiresApproval, "", false},
		{api.TaskAwaitingApproval, api.TaskStatusRequiresApproval, "appr-1", false},
		{api.TaskFailed, api.TaskStatusFailure, "appr-1", false},
	} {
		d := &api.Task{State: tc.state, ApprovalID: tc.approvalID, Completion: &api.TaskCompletion{Status: tc.status}}
		if got := api.DependencyMet(d); got != tc.want {
			t.Errorf("DependencyMet(%s, %s, approval %q) = %t, want %t", tc.state, tc.status, tc.approvalID, got, tc.want)
		}
	}
}
