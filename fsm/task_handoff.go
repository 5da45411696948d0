package fsm

import ()

// handoff gives a running task to another assignee (seed 002 §3
// Handoff): back to ready, for the new to, its claim (claimed_by, fence,
// lease) cleared, and a handoff message from the claimant to the new
// assignee. Only the current claimant under its current fence, its lease
// live, hands off (checkClaimant). The message goes through send: the
// rules may refuse it, and with it the handoff.
func (a *taskOp) handoff(cmd *TaskHandoffCommand, t *Task) (any, error) {
	if err := a.checkClaimant(t, cmd.Agent, cmd.Fence); err != nil {
		return nil, a.errorf(err)
	}
	before := keysOf(t)
	t.To, t.State = cmd.To, TaskReady
	t.ClaimedBy, t.Fence, t.LeaseExpires, t.ReadyAt = "", 0, nil, nil
	t.Progress, t.ProgressMessage = nil, ""
	detail := "to " + cmd.To
	if cmd.Reason != "" {
		detail += ": " + cmd.Reason
	}
	a.change(before, t, a.event(cmd.Agent, "handoff", detail))
	m := handoffMessage(t, cmd.Agent, cmd.Fence, a.ts, cmd.Reason)
	if err := a.send(&m); err != nil {
		return nil, a.errorf(err)
	}
	a.commit()
	return a.result(t), nil
}
