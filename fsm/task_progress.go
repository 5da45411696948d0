package fsm

import (
	"fmt"
	"time"

	"github.com/maos-project/maos/api"
)

// progress records the claimant's progress (seed 002 §6 status)
// and renews its lease to the entry's time + timeout_seconds. Only the
// current claimant under its current fence, its lease live at the entry's
// time, may report (checkClaimant: a *ConflictError otherwise).
func (a *taskOp) progress(cmd *api.TaskProgressCommand, t *api.Task) (any, error) {
	if err := a.checkClaimant(t, cmd.Agent, cmd.Fence); err != nil {
		return nil, a.errorf(err)
	}
	before := keysOf(t)
	t.LeaseExpires = a.at(time.Duration(t.TimeoutSeconds) * time.Second)
	t.ProgressMessage = cmd.Message
	if cmd.Progress != nil {
		t.Progress = cmd.Progress
	}
	detail := cmd.Message
	if cmd.Progress != nil {
		pct := fmt.Sprintf("%.0f%%", *cmd.Progress*100)
		if detail == "" {
			detail = pct
		} else {
			detail += " (" + pct + ")"
		}
	}
	a.change(before, t, a.event(cmd.Agent, "progress", detail))
	a.commit()
	return a.result(t), nil
}
