package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// opTaskTick is OpTick's name before approvals made the tick serve more
// than tasks. Logs written then hold it, so it still applies (the
// registry maps it to the same function); nothing proposes it.
const opTaskTick api.Op = "task_tick"

// TickResult is what a tick did: the tasks whose lease it expired
// back to ready, those that failed (a timeout at max_attempts, an
// approval that expired, and the dependents that failed with them), the
// approvals it expired and escalated, and the id of the queued message it
// delivered ("" for none).
type TickResult struct {
	Expired            []string `json:"expired,omitempty"`
	Failed             []string `json:"failed,omitempty"`
	ApprovalsExpired   []string `json:"approvals_expired,omitempty"`
	ApprovalsEscalated []string `json:"approvals_escalated,omitempty"`
	Delivered          string   `json:"delivered,omitempty"`
}

// Did reports whether the tick changed anything.
func (r *TickResult) Did() bool {
	return len(r.Expired)+len(r.Failed)+len(r.ApprovalsExpired)+len(r.ApprovalsEscalated) > 0 || r.Delivered != ""
}

// applyTick expires, at the entry's time ts, every lease that ended
// at or before it (lease_expires ≤ ts), earliest first. A task whose
// lapsed leases stay below max_attempts (expiries < max_attempts; claims
// a handoff ended do not count) is ready again, its claim cleared,
// claimable from ts + TaskBackoff(expiries); one whose lease lapses for
// the max_attempts-th time fails with error_type timeout: its completion reply goes to
// its creator and an incident (priority high) to its creator and the
// cluster's escalation_target, both from SystemSender, and its dependents
// fail (cascade). Then every pending approval whose deadline is at or
// before ts, earliest first (expireApproval). Then it delivers the oldest
// queued message, if any (deliverQueued). A tick with nothing due
// changes nothing but the applied index.
func (f *FSM) applyTick(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	a := f.taskOp(tx, api.OpTick, index, ts)
	var cmd api.TickCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, a.errorf(fmt.Errorf("decode: %w", err))
	}
	res := &TickResult{}
	target := readConfig(tx).EscalationTarget
	for _, seq := range leasesUpTo(tx, ts) {
		t, err := a.load(seq)
		if err != nil {
			return nil, a.errorf(err)
		}
		before := keysOf(t)
		holder, fence, ended := t.ClaimedBy, t.Fence, stamp(*t.LeaseExpires)
		t.Expiries++
		t.ClaimedBy, t.Fence, t.LeaseExpires = "", 0, nil
		if t.Expiries < t.MaxAttempts {
			t.State = api.TaskReady
			t.ReadyAt = a.at(TaskBackoff(t.Expiries))
			a.change(before, t, a.event(api.SystemSender, "expired", fmt.Sprintf("the lease of %s (attempt %d, fence %d) ended at %s, lapse %d of %d; claimable again from %s",
				holder, t.Attempt, fence, ended, t.Expiries, t.MaxAttempts, stamp(*t.ReadyAt))))
			res.Expired = append(res.Expired, t.ID)
			continue
		}
		why := fmt.Sprintf("its lease expired %d times (max_attempts %d); the last claimant was %s (fence %d)", t.Expiries, t.MaxAttempts, holder, fence)
		t.State = api.TaskFailed
		t.Completion = &api.TaskCompletion{Status: api.TaskStatusFailure, Result: "timed out: " + why,
			Error: &api.TaskError{ErrorType: api.TaskErrorTimeout, ErrorMessage: why, RetryCount: t.Attempt - 1,
				SuggestedAction: "find out why its claimants did not finish it, then create it again"}}
		a.change(before, t, a.event(api.SystemSender, "failed", api.TaskErrorTimeout+": "+why),
			completionReply(t, api.SystemSender, ts), incident(t, ts, target))
		if err := a.cascade(t); err != nil {
			return nil, a.errorf(err)
		}
	}
	for _, seq := range approvalsDueBy(tx, ts) {
		ap, err := getApproval(tx, seq)
		if err != nil {
			return nil, a.errorf(err)
		}
		escalated, err := a.expireApproval(ap, target)
		if err != nil {
			return nil, a.errorf(err)
		}
		if escalated {
			res.ApprovalsEscalated = append(res.ApprovalsEscalated, ap.ID)
		} else {
			res.ApprovalsExpired = append(res.ApprovalsExpired, ap.ID)
		}
	}
	for _, c := range a.plan {
		if c.t.State == api.TaskFailed {
			res.Failed = append(res.Failed, c.t.ID)
		}
	}
	a.commit()
	res.Delivered = f.deliverQueued(tx, index, ts)
	return res, nil
}

// expireApproval handles pending approval ap at its deadline (the tick's
// time): with on_timeout escalate and not escalated yet, it is escalated
// (its deadline one timeout on) and SystemSender's alert to target (the
// cluster's escalation_target; unset: the requester) is queued; otherwise
// it expires, its hitl_decision from SystemSender to the requester is
// queued, and the task that opened it fails (settleTask). It reports
// whether it escalated.
func (a *taskOp) expireApproval(ap *api.Approval, target string) (bool, error) {
	before := approvalKeysOf(ap)
	if ap.OnTimeout == api.OnTimeoutEscalate && !ap.Escalated {
		if target == "" {
			target = ap.From
		}
		ap.Escalated = true
		ap.Deadline = unixUTC(addTTL(ap.Deadline.UnixNano(), time.Duration(ap.TimeoutSeconds)*time.Second))
		a.queued = append(a.queued, escalationAlert(ap, a.ts, target))
		a.changeApproval(before, ap, a.approvalEvent(ap, api.SystemSender, "escalated", "to "+target+"; deadline "+stamp(ap.Deadline)),
			api.AuditEvent{From: api.SystemSender, To: []string{target}, Label: "HITL_ESCALATED", Text: api.FirstLine(ap.Title, 200) + " (until " + stamp(ap.Deadline) + ")"})
		return true, nil
	}
	ap.State = api.ApprovalExpired
	if err := a.settleTask(ap, api.SystemSender, false); err != nil {
		return false, err
	}
	text := fmt.Sprintf("expired: no decision by %s (%d of %d approvals)", stamp(ap.Deadline), ap.Approvals, ap.Quorum)
	a.queued = append(a.queued, decisionMessage(ap, api.SystemSender, a.ts, text))
	a.changeApproval(before, ap, a.approvalEvent(ap, api.SystemSender, "expired", ""),
		api.AuditEvent{From: api.SystemSender, To: []string{ap.From}, Label: "HITL_EXPIRED", Text: api.FirstLine(ap.Title, 200)})
	return false, nil
}
