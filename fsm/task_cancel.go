package fsm

import (
	"fmt"

	"github.com/maos-project/maos/api"
)

// cancel cancels a task that has not ended: waiting, ready,
// running (its lease ends with it; its claimant learns from the 409 of its
// next report) or awaiting_approval (its approval is cancelled with it). Only the creator cancels (a *ForbiddenError otherwise;
// the API lets an admin act as the creator); a task that ended otherwise
// is a *ConflictError. Its dependents fail (cascade). Cancelling a
// cancelled task again, as a retry does, answers its state and changes
// nothing.
func (a *taskOp) cancel(cmd *api.TaskCancelCommand, t *api.Task) (any, error) {
	if cmd.From != t.From {
		return nil, a.errorf(&api.ForbiddenError{Reason: fmt.Sprintf("task %s was created by %s: only its creator cancels it, not %s", t.ID, t.From, cmd.From)})
	}
	switch {
	case t.State == api.TaskCancelled:
		last, err := lastEvent(a.tx, t.Seq)
		if err != nil {
			return nil, a.errorf(err)
		}
		return &api.TaskResult{ID: t.ID, Seq: last.Seq, State: t.State, Attempt: t.Attempt}, nil
	case t.State.Final():
		return nil, a.errorf(conflict("task %s has ended (%s%s): nothing to cancel", t.ID, t.State, endedHow(t)))
	}
	if t.State == api.TaskAwaitingApproval {
		if err := a.cancelTaskApproval(t, cmd.From); err != nil {
			return nil, a.errorf(err)
		}
	}
	before := keysOf(t)
	t.State, t.LeaseExpires = api.TaskCancelled, nil
	a.change(before, t, a.event(cmd.From, "cancelled", cmd.Reason))
	if err := a.cascade(t); err != nil {
		return nil, a.errorf(err)
	}
	a.commit()
	return a.result(t), nil
}

// cancelTaskApproval plans the cancel of the approval t awaits, by its
// creator from, who cancels t: nobody is left to decide on it.
func (a *taskOp) cancelTaskApproval(t *api.Task, from string) error {
	ap, err := approvalByID(a.tx, t.ApprovalID)
	if err != nil || ap.State != api.ApprovalPending {
		return err
	}
	before := approvalKeysOf(ap)
	ap.State = api.ApprovalCancelled
	a.changeApproval(before, ap, a.approvalEvent(ap, from, "cancelled", "task "+t.ID+" was cancelled"),
		api.AuditEvent{From: from, To: ap.Approvers, Label: "HITL_CANCELLED", Text: api.FirstLine(ap.Title, 200) + " by " + from + ": task " + t.ID + " was cancelled"})
	return nil
}
