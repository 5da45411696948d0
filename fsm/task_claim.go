package fsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
)

// claim makes an agent of the task's queue its claimant: running,
// claimed_by the agent, attempt+1, fence = the entry's index, the lease
// to the entry's time + timeout_seconds. The agent must be of the queue
// (mayClaim: a *ForbiddenError), and the task ready and past its ready_at
// (a *ConflictError naming the state: who holds it, until when; when it
// may be claimed). A retried claim by the current claimant, its lease
// live, answers the current claim and changes nothing. A running task
// whose lease lapsed is not taken over here: the tick expires it first,
// so attempts and backoff are counted once.
func (a *taskOp) claim(cmd *api.TaskClaimCommand, t *api.Task) (any, error) {
	if err := mayClaim(a.tx, t, cmd.Agent); err != nil {
		return nil, a.errorf(err)
	}
	now := a.now()
	switch t.State {
	case api.TaskRunning:
		if t.ClaimedBy == cmd.Agent && now.Before(*t.LeaseExpires) {
			return &api.TaskResult{ID: t.ID, Seq: t.Fence, State: t.State, Attempt: t.Attempt, Fence: t.Fence, LeaseExpires: t.LeaseExpires}, nil
		}
		if !now.Before(*t.LeaseExpires) {
			return nil, a.errorf(conflict("task %s is running, claimed by %s (fence %d), whose lease ended at %s: it is ready again once the leader expires the lease",
				t.ID, t.ClaimedBy, t.Fence, stamp(*t.LeaseExpires)))
		}
		return nil, a.errorf(conflict("task %s is running, claimed by %s (fence %d) until %s: wait for it to end or expire",
			t.ID, t.ClaimedBy, t.Fence, stamp(*t.LeaseExpires)))
	case api.TaskWaiting:
		return nil, a.errorf(conflict("task %s is waiting for its dependencies (%s): claim it once it is ready", t.ID, strings.Join(t.DependsOn, ", ")))
	case api.TaskAwaitingApproval:
		return nil, a.errorf(conflict("task %s awaits approval %s of the completion of %s: nothing to claim", t.ID, t.ApprovalID, t.ClaimedBy))
	case api.TaskReady:
		if t.ReadyAt != nil && now.Before(*t.ReadyAt) {
			return nil, a.errorf(conflict("task %s is ready from %s (backoff after %d expired leases): claim it then", t.ID, stamp(*t.ReadyAt), t.Expiries))
		}
	default:
		return nil, a.errorf(conflict("task %s has ended (%s%s): nothing to claim", t.ID, t.State, endedHow(t)))
	}
	before := keysOf(t)
	t.State, t.ClaimedBy, t.Fence = api.TaskRunning, cmd.Agent, a.index
	t.Attempt++
	t.LeaseExpires = a.at(time.Duration(t.TimeoutSeconds) * time.Second)
	t.ReadyAt, t.Progress, t.ProgressMessage = nil, nil, ""
	a.change(before, t, a.event(cmd.Agent, "claimed", fmt.Sprintf("attempt %d of %d, fence %d, lease until %s", t.Attempt, t.MaxAttempts, t.Fence, stamp(*t.LeaseExpires))))
	a.commit()
	return a.result(t), nil
}
