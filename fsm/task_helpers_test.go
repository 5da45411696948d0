package fsm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// taskBox applies task commands to a fresh state machine (mbox: one entry
// at a time, 1 µs apart unless a test moves the clock) with a small farm
// registered: boss (orchestrator), rita and rex (reviewer; rita also
// knows go), eve (engineer; go and rust).
type taskBox struct {
	*mbox
	n int // task ids handed out
}

func newTaskBox(t *testing.T) *taskBox {
	t.Helper()
	b := &taskBox{mbox: newMbox(t)}
	b.register("boss", "orchestrator")
	b.register("rita", "reviewer", "go")
	b.register("rex", "reviewer")
	b.register("eve", "engineer", "go", "rust")
	return b
}

// now is the time of the last applied entry.
func (b *taskBox) now() time.Time { return time.Unix(0, b.ts).UTC() }

// jump makes the next entry's time at (it is stamped at the next apply).
func (b *taskBox) jump(at time.Time) { b.ts = at.UnixNano() - 1000 }

// newTask is a valid create from boss to to, its id from the counter.
func (b *taskBox) newTask(to string, deps ...string) api.TaskCreateCommand {
	b.n++
	c := api.TaskCreateCommand{ID: fmt.Sprintf("task-%d", b.n), From: "boss", To: to, Title: fmt.Sprintf("Task %d", b.n),
		Description: fmt.Sprintf("do thing %d", b.n), DependsOn: deps, TimeoutSeconds: 10, MaxAttempts: 3}
	c.Normalize(b.now())
	return c
}

func mustTaskResult(tb testing.TB, r any) *api.TaskResult {
	tb.Helper()
	res, ok := r.(*api.TaskResult)
	if !ok {
		tb.Fatalf("result = %T (%v), want *TaskResult", r, r)
	}
	return res
}

func (b *taskBox) create(c api.TaskCreateCommand) *api.TaskResult {
	b.t.Helper()
	return mustTaskResult(b.t, b.ok(api.OpTaskCreate, c))
}

func (b *taskBox) claim(id, agent string) *api.TaskResult {
	b.t.Helper()
	return mustTaskResult(b.t, b.ok(api.OpTaskClaim, api.TaskClaimCommand{ID: id, Agent: agent}))
}

func (b *taskBox) complete(id, agent string, fence uint64, c api.TaskCompletion) *api.TaskResult {
	b.t.Helper()
	return mustTaskResult(b.t, b.ok(api.OpTaskComplete, api.TaskCompleteCommand{ID: id, Agent: agent, Fence: fence, Completion: c}))
}

func (b *taskBox) succeed(id, agent string, fence uint64) *api.TaskResult {
	b.t.Helper()
	return b.complete(id, agent, fence, api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "done"})
}

func (b *taskBox) tick() *TickResult {
	b.t.Helper()
	r, ok := b.ok(api.OpTick, api.TickCommand{}).(*TickResult)
	if !ok {
		b.t.Fatal("tick result is not a *TickResult")
	}
	return r
}

func (b *taskBox) task(id string) *api.Task {
	b.t.Helper()
	t, err := b.f.Task(id)
	if err != nil {
		b.t.Fatalf("Task(%s): %v", id, err)
	}
	return t
}

// refused applies a command that must be refused with target, whose
// words contain want, and change nothing but (for sends the rules refuse)
// the audit trail.
func (b *taskBox) refused(op api.Op, body any, target error, want string) error {
	b.t.Helper()
	before := dumpWithout(b.t, b.f, string(bucketAudit))
	err := mustError(b.t, b.apply(op, body))
	if !errors.Is(err, target) || !strings.Contains(err.Error(), want) {
		b.t.Errorf("%s %+v: %v, want %v saying %q", op, body, err, target, want)
	}
	if dumpWithout(b.t, b.f, string(bucketAudit)) != before {
		b.t.Errorf("%s refused, yet the state changed", op)
	}
	return err
}

// events lists a task's history as "actor event state" strings.
func events(t *api.Task) []string {
	var out []string
	for _, e := range t.History {
		out = append(out, e.Actor+" "+e.Event+" "+string(e.State))
	}
	return out
}

// lastMessage is the newest message stored.
func (b *taskBox) lastMessage() *api.Message {
	b.t.Helper()
	p, err := b.f.MessagesAfter(0, api.MaxPageLimit)
	if err != nil || len(p.Messages) == 0 {
		b.t.Fatalf("MessagesAfter: %d messages, %v", len(p.Messages), err)
	}
	return p.Messages[len(p.Messages)-1]
}

func ptr[T any](v T) *T { return &v }

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
