package fsm

import (
	"bytes"
	"encoding/json"
)

// complete ends a running task with the claimant's completion
// and posts its task_completion reply to the creator. Only the current
// claimant under its current fence, its lease live at the entry's time,
// completes (checkClaimant). success and partial_success make it
// succeeded, failure failed, requires_approval succeeded with that status
// kept (its dependents wait: only success and partial_success count as
// met). Its dependents follow (cascade). The reply goes through send: the
// rules may refuse it, and with it the completion.
//
// A retried complete (the same claimant, fence and completion) of the
// task it ended answers the stored result and changes nothing.
func (a *taskOp) complete(cmd *TaskCompleteCommand, t *Task) (any, error) {
	if t.State.Final() && t.ClaimedBy == cmd.Agent && t.Fence == cmd.Fence && sameCompletion(t.Completion, &cmd.Completion) {
		return a.retried(t)
	}
	if err := a.checkClaimant(t, cmd.Agent, cmd.Fence); err != nil {
		return nil, a.errorf(err)
	}
	before := keysOf(t)
	c := cmd.Completion
	t.Completion, t.LeaseExpires = &c, nil
	t.State = TaskSucceeded
	if c.Status == TaskStatusFailure {
		t.State = TaskFailed
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

// sameCompletion reports whether two completions are the same as stored
// (JSON, so spacing inside the raw fields does not count).
func sameCompletion(stored, c *TaskCompletion) bool {
	if stored == nil {
		return false
	}
	x, err1 := json.Marshal(stored)
	y, err2 := json.Marshal(c)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
