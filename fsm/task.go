package fsm

import (
	"time"
)

// Tasks: typed work with a lifecycle, on the same log as messages.
//
// A task is created by one agent for an agent, a role queue ("role:NAME")
// or a capability queue ("capability:NAME"); exactly one agent of the queue
// claims it. The names and shapes come from seed 004 (task_delegation,
// task_completion, timeouts, retries with backoff 1-2-4-8-16 s,
// escalation) and seed 002 (§3 handoff/progress/completed/blocked, §7
// dependencies).
//
//	waiting ──(every dependency succeeded)──▶ ready ──claim──▶ running
//	   │                                        ▲                 │
//	   │ a dependency failed or was cancelled   │ lease expired   │ complete
//	   ▼                                        │ (expiries < max,├──▶ succeeded
//	 failed ◀──────── lease expired at max ─────┴── after backoff) ├──▶ failed
//	                                                              handoff ──▶ ready (new assignee)
//	                                                              requires_approval ──▶ awaiting_approval
//	 awaiting_approval ──(its approval)──▶ succeeded (approved) | failed (rejected, expired, cancelled)
//	                   └─(modified)──▶ running again, for its claimant, with the approved action
//	 cancel (by its creator): waiting, ready, running or awaiting_approval ──▶ cancelled
//
// Time. Every decision uses the timestamp of the entry being applied, never
// a node's clock, like locks: a claim at entry time T with timeout D holds
// the lease for [T, T+D). A lease that lapses is noticed by the leader,
// which proposes OpTick (tick.go); its apply expires every lease whose end is at
// or before the tick's time. Backoff after the k-th expiry is
// TaskBackoff(k): the task is ready again but not claimable before
// ReadyAt.
//
// Fencing. A claim's Fence is the Raft index of the entry that granted it.
// Progress, completion and handoff name the fence they act under; one that
// is not the current claim's is refused with ErrConflict, so a claimant
// whose lease lapsed (its node died, it hung) cannot finish a task another
// agent now runs.

// taskBackoff is seed 004's retry schedule.
var taskBackoff = []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}

// TaskBackoff is how long a task whose lease expired for the k-th time
// (k ≥ 1) waits before it may be claimed again: 1, 2, 4, 8, then 16 s.
func TaskBackoff(k int) time.Duration {
	if k < 1 {
		k = 1
	}
	if k > len(taskBackoff) {
		k = len(taskBackoff)
	}
	return taskBackoff[k-1]
}
