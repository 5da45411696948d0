package fsm

import "github.com/maos-project/maos/api"

// handoff gives a running task to another assignee (seed 002 §3
// Handoff): back to ready, for the new to, its claim (claimed_by, fence,
// lease) cleared, and a handoff message from the claimant to the new
// assignee. Only the current claimant under its current fence, its lease
// live, hands off (checkClaimant); with known_names, to someone who
// answers (checkKnown). The message goes through send: the rules may
// refuse it, and with it the handoff.
//
// A retried handoff (the same claimant, fence, assignee and reason) of
// the claim it ended answers that handoff's result and changes nothing,
// whatever happened to the task since.
func (a *taskOp) handoff(cmd *api.TaskHandoffCommand, t *api.Task) (any, error) {
	if t.Fence != cmd.Fence {
		res, err := a.handedOff(t, cmd)
		if err != nil {
			return nil, a.errorf(err)
		}
		if res != nil {
			return res, nil
		}
	}
	if err := a.checkClaimant(t, cmd.Agent, cmd.Fence); err != nil {
		return nil, a.errorf(err)
	}
	if cmd.KnownNames {
		a.knownNames = true
		if err := checkKnown(a.tx, "to", cmd.Agent, []string{cmd.To}); err != nil {
			return nil, a.errorf(err)
		}
	}
	before := keysOf(t)
	t.To, t.State = cmd.To, api.TaskReady
	t.ClaimedBy, t.Fence, t.LeaseExpires, t.ReadyAt = "", 0, nil, nil
	t.Progress, t.ProgressMessage = nil, ""
	a.change(before, t, a.event(cmd.Agent, "handoff", handoffDetail(cmd)))
	m := handoffMessage(t, cmd.Agent, cmd.Fence, a.ts, cmd.Reason)
	if err := a.send(&m); err != nil {
		return nil, a.errorf(err)
	}
	a.commit()
	return a.result(t), nil
}

// handoffDetail is the history detail of a handoff: "to ASSIGNEE[: reason]".
func handoffDetail(cmd *api.TaskHandoffCommand) string {
	detail := "to " + cmd.To
	if cmd.Reason != "" {
		detail += ": " + cmd.Reason
	}
	return detail
}

// handedOff answers the handoff of t that cmd repeats, as it answered
// (nil when there is none): by the same agent, to the same assignee with
// the same reason, under the same fence (its handoff message, whose id
// the fence derives, stored in that entry).
func (a *taskOp) handedOff(t *api.Task, cmd *api.TaskHandoffCommand) (*api.TaskResult, error) {
	hist, err := history(a.tx, t.Seq)
	if err != nil {
		return nil, err
	}
	detail := handoffDetail(cmd)
	for i := len(hist) - 1; i >= 0; i-- {
		ev := hist[i]
		if ev.Event != "handoff" || ev.Actor != cmd.Agent || ev.Detail != detail {
			continue
		}
		if rec, ok := getID(a.tx, handoffMessageID(cmd.Agent, ev.Time, t.ID, cmd.Fence)); ok && rec.seq == ev.Seq {
			attempt := 0 // the claims before it
			for _, e := range hist[:i] {
				if e.Event == "claimed" {
					attempt++
				}
			}
			return &api.TaskResult{ID: t.ID, Seq: ev.Seq, State: ev.State, Attempt: attempt}, nil
		}
	}
	return nil, nil
}
