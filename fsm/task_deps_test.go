package fsm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func TestTaskDependenciesSucceed(t *testing.T) {
	b := newTaskBox(t)
	a, c := b.newTask("rita"), b.newTask("rex")
	b.create(a)
	b.create(c)
	dep := b.newTask("eve", a.ID, c.ID)
	if r := b.create(dep); r.State != api.TaskWaiting {
		t.Fatalf("create with pending dependencies = %+v, want waiting", r)
	}
	if d := b.task(dep.ID).History[0].Detail; d != "for eve; waits for "+a.ID+", "+c.ID {
		t.Errorf("created detail = %q", d)
	}
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: dep.ID, Agent: "eve"}, api.ErrConflict, "is waiting for its dependencies ("+a.ID+", "+c.ID+")")

	// One dependency met: still waiting.
	b.succeed(a.ID, "rita", b.claim(a.ID, "rita").Fence)
	if s := b.task(dep.ID).State; s != api.TaskWaiting {
		t.Fatalf("after one of two dependencies: %s, want waiting", s)
	}
	// requires_approval is not met.
	b.complete(c.ID, "rex", b.claim(c.ID, "rex").Fence, api.TaskCompletion{Status: api.TaskStatusRequiresApproval})
	if s := b.task(dep.ID).State; s != api.TaskWaiting {
		t.Fatalf("after a requires_approval dependency: %s, want waiting", s)
	}

	// partial_success is met: the last dependency makes it ready, in the
	// completing entry, with an event by maos.
	d := b.newTask("eve")
	b.create(d)
	two := b.newTask("eve", a.ID, d.ID)
	b.create(two)
	res := b.complete(d.ID, "eve", b.claim(d.ID, "eve").Fence, api.TaskCompletion{Status: api.TaskStatusPartialSuccess})
	task := b.task(two.ID)
	last := task.History[len(task.History)-1]
	if task.State != api.TaskReady || last.Seq != res.Seq || last.Actor != api.SystemSender || last.Event != "ready" ||
		last.Detail != "its dependencies succeeded: "+a.ID+", "+d.ID {
		t.Errorf("dependent = %s, last event %+v; want ready by maos at %d", task.State, last, res.Seq)
	}
	if r := b.claim(two.ID, "eve"); r.State != api.TaskRunning {
		t.Errorf("claim of the ready dependent = %+v", r)
	}
	// A dependency met before the create: ready at once.
	if r := b.create(b.newTask("eve", a.ID)); r.State != api.TaskReady {
		t.Errorf("create on a met dependency = %+v, want ready", r)
	}
}

func TestTaskDependencyFailureCascades(t *testing.T) {
	b := newTaskBox(t)
	b.register("ann", "orchestrator")
	a := b.newTask("rita")
	b.create(a)
	mid := b.newTask("rex", a.ID)
	b.create(mid)
	other := b.newTask("eve")
	b.create(other)
	// leaf waits on mid and on other; its creator is ann.
	leaf := b.newTask("eve", mid.ID, other.ID)
	leaf.From = "ann"
	b.create(leaf)
	// side waits on a and on leaf: reached twice, failed once.
	side := b.newTask("rex", a.ID, leaf.ID)
	b.create(side)

	res := b.complete(a.ID, "rita", b.claim(a.ID, "rita").Fence,
		api.TaskCompletion{Status: api.TaskStatusFailure, Error: &api.TaskError{ErrorType: "api_error", ErrorMessage: "503"}})
	if res.State != api.TaskFailed {
		t.Fatalf("complete failure = %+v", res)
	}
	for _, tc := range []struct{ id, cause string }{{mid.ID, a.ID}, {side.ID, a.ID}, {leaf.ID, mid.ID}} {
		task := b.task(tc.id)
		last := task.History[len(task.History)-1]
		want := "task " + tc.cause + ", which it depends on, failed"
		if task.State != api.TaskFailed || task.Completion.Error.ErrorType != api.TaskErrorDependencyFailed ||
			!strings.HasPrefix(task.Completion.Error.ErrorMessage, want) || last.Seq != res.Seq || last.Actor != api.SystemSender ||
			last.Detail != api.TaskErrorDependencyFailed+": "+task.Completion.Error.ErrorMessage {
			t.Errorf("%s = %s %+v, last %+v; want failed naming %s", tc.id, task.State, task.Completion.Error, last, tc.cause)
		}
	}
	if s := b.task(mid.ID).Completion.Error.ErrorMessage; s != "task "+a.ID+", which it depends on, failed (api_error)" {
		t.Errorf("mid's error = %q", s)
	}
	if s := b.task(other.ID).State; s != api.TaskReady {
		t.Errorf("a task the failed one does not feed is %s", s)
	}

	// Each failed dependent's reply to its creator comes from maos, one
	// per tick, in the order the cascade reached them.
	due, ok := b.f.NextDeadline()
	if !ok || due.After(b.now()) {
		t.Errorf("NextDeadline = %s, %t; want due now (%s)", due, ok, b.now())
	}
	var got []string
	for range 3 {
		r := b.tick()
		m, err := b.f.Message(r.Delivered)
		if err != nil {
			t.Fatalf("tick delivered %q: %v", r.Delivered, err)
		}
		var c api.TaskCompletion
		_ = json.Unmarshal(m.Metadata, &c)
		got = append(got, m.CorrelationID+" "+m.From+"→"+strings.Join(m.Recipients, ",")+" "+m.Type+" "+c.Error.ErrorType)
		if task := b.task(m.CorrelationID); m.InReplyTo != task.MessageID || m.Title != "failure "+task.Title {
			t.Errorf("reply %+v, want in reply to %s titled failure …", m, task.MessageID)
		}
	}
	want := []string{
		mid.ID + " maos→boss task_completion dependency_failed",
		side.ID + " maos→boss task_completion dependency_failed",
		leaf.ID + " maos→ann task_completion dependency_failed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("delivered\n%q\nwant\n%q", got, want)
	}
	if _, ok := b.f.NextDeadline(); ok {
		t.Error("the outbox is empty, yet a deadline is due")
	}
	if r := b.tick(); r.Delivered != "" || len(r.Expired)+len(r.Failed) != 0 {
		t.Errorf("a tick with nothing due = %+v", r)
	}
	if _, err := b.f.Agent(api.SystemSender); err == nil {
		t.Error("maos got registered by its messages")
	}

	// A create on a failed dependency fails at once, naming it: its
	// delegation is stored and its reply queued.
	late := b.newTask("rex", other.ID, a.ID)
	if r := b.create(late); r.State != api.TaskFailed {
		t.Fatalf("create on a failed dependency = %+v", r)
	}
	task := b.task(late.ID)
	if task.History[0].Detail != "for rex; dependency_failed: task "+a.ID+", which it depends on, failed (api_error)" || task.MessageID == "" {
		t.Errorf("task = %+v, history %+v", task, task.History)
	}
	if r := b.tick(); r.Delivered == "" {
		t.Error("the failed-at-birth reply was not delivered")
	}
}

func TestTaskCancelFailsDependents(t *testing.T) {
	b := newTaskBox(t)
	a := b.newTask("rita")
	b.create(a)
	d := b.newTask("rex", a.ID)
	b.create(d)
	b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: a.ID, From: "boss", Reason: "scrapped"})
	task := b.task(d.ID)
	if task.State != api.TaskFailed || task.Completion.Error.ErrorMessage != "task "+a.ID+", which it depends on, was cancelled" {
		t.Errorf("dependent of a cancelled task = %s %+v", task.State, task.Completion)
	}
	if r := b.tick(); r.Delivered == "" {
		t.Error("no reply for the dependent")
	}
	if m := b.lastMessage(); m.From != api.SystemSender || m.CorrelationID != d.ID || m.Content.Text != task.Completion.Result {
		t.Errorf("reply = %+v", m)
	}
}
