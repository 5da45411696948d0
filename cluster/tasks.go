package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// Task leases and approval deadlines end by the log's time, never a
// node's clock, so apply cannot notice that one passed: the leader does.
// Its state says when the next tick has work (fsm.FSM.NextDeadline: the
// earliest lease end or approval deadline, or at once while messages the
// state machine sends itself are queued), and the
// leader proposes api.OpTick when that is at or before its clock. The
// tick's entry time, not the leader's clock, decides what expires, so
// every node applies the same.

// Bounds of the tick loop. A tick is one log entry: at most one is in
// flight, two are at least taskTickInterval apart (a queue of system
// messages drains at up to one per interval), and a tick that failed, or
// did nothing while the state still says one was due (which would be a
// bug), makes the loop wait taskTickStall before the next, so it cannot
// fill the log.
var (
	taskTickInterval = 10 * time.Millisecond
	taskTickStall    = time.Second
)

// taskTickIdle is the longest the loop sleeps without looking: it also
// wakes on every applied batch while leading, and on leadership changes.
const taskTickIdle = time.Minute

// taskTickLoop proposes task ticks while this node leads.
func (n *Node) taskTickLoop() {
	defer n.wg.Done()
	timer := time.NewTimer(taskTickIdle)
	defer timer.Stop()
	var last time.Time // when the last tick was proposed
	for {
		leading := n.raft.State() == raft.Leader
		wait := taskTickIdle
		var changed <-chan struct{}
		if leading {
			changed = n.fsm.Changed() // before reading, so nothing applied in between is missed
			if deadline, ok := n.fsm.NextDeadline(); ok {
				now := n.cfg.Now()
				switch gap := now.Sub(last); {
				case deadline.After(now):
					wait = min(wait, deadline.Sub(now))
				case gap < taskTickInterval:
					wait = taskTickInterval - gap
				default:
					last = now
					if !n.proposeTick(now) {
						last = now.Add(taskTickStall - taskTickInterval)
					}
					continue
				}
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-n.shutdown:
			return
		case <-n.leaderChange():
		case <-changed:
		case <-timer.C:
		}
	}
}

// proposeTick commits one tick, due at now, and reports false when it
// failed, or did nothing although the state still says one was due by now.
func (n *Node) proposeTick(now time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RetryTimeout)
	defer cancel()
	raw, err := n.Apply(ctx, api.OpTick, api.TickCommand{})
	if err != nil {
		n.logger.Warn("tasks: tick", "error", err)
		return false
	}
	var res fsm.TickResult
	if err := json.Unmarshal(raw, &res); err != nil {
		n.logger.Warn("tasks: tick: unexpected result", "result", string(raw), "error", err)
		return false
	}
	if len(res.Expired)+len(res.Failed) > 0 {
		n.logger.Info("tasks: leases expired", "ready_again", res.Expired, "failed", res.Failed)
	}
	if len(res.ApprovalsExpired)+len(res.ApprovalsEscalated) > 0 {
		n.logger.Info("approvals: deadlines passed", "expired", res.ApprovalsExpired, "escalated", res.ApprovalsEscalated)
	}
	if res.Did() {
		return true
	}
	// Nothing to do: fine if a lease was renewed meanwhile; not if the
	// state still says something was due before the tick was stamped.
	if deadline, ok := n.fsm.NextDeadline(); ok && !deadline.After(now) {
		n.logger.Warn("tasks: a tick did nothing although the state says one was due; waiting", "due", deadline, "wait", taskTickStall)
		return false
	}
	return true
}
