package fsm

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// taskFixture is a farm with one task in each state a refusal is about.
type taskFixture struct {
	*taskBox
	ready, running, waiting, succeeded, failed, cancelled, backoff, lapsed string
	fence, lapsedFence                                                     uint64 // of running, of lapsed
}

func newTaskFixture(t *testing.T) *taskFixture {
	x := &taskFixture{taskBox: newTaskBox(t)}
	mk := func(to string, timeout int, deps ...string) string {
		c := x.newTask(to, deps...)
		c.TimeoutSeconds = timeout
		x.create(c)
		return c.ID
	}
	x.ready = mk("role:reviewer", 10)
	x.waiting = mk("rex", 10, x.ready)
	x.succeeded = mk("rex", 10)
	x.succeed(x.succeeded, "rex", x.claim(x.succeeded, "rex").Fence)
	x.failed = mk("rex", 10)
	x.complete(x.failed, "rex", x.claim(x.failed, "rex").Fence, api.TaskCompletion{Status: api.TaskStatusFailure})
	x.cancelled = mk("rex", 10)
	x.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: x.cancelled, From: "boss"})
	// backoff: a lease of 1 s expired once, ready again a second after
	// the tick; running: a live lease of 10 s; lapsed: a lease of 1 s that
	// ended with the fixture's last entry, after the tick.
	x.backoff = mk("eve", 1)
	cb := x.claim(x.backoff, "eve")
	x.running = mk("rita", 10)
	x.fence = x.claim(x.running, "rita").Fence
	x.lapsed = mk("eve", 1)
	cl := x.claim(x.lapsed, "eve")
	x.lapsedFence = cl.Fence
	x.jump(*cb.LeaseExpires)
	if r := x.tick(); len(r.Expired) != 1 || r.Expired[0] != x.backoff {
		t.Fatalf("fixture tick = %+v, want the backoff task alone expired", r)
	}
	x.jump(*cl.LeaseExpires)
	x.register("ann", "orchestrator")
	return x
}

// Every refusal of every task command: the sentinel the API maps to its
// status, words that say what is wrong, and no change to the state.
func TestTaskRefusals(t *testing.T) {
	ok := api.TaskCompletion{Status: api.TaskStatusSuccess}
	for _, tc := range []struct {
		name   string
		cmd    func(x *taskFixture) (api.Op, any)
		target error
		words  string
	}{
		// create
		{"create: unknown dependency", func(x *taskFixture) (api.Op, any) { return api.OpTaskCreate, x.newTask("rex", x.ready, "task-none") },
			api.ErrNotFound, "task task-none (depends_on[1]): not found"},
		{"create: id of another task", func(x *taskFixture) (api.Op, any) {
			c := x.newTask("rex")
			c.ID = x.ready
			return api.OpTaskCreate, c
		}, api.ErrConflict, "is taken by another task"},
		{"create: invalid", func(x *taskFixture) (api.Op, any) {
			c := x.newTask("rex")
			c.MaxAttempts = api.MaxTaskAttempts + 1
			return api.OpTaskCreate, c
		}, api.ErrInvalid, "max_attempts: 101: want 1..100"},
		{"create: as maos", func(x *taskFixture) (api.Op, any) {
			c := x.newTask("rex")
			c.From = api.SystemSender
			return api.OpTaskCreate, c
		}, api.ErrInvalid, `from: "maos" is reserved`},

		// claim: 404 and 403
		{"claim: unknown task", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: "task-none", Agent: "rita"}
		},
			api.ErrNotFound, "task task-none: not found"},
		{"claim: another role", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.ready, Agent: "eve"}
		},
			api.ErrForbidden, "is for role:reviewer and eve has role engineer"},
		{"claim: unregistered, for a role", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.ready, Agent: "zed"}
		},
			api.ErrForbidden, "zed is not a registered agent"},
		{"claim: another agent's task", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.waiting, Agent: "rita"}
		},
			api.ErrForbidden, "is for rex, not rita"},
		// claim: 409 by state
		{"claim: running, by an agent outside its queue (403 before the state)", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.running, Agent: "rita2"}
		},
			api.ErrForbidden, "is for rita, not rita2"},
		{"claim: running, by its own queue", func(x *taskFixture) (api.Op, any) {
			c := x.newTask("role:reviewer")
			x.create(c)
			x.claim(c.ID, "rex")
			return api.OpTaskClaim, api.TaskClaimCommand{ID: c.ID, Agent: "rita"}
		}, api.ErrConflict, "is running, claimed by rex"},
		{"claim: lapsed, not yet expired", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.lapsed, Agent: "eve"}
		},
			api.ErrConflict, "whose lease ended at"},
		{"claim: waiting", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.waiting, Agent: "rex"}
		},
			api.ErrConflict, "is waiting for its dependencies"},
		{"claim: in backoff", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.backoff, Agent: "eve"}
		},
			api.ErrConflict, "(backoff after 1 expired leases): claim it then"},
		{"claim: succeeded", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.succeeded, Agent: "rex"}
		},
			api.ErrConflict, "has ended (succeeded, success): nothing to claim"},
		{"claim: failed", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.failed, Agent: "rex"}
		},
			api.ErrConflict, "has ended (failed, failure): nothing to claim"},
		{"claim: cancelled", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskClaim, api.TaskClaimCommand{ID: x.cancelled, Agent: "rex"}
		},
			api.ErrConflict, "has ended (cancelled): nothing to claim"},

		// progress, complete, handoff: the claimant's checks
		{"progress: unknown task", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: "task-none", Agent: "rita", Fence: 1}
		}, api.ErrNotFound, "task task-none: not found"},
		{"progress: not running", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: x.ready, Agent: "rita", Fence: 1}
		}, api.ErrConflict, "is ready, not running: claim it first"},
		{"progress: another agent", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: x.running, Agent: "rex", Fence: x.fence}
		}, api.ErrConflict, "is claimed by rita"},
		{"progress: stale fence", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: x.running, Agent: "rita", Fence: x.fence - 1}
		}, api.ErrConflict, "is not the current claim's"},
		{"progress: lapsed lease", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: x.lapsed, Agent: "eve", Fence: x.lapsedFence}
		}, api.ErrConflict, "your lease (fence"},
		{"progress: ended", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: x.cancelled, Agent: "rex", Fence: 1}
		}, api.ErrConflict, "has ended (cancelled): nothing to report"},
		{"progress: invalid", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskProgress, api.TaskProgressCommand{ID: x.running, Agent: "rita", Fence: x.fence, Progress: ptr(-0.1)}
		}, api.ErrInvalid, "progress: -0.1: want 0..1"},
		{"complete: another agent", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskComplete, api.TaskCompleteCommand{ID: x.running, Agent: "rex", Fence: x.fence, Completion: ok}
		}, api.ErrConflict, "is claimed by rita"},
		{"complete: stale fence", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskComplete, api.TaskCompleteCommand{ID: x.running, Agent: "rita", Fence: x.fence + 1, Completion: ok}
		}, api.ErrConflict, "is not the current claim's"},
		{"complete: lapsed lease", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskComplete, api.TaskCompleteCommand{ID: x.lapsed, Agent: "eve", Fence: x.lapsedFence, Completion: ok}
		}, api.ErrConflict, "your lease (fence"},
		{"complete: ended otherwise", func(x *taskFixture) (api.Op, any) {
			last := x.task(x.failed)
			return api.OpTaskComplete, api.TaskCompleteCommand{ID: x.failed, Agent: "rex", Fence: last.Fence, Completion: ok}
		}, api.ErrConflict, "has ended (failed, failure): nothing to report"},
		{"complete: invalid", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskComplete, api.TaskCompleteCommand{ID: x.running, Agent: "rita", Fence: x.fence,
				Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, ActionsTaken: make([]json.RawMessage, api.MaxTaskActions+1)}}
		}, api.ErrInvalid, "actions_taken: 51 actions, at most 50"},
		{"handoff: stale fence", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskHandoff, api.TaskHandoffCommand{ID: x.running, Agent: "rita", Fence: x.fence + 1, To: "rex"}
		}, api.ErrConflict, "is not the current claim's"},
		{"handoff: lapsed lease", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskHandoff, api.TaskHandoffCommand{ID: x.lapsed, Agent: "eve", Fence: x.lapsedFence, To: "rex"}
		}, api.ErrConflict, "your lease (fence"},
		{"handoff: to all", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskHandoff, api.TaskHandoffCommand{ID: x.running, Agent: "rita", Fence: x.fence, To: "all"}
		}, api.ErrInvalid, `to: "all" addresses every agent`},

		// cancel
		{"cancel: unknown task", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskCancel, api.TaskCancelCommand{ID: "task-none", From: "boss"}
		},
			api.ErrNotFound, "task task-none: not found"},
		{"cancel: not the creator", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskCancel, api.TaskCancelCommand{ID: x.running, From: "rita"}
		},
			api.ErrForbidden, "only its creator cancels it, not rita"},
		{"cancel: succeeded", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskCancel, api.TaskCancelCommand{ID: x.succeeded, From: "boss"}
		},
			api.ErrConflict, "has ended (succeeded, success): nothing to cancel"},
		{"cancel: failed", func(x *taskFixture) (api.Op, any) {
			return api.OpTaskCancel, api.TaskCancelCommand{ID: x.failed, From: "boss"}
		},
			api.ErrConflict, "has ended (failed, failure): nothing to cancel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newTaskFixture(t)
			op, body := tc.cmd(x)
			x.refused(op, body, tc.target, tc.words)
		})
	}
}

// The fixture is what the table says it is.
func TestTaskFixture(t *testing.T) {
	x := newTaskFixture(t)
	for id, want := range map[string]api.TaskState{x.ready: api.TaskReady, x.running: api.TaskRunning, x.waiting: api.TaskWaiting, x.succeeded: api.TaskSucceeded,
		x.failed: api.TaskFailed, x.cancelled: api.TaskCancelled, x.backoff: api.TaskReady, x.lapsed: api.TaskRunning} {
		if got := x.task(id).State; got != want {
			t.Errorf("%s is %s, want %s", id, got, want)
		}
	}
	if b := x.task(x.backoff); b.ReadyAt == nil || !b.ReadyAt.After(x.now()) {
		t.Errorf("backoff task ready_at %v, want after %s", b.ReadyAt, x.now())
	}
	if l := x.task(x.lapsed); l.LeaseExpires.After(x.now()) {
		t.Errorf("lapsed task's lease %s ends after the last entry (%s)", l.LeaseExpires, x.now())
	}
	if r := x.task(x.running); !r.LeaseExpires.After(x.now().Add(time.Second)) {
		t.Errorf("running task's lease %s is not live", r.LeaseExpires)
	}
}
