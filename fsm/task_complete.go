package fsm

import (
	"bytes"
	"encoding/json"

	"github.com/maos-project/maos/api"
)

// complete ends a running task with the claimant's completion
// and posts its task_completion reply to the creator. Only the current
// claimant under its current fence, its lease live at the entry's time,
// completes (checkClaimant). success and partial_success make it
// succeeded, failure failed. Its dependents follow (cascade). The reply
// goes through send: the rules may refuse it, and with it the completion.
//
// requires_approval makes it awaiting_approval instead (no lease; its
// dependents keep waiting) and opens, in the same entry, the approval of
// its proposed action by its creator (taskApprovalRequest): the
// approval's hitl_approval_request, from the claimant to the creator in
// reply to the delegation, is the entry's message in place of the
// completion reply. The approval then moves the task (settleTask).
//
// A retried complete (the same claimant, fence and completion) of the
// task it ended, or left awaiting its approval, answers the stored result
// and changes nothing.
func (a *taskOp) complete(cmd *api.TaskCompleteCommand, t *api.Task) (any, error) {
	if (t.State.Final() || t.State == api.TaskAwaitingApproval) && t.ClaimedBy == cmd.Agent && t.Fence == cmd.Fence && sameCompletion(t.Completion, &cmd.Completion) {
		return a.retried(t)
	}
	if err := a.checkClaimant(t, cmd.Agent, cmd.Fence); err != nil {
		return nil, a.errorf(err)
	}
	before := keysOf(t)
	c := cmd.Completion
	t.Completion, t.LeaseExpires = &c, nil
	if c.Status == api.TaskStatusRequiresApproval {
		return a.awaitApproval(cmd, t, before)
	}
	t.State = api.TaskSucceeded
	if c.Status == api.TaskStatusFailure {
		t.State = api.TaskFailed
	}
	a.change(before, t, a.event(cmd.Agent, "completed", completionHead(&c)))
	if err := a.cascade(t); err != nil {
		return nil, a.errorf(err)
	}
	m := completionReply(t, cmd.Agent, a.ts)
	if err := a.send(&m); err != nil {
		return nil, a.errorf(err)
	}
	a.commit()
	return a.result(t), nil
}

// awaitApproval makes t (its completion set, its lease ended; before its
// keys) await the approval its requires_approval completion opens.
func (a *taskOp) awaitApproval(cmd *api.TaskCompleteCommand, t *api.Task, before taskKeys) (any, error) {
	req, err := taskApprovalRequest(t, t.Completion, a.ts)
	if err != nil {
		return nil, a.errorf(err)
	}
	t.State, t.ApprovalID, t.ApprovedAction = api.TaskAwaitingApproval, req.ID, nil
	a.change(before, t, a.event(cmd.Agent, "completed", completionHead(t.Completion)+"; awaits approval "+req.ID+" by "+t.From))
	if _, err := a.openApproval(req, t.MessageID); err != nil {
		return nil, a.errorf(err)
	}
	a.commit()
	return a.result(t), nil
}

// sameCompletion reports whether two completions are the same as stored
// (JSON, so spacing inside the raw fields does not count).
func sameCompletion(stored, c *api.TaskCompletion) bool {
	if stored == nil {
		return false
	}
	x, err1 := json.Marshal(stored)
	y, err2 := json.Marshal(c)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
