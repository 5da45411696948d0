package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// TaskTickResult is what a tick did: the tasks whose lease it expired
// back to ready, those that failed (a timeout at max_attempts, and the
// dependents that failed with them), and the id of the queued message it
// delivered ("" for none).
type TaskTickResult struct {
	Expired   []string `json:"expired,omitempty"`
	Failed    []string `json:"failed,omitempty"`
	Delivered string   `json:"delivered,omitempty"`
}

// applyTaskTick expires, at the entry's time ts, every lease that ended
// at or before it (lease_expires ≤ ts), earliest first. A task with
// attempts left (attempt < max_attempts) is ready again, its claim
// cleared, claimable from ts + TaskBackoff(expiries); one at its last
// attempt fails with error_type timeout: its completion reply goes to
// its creator and an incident (priority high) to its creator and the
// cluster's escalation_target, both from SystemSender, and its dependents
// fail (cascade). Then it delivers the oldest queued message, if any
// (deliverQueued). A tick with nothing due changes nothing but the
// applied index.
func (f *FSM) applyTaskTick(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	a := f.taskOp(tx, OpTaskTick, index, ts)
	var cmd TaskTickCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, a.errorf(fmt.Errorf("decode: %w", err))
	}
	res := &TaskTickResult{}
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
		if t.Attempt < t.MaxAttempts {
			t.State = TaskReady
			t.ReadyAt = a.at(TaskBackoff(t.Expiries))
			a.change(before, t, a.event(SystemSender, "expired", fmt.Sprintf("the lease of %s (attempt %d of %d, fence %d) ended at %s; claimable again from %s",
				holder, t.Attempt, t.MaxAttempts, fence, ended, stamp(*t.ReadyAt))))
			res.Expired = append(res.Expired, t.ID)
			continue
		}
		why := fmt.Sprintf("its lease expired %d times (max_attempts %d); the last claimant was %s (fence %d)", t.Expiries, t.MaxAttempts, holder, fence)
		t.State = TaskFailed
		t.Completion = &TaskCompletion{Status: TaskStatusFailure, Result: "timed out: " + why,
			Error: &TaskError{ErrorType: TaskErrorTimeout, ErrorMessage: why, RetryCount: t.Attempt - 1,
				SuggestedAction: "find out why its claimants did not finish it, then create it again"}}
		a.change(before, t, a.event(SystemSender, "failed", TaskErrorTimeout+": "+why),
			completionReply(t, SystemSender, ts), incident(t, ts, target))
		if err := a.cascade(t); err != nil {
			return nil, a.errorf(err)
		}
	}
	for _, c := range a.plan {
		if c.t.State == TaskFailed {
			res.Failed = append(res.Failed, c.t.ID)
		}
	}
	a.commit()
	res.Delivered = f.deliverQueued(tx, index, ts)
	return res, nil
}
