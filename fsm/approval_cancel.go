package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyApprovalCancel cancels a pending approval. Only its requester
// cancels it (a *ForbiddenError otherwise; the API lets an admin act as
// the requester); one decided otherwise is a *ConflictError naming its
// state. Cancelling a cancelled approval again, as a retry does, answers
// its state at the cancel and changes nothing. The task that opened it,
// if any, fails (approval_cancelled). No message: the requester is the
// one who cancelled.
func (f *FSM) applyApprovalCancel(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	a := f.taskOp(tx, api.OpApprovalCancel, index, ts)
	var cmd api.ApprovalCancelCommand
	if err := decodeCommand(a.op, body, &cmd); err != nil {
		return nil, err
	}
	ap, err := approvalByID(tx, cmd.ID)
	if err != nil {
		return nil, a.errorf(err)
	}
	if cmd.From != ap.From {
		return nil, a.errorf(&api.ForbiddenError{Reason: fmt.Sprintf("approval %s was requested by %s: only its requester cancels it, not %s", ap.ID, ap.From, cmd.From)})
	}
	switch {
	case ap.State == api.ApprovalCancelled:
		hist, err := approvalHistory(tx, ap.Seq)
		if err != nil {
			return nil, a.errorf(err)
		}
		if len(hist) == 0 {
			return nil, a.errorf(fmt.Errorf("approval at seq %d: no history", ap.Seq))
		}
		res := a.approvalResult(ap)
		res.Seq = hist[len(hist)-1].Seq
		return res, nil
	case ap.State.Final():
		return nil, a.errorf(conflict("approval %s is %s: nothing to cancel", ap.ID, ap.State))
	}
	before := approvalKeysOf(ap)
	ap.State = api.ApprovalCancelled
	if err := a.settleTask(ap, cmd.From, false); err != nil {
		return nil, a.errorf(err)
	}
	line := "by " + cmd.From
	if cmd.Reason != "" {
		line += ": " + api.FirstLine(cmd.Reason, 200)
	}
	a.changeApproval(before, ap, a.approvalEvent(ap, cmd.From, "cancelled", cmd.Reason),
		api.AuditEvent{From: cmd.From, To: ap.Approvers, Label: "HITL_CANCELLED", Text: api.FirstLine(ap.Title, 200) + " " + line})
	a.commit()
	return a.approvalResult(ap), nil
}
