package fsm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// A lease runs from the claim's entry time for timeout_seconds; the tick
// expires it by its own entry time, puts the task back with the seed's
// backoff, and after max_attempts fails it with a timeout, a reply and an
// incident. No clock but the entries'.
func TestTaskLeaseExpiryBackoffAndTimeout(t *testing.T) {
	b := newTaskBox(t)
	b.register("sam", "supervisor")
	b.register("sue", "supervisor")
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(`"role:supervisor"`)})
	c := b.newTask("role:reviewer")
	b.create(c)
	dep := b.newTask("eve", c.ID)
	b.create(dep)

	t0 := b.now().Add(time.Second)
	b.jump(t0)
	first := b.claim(c.ID, "rita")
	if due, ok := b.f.NextDeadline(); !ok || !due.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("NextDeadline = %s, %t; want the lease end %s", due, ok, t0.Add(10*time.Second))
	}

	// One nanosecond before the end the lease holds.
	b.jump(t0.Add(10*time.Second - time.Nanosecond))
	if r := b.tick(); len(r.Expired)+len(r.Failed) != 0 {
		t.Fatalf("tick before the lease end = %+v", r)
	}
	// At the end it has lapsed.
	end1 := t0.Add(10 * time.Second)
	b.jump(end1)
	r := b.tick()
	if !slices.Equal(r.Expired, []string{c.ID}) || len(r.Failed) != 0 || r.Delivered != "" {
		t.Fatalf("tick at the lease end = %+v", r)
	}
	task := b.task(c.ID)
	if task.State != api.TaskReady || task.ClaimedBy != "" || task.Fence != 0 || task.LeaseExpires != nil || task.Attempt != 1 ||
		task.Expiries != 1 || !task.ReadyAt.Equal(end1.Add(time.Second)) {
		t.Fatalf("after the first expiry: %+v, want ready from %s", task, end1.Add(time.Second))
	}
	last := task.History[len(task.History)-1]
	if last.Event != "expired" || last.Actor != api.SystemSender || !strings.HasPrefix(last.Detail, "the lease of rita (attempt 1, fence "+itoa(first.Fence)+") ended at ") ||
		!strings.Contains(last.Detail, ", lapse 1 of 3; claimable again from ") {
		t.Errorf("expiry event = %+v", last)
	}
	if _, ok := b.f.NextDeadline(); ok {
		t.Error("no lease is running, yet a deadline is due")
	}
	// The stale claimant is refused; the backoff holds the task back.
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.ID, Agent: "rita", Fence: first.Fence, Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}},
		api.ErrConflict, "is ready, not running")
	b.jump(end1.Add(time.Second - time.Nanosecond))
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: c.ID, Agent: "rex"}, api.ErrConflict, "is ready from "+stamp(end1.Add(time.Second))+" (backoff after 1 expired leases)")
	b.jump(end1.Add(time.Second))
	second := b.claim(c.ID, "rex")
	if second.Attempt != 2 || second.Fence == first.Fence {
		t.Fatalf("second claim = %+v", second)
	}

	// The second expiry, noticed late: the backoff (2 s) runs from the
	// tick's time.
	late := second.LeaseExpires.Add(4 * time.Second)
	b.jump(late)
	b.tick()
	if task := b.task(c.ID); !task.ReadyAt.Equal(late.Add(2*time.Second)) || task.Expiries != 2 {
		t.Fatalf("after the second expiry: %+v, want ready from %s", task, late.Add(2*time.Second))
	}
	b.jump(late.Add(2 * time.Second))
	third := b.claim(c.ID, "rita")

	// The last attempt's lease ends: failed with a timeout.
	b.jump(*third.LeaseExpires)
	r = b.tick()
	if len(r.Expired) != 0 || !slices.Equal(r.Failed, []string{c.ID, dep.ID}) {
		t.Fatalf("tick at the last lease end = %+v, want the task and its dependent failed", r)
	}
	task = b.task(c.ID)
	e := task.Completion.Error
	if task.State != api.TaskFailed || task.Completion.Status != api.TaskStatusFailure || e.ErrorType != api.TaskErrorTimeout || e.RetryCount != 2 ||
		e.ErrorMessage != "its lease expired 3 times (max_attempts 3); the last claimant was rita (fence "+itoa(third.Fence)+")" {
		t.Errorf("timed out task = %+v, completion %+v, error %+v", task, task.Completion, e)
	}
	if s := b.task(dep.ID); s.State != api.TaskFailed || s.Completion.Error.ErrorMessage != "task "+c.ID+", which it depends on, failed (timeout)" {
		t.Errorf("its dependent = %s %+v", s.State, s.Completion.Error)
	}
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.ID, Agent: "rita", Fence: third.Fence, Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}},
		api.ErrConflict, "has ended (failed, timeout): nothing to report")

	// That tick delivered the reply; the next ones the incident and the
	// dependent's reply.
	reply, err := b.f.Message(r.Delivered)
	if err != nil {
		t.Fatal(err)
	}
	if reply.From != api.SystemSender || reply.Type != api.TypeTaskCompletion || !slices.Equal(reply.Recipients, []string{"boss"}) ||
		reply.Title != "failure "+c.Title || reply.Content.Text != task.Completion.Result || reply.InReplyTo != task.MessageID {
		t.Errorf("timeout reply = %+v", reply)
	}
	inc, err := b.f.Message(b.tick().Delivered)
	if err != nil {
		t.Fatal(err)
	}
	if inc.From != api.SystemSender || inc.Type != api.TypeTaskIncident || inc.Priority != api.PriorityHigh || !slices.Equal(inc.To, []string{"boss", "role:supervisor"}) ||
		!slices.Equal(inc.Recipients, []string{"boss", "sam", "sue"}) || inc.Title != "timed out after 3 attempts: "+c.Title ||
		!strings.Contains(inc.Content.Text, e.ErrorMessage) || inc.CorrelationID != c.ID {
		t.Errorf("incident = %+v", inc)
	}
	var meta struct {
		TaskID string         `json:"task_id"`
		Error  *api.TaskError `json:"error"`
	}
	if err := json.Unmarshal(inc.Metadata, &meta); err != nil || meta.TaskID != c.ID || meta.Error.ErrorType != api.TaskErrorTimeout {
		t.Errorf("incident metadata %s: %+v %v", inc.Metadata, meta, err)
	}
	lines := b.auditLines()
	if want := "[maos→boss,sam,sue] INCIDENT: timed out after 3 attempts: " + c.Title; !strings.HasSuffix(lines[len(lines)-1], want) {
		t.Errorf("audit line %q, want %q", lines[len(lines)-1], want)
	}
	if m, err := b.f.Message(b.tick().Delivered); err != nil || m.CorrelationID != dep.ID {
		t.Errorf("third tick delivered %+v, %v; want the dependent's reply", m, err)
	}
	if got := events(b.task(c.ID)); !slices.Equal(got, []string{"boss created ready", "rita claimed running", "maos expired ready",
		"rex claimed running", "maos expired ready", "rita claimed running", "maos failed failed"}) {
		t.Errorf("history = %q", got)
	}
}

// Without an escalation target, or with a role nobody holds, the incident
// goes to the creator alone; leases that ended go in one tick, earliest
// first.
func TestTaskTimeoutWithoutEscalation(t *testing.T) {
	for _, target := range []string{"", "role:nobody", "boss"} {
		b := newTaskBox(t)
		b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(`"` + target + `"`)})
		one, two := b.newTask("rita"), b.newTask("rex")
		one.MaxAttempts, two.MaxAttempts = 1, 1
		two.TimeoutSeconds = 5
		b.create(one)
		b.create(two)
		b.claim(one.ID, "rita")
		b.claim(two.ID, "rex")
		b.jump(b.now().Add(time.Minute))
		r := b.tick()
		if !slices.Equal(r.Failed, []string{two.ID, one.ID}) {
			t.Errorf("target %q: failed %q, want the earlier lease first", target, r.Failed)
		}
		var incidents []*api.Message
		for range 3 {
			if m, err := b.f.Message(b.tick().Delivered); err == nil && m.Type == api.TypeTaskIncident {
				incidents = append(incidents, m)
			}
		}
		if len(incidents) != 2 || !slices.Equal(incidents[0].Recipients, []string{"boss"}) || !slices.Equal(incidents[1].Recipients, []string{"boss"}) {
			t.Errorf("target %q: incidents %+v, want two, to boss alone", target, incidents)
		}
	}
}

// A queued message that cannot be stored is dropped with an UNDELIVERED
// line and does not block the ones behind it.
func TestTaskOutboxUndeliverable(t *testing.T) {
	b := newTaskBox(t)
	a := b.newTask("rita")
	b.create(a)
	d1, d2 := b.newTask("rex", a.ID), b.newTask("eve", a.ID)
	b.create(d1)
	b.create(d2)
	b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: a.ID, From: "boss"})
	// A client takes the id of d1's reply first, with other content.
	taken := b.msg("rex", "squatting", "boss")
	taken.ID = api.DerivedID(api.SystemSender, b.now(), "task-done:"+d1.ID)
	b.send(taken)

	if r := b.tick(); r.Delivered != "" {
		t.Errorf("tick delivered %q, want the conflicting reply dropped", r.Delivered)
	}
	lines := b.auditLines()
	if last := lines[len(lines)-1]; !strings.Contains(last, "[maos→boss] UNDELIVERED: task_completion "+taken.ID+": ") || !strings.Contains(last, "is already stored with other content") {
		t.Errorf("audit line %q, want UNDELIVERED naming the message and the conflict", last)
	}
	if m, err := b.f.Message(b.tick().Delivered); err != nil || m.CorrelationID != d2.ID {
		t.Errorf("next tick delivered %+v, %v; want d2's reply", m, err)
	}

	// A damaged outbox entry is due at once and dropped the same way.
	if err := b.f.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketOutbox).Put(append(u64(b.idx), 0, 0, 0, 0), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if due, ok := b.f.NextDeadline(); !ok || !due.Equal(time.Unix(0, 0).UTC()) {
		t.Errorf("NextDeadline with a damaged entry = %s, %t; want due", due, ok)
	}
	b.tick()
	lines = b.auditLines()
	if last := lines[len(lines)-1]; !strings.Contains(last, "UNDELIVERED") || !strings.Contains(last, "decode") {
		t.Errorf("audit line %q, want UNDELIVERED with the decode error", last)
	}
	if _, ok := b.f.NextDeadline(); ok {
		t.Error("the damaged entry is still queued")
	}
}

// A damaged task record is an error of the command that reads it, which
// then changes nothing, not a crash of the node.
func TestTaskDamagedRecord(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	b.create(c)
	b.claim(c.ID, "rita")
	task := b.task(c.ID)
	task.LeaseExpires, task.History = nil, nil
	data, _ := json.Marshal(task)
	if err := b.f.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketTasks).Put(u64(task.Seq), data) }); err != nil {
		t.Fatal(err)
	}
	before := dataDump(t, b.f)
	for _, body := range []struct {
		op   api.Op
		body any
	}{
		{api.OpTaskClaim, api.TaskClaimCommand{ID: c.ID, Agent: "rita"}},
		{api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: task.Fence}},
	} {
		if err := mustError(t, b.apply(body.op, body.body)); !strings.Contains(err.Error(), "running without a lease") {
			t.Errorf("%s on a damaged task: %v", body.op, err)
		}
	}
	if dataDump(t, b.f) != before {
		t.Error("a refused command over a damaged task changed the state")
	}
	if err := b.f.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketTasks).Put(u64(task.Seq), []byte("{")) }); err != nil {
		t.Fatal(err)
	}
	before = dataDump(t, b.f)
	b.jump(b.now().Add(time.Hour))
	if err := mustError(t, b.apply(api.OpTick, api.TickCommand{})); !strings.Contains(err.Error(), "decode") {
		t.Errorf("tick over a damaged task: %v", err)
	}
	if _, err := b.f.Task(c.ID); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Errorf("Task of a damaged record: %v", err)
	}
	if dataDump(t, b.f) != before {
		t.Error("a command over a damaged task changed the state")
	}
}

// Logs written before the tick served approvals hold "task_tick": it
// still applies, as the same tick.
func TestLegacyTaskTickStillApplies(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	b.create(c)
	claim := b.claim(c.ID, "rita")
	b.jump(*claim.LeaseExpires)
	r, ok := b.ok(opTaskTick, api.TickCommand{}).(*TickResult)
	if !ok || !slices.Equal(r.Expired, []string{c.ID}) {
		t.Fatalf("task_tick at the lease end = %+v, want %s expired", r, c.ID)
	}
	if task := b.task(c.ID); task.State != api.TaskReady {
		t.Errorf("after task_tick: %s, want ready", task.State)
	}
}

// max_attempts bounds the leases that lapse, not the claims: claims a
// handoff ended use none.
func TestTaskHandoffsUseNoAttempt(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	c.MaxAttempts = 2
	b.create(c)
	for range 3 {
		cl := b.claim(c.ID, "rita")
		b.ok(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "rita", Reason: "later"})
	}
	cl := b.claim(c.ID, "rita")
	b.jump(*cl.LeaseExpires)
	if r := b.tick(); !slices.Equal(r.Expired, []string{c.ID}) || len(r.Failed) != 0 {
		t.Fatalf("first lapse after three handoffs = %+v, want the task ready again", r)
	}
	task := b.task(c.ID)
	if task.Attempt != 4 || task.Expiries != 1 || task.State != api.TaskReady {
		t.Fatalf("after the first lapse: %+v", task)
	}
	b.jump(*task.ReadyAt)
	cl = b.claim(c.ID, "rita")
	b.jump(*cl.LeaseExpires)
	if r := b.tick(); !slices.Equal(r.Failed, []string{c.ID}) {
		t.Fatalf("second lapse = %+v, want the task failed (max_attempts 2)", r)
	}
	if task := b.task(c.ID); task.Completion.Error.ErrorType != api.TaskErrorTimeout || !strings.Contains(task.Completion.Error.ErrorMessage, "expired 2 times (max_attempts 2)") {
		t.Errorf("failed task = %+v", task.Completion.Error)
	}
}
