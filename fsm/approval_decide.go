package fsm

import (
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyApprovalDecide records one approver's decision and answers the
// approval after it, with its decisions. In order, before anything is
// written:
//
//   - the approver must be listed, by id or by its registered role (a
//     *ForbiddenError naming the list);
//   - the approval must be pending, the decision one of its options, the
//     hash the current action's, and the approver must not have decided
//     on this action yet (each a *ConflictError saying what to do);
//   - approve counts one: at quorum distinct approvals it is approved;
//     reject rejects it; modify replaces the action and its hash, voids
//     the approvals so far (kept in its decisions, Voided) and leaves it
//     pending, its deadline unchanged. An approval a task opened is
//     answered by a modify: it is approved with the new action (its one
//     approver wrote it), and the task goes back to its claimant to carry
//     that out;
//   - a final outcome sends a hitl_decision from the approver to the
//     requester, in reply to the request, through send (the rules may
//     refuse it, and with it the decision), and moves the task that
//     opened it (settleTask).
//
// The audit gets HITL_DECISION: approve by alice (a modify names the new
// hash).
func (f *FSM) applyApprovalDecide(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	a := f.taskOp(tx, api.OpApprovalDecide, index, ts)
	var cmd api.ApprovalDecideCommand
	if err := decodeCommand(a.op, body, &cmd); err != nil {
		return nil, err
	}
	ap, err := approvalByID(tx, cmd.ID)
	if err != nil {
		return nil, a.errorf(err)
	}
	if err := mayDecide(tx, ap, cmd.Approver); err != nil {
		return nil, a.errorf(err)
	}
	hist, err := approvalHistory(tx, ap.Seq)
	if err != nil {
		return nil, a.errorf(err)
	}
	if err := checkDecision(ap, hist, &cmd); err != nil {
		return nil, a.errorf(err)
	}
	before := approvalKeysOf(ap)
	ev := a.approvalEvent(ap, cmd.Approver, cmd.Decision, cmd.Comment)
	line := cmd.Decision + " by " + cmd.Approver
	modified := false
	switch cmd.Decision {
	case api.DecisionApprove:
		ap.Approvals = len(slices.DeleteFunc(liveDecisions(hist), func(e api.ApprovalEvent) bool { return e.Event != api.DecisionApprove })) + 1
		if ap.Approvals >= ap.Quorum {
			ap.State = api.ApprovalApproved
		}
	case api.DecisionReject:
		ap.State = api.ApprovalRejected
	case api.DecisionModify:
		canon, err := api.CanonicalJSON(cmd.Action)
		if err != nil {
			return nil, a.errorf(api.FieldErrorf("action", "not one JSON value: %v", err))
		}
		hash, err := api.ActionHash(canon)
		if err != nil {
			return nil, a.errorf(api.FieldErrorf("action", "not one JSON value: %v", err))
		}
		if hash == ap.ActionHash {
			return nil, a.errorf(conflict("approval %s: the action you sent is the current one (%s): approve it instead", ap.ID, hash))
		}
		ev.Action = canon
		ap.Action, ap.ActionHash, ap.Approvals = canon, hash, 0
		line += " → " + hash
		t, err := a.linkedTask(ap)
		if err != nil {
			return nil, a.errorf(err)
		}
		if t != nil {
			ap.State, ap.Approvals, modified = api.ApprovalApproved, 1, true
		}
	}
	if ap.State.Final() {
		if err := a.settleTask(ap, cmd.Approver, modified); err != nil {
			return nil, a.errorf(err)
		}
		m := decisionMessage(ap, cmd.Approver, ts, decisionText(ap, hist, &cmd, modified))
		if err := a.send(&m); err != nil {
			return nil, a.errorf(err)
		}
	}
	a.changeApproval(before, ap, ev, api.AuditEvent{From: cmd.Approver, To: []string{ap.From}, Label: "HITL_DECISION", Text: line})
	a.commit()
	if hist, err = approvalHistory(tx, ap.Seq); err != nil {
		return nil, a.errorf(err)
	}
	ap.Decisions = decisionsOf(hist)
	return ap, nil
}

// checkDecision refuses a decision that does not fit ap as it stands
// (history hist): not pending, not one of its options, made on another
// hash, or the approver's second on this action.
func checkDecision(ap *api.Approval, hist []api.ApprovalEvent, cmd *api.ApprovalDecideCommand) error {
	switch {
	case ap.State != api.ApprovalPending:
		return conflict("approval %s is %s: no decision changes it any more", ap.ID, ap.State)
	case len(ap.Options) > 0 && !slices.Contains(ap.Options, cmd.Decision):
		return conflict("approval %s takes %s, not %s", ap.ID, strings.Join(ap.Options, ", "), cmd.Decision)
	case cmd.ActionHash != ap.ActionHash:
		return conflict("approval %s: the action changed to %s: look at it again (GET /v1/approvals/%s) and decide on that hash", ap.ID, ap.ActionHash, ap.ID)
	}
	for _, ev := range liveDecisions(hist) {
		if ev.Actor == cmd.Approver {
			return conflict("approval %s: %s already decided %s on %s (seq %d): each approver counts once per action", ap.ID, cmd.Approver, ev.Event, ev.ActionHash, ev.Seq)
		}
	}
	return nil
}

// decisionText is the text of the hitl_decision of ap's outcome by the
// decision cmd: who approved, who rejected and why, or the modified
// action the task's claimant is to carry out.
func decisionText(ap *api.Approval, hist []api.ApprovalEvent, cmd *api.ApprovalDecideCommand, modified bool) string {
	var text string
	switch {
	case modified:
		text = fmt.Sprintf("modified by %s: carry out this action instead (%s):\n%s", cmd.Approver, ap.ActionHash, ap.Action)
	case ap.State == api.ApprovalApproved:
		var by []string
		for _, ev := range liveDecisions(hist) {
			if ev.Event == api.DecisionApprove {
				by = append(by, ev.Actor)
			}
		}
		text = "approved by " + strings.Join(append(by, cmd.Approver), ", ")
	default:
		text = "rejected by " + cmd.Approver
	}
	if cmd.Comment != "" {
		text += "\n\n" + cmd.Comment
	}
	return text
}
