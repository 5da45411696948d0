package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyApprovalRequest opens an approval and posts its
// hitl_approval_request message from the requester to the approvers. In
// order, before anything is written:
//
//   - an id stored before answers the original result (the same request)
//     or is a *ConflictError (another request);
//   - with known_names (set by the node that accepted it), an approver
//     no one answers to (an agent neither registered nor a sender, a
//     role no agent has) is a *NotFoundError, unless unknown_recipients
//     is accept (checkKnown);
//   - the action's hash is taken over its canonical JSON; the deadline is
//     the entry's time plus the timeout;
//   - the message goes through send: the requester's registration,
//     strict_senders and the rules decide as for any message, and a
//     refusal refuses the request. A role no agent holds yet is fine
//     without known_names or under unknown_recipients accept.
//
// The audit gets HITL_REQUEST: title (quorum of the listed entries; a
// role counts once).
func (f *FSM) applyApprovalRequest(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	a := f.taskOp(tx, api.OpApprovalRequest, index, ts)
	var cmd api.ApprovalRequestCommand
	if err := decodeCommand(a.op, body, &cmd); err != nil {
		return nil, err
	}
	if rec, ok := getApprovalID(tx, cmd.ID); ok {
		if rec.sum != requestSum(&cmd) {
			return nil, a.errorf(conflict("approval id %s is taken by another approval (requested at seq %d): request yours with a new id", cmd.ID, rec.seq))
		}
		first, err := approvalEventAt(tx, rec.seq, rec.seq)
		if err != nil {
			return nil, a.errorf(err)
		}
		return &api.ApprovalResult{ID: cmd.ID, Seq: rec.seq, State: first.State, ActionHash: first.ActionHash, Quorum: cmd.Quorum}, nil
	}
	if cmd.KnownNames {
		a.knownNames = true
		if err := checkKnown(tx, "approvers", cmd.From, cmd.Approvers); err != nil {
			return nil, a.errorf(err)
		}
	}
	ap, err := a.openApproval(&cmd, "")
	if err != nil {
		return nil, a.errorf(err)
	}
	a.commit()
	return a.approvalResult(ap), nil
}
