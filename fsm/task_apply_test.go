package fsm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

func TestTaskCreatePostsTheDelegation(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("role:reviewer")
	c.Context = json.RawMessage(`{"pr":456}`)
	res := b.create(c)
	if res.ID != c.ID || res.Seq != b.idx || res.State != api.TaskReady {
		t.Fatalf("create = %+v, want %s ready at seq %d", res, c.ID, b.idx)
	}
	task := b.task(c.ID)
	if task.Seq != res.Seq || task.From != "boss" || task.To != "role:reviewer" || string(task.Context) != `{"pr":456}` ||
		task.TimeoutSeconds != 10 || task.MaxAttempts != 3 || task.Attempt != 0 || !task.Created.Equal(b.now()) {
		t.Errorf("task = %+v", task)
	}
	if got := events(task); !slices.Equal(got, []string{"boss created ready"}) || task.History[0].Detail != "for role:reviewer" {
		t.Errorf("history = %q (%+v)", got, task.History)
	}

	m, err := b.f.Message(task.MessageID)
	if err != nil {
		t.Fatalf("delegation %s: %v", task.MessageID, err)
	}
	if m.Seq != res.Seq || m.Type != api.TypeTaskDelegation || m.From != "boss" || !slices.Equal(m.To, []string{"role:reviewer"}) ||
		!slices.Equal(m.Recipients, []string{"rex", "rita"}) || m.Title != c.Title || m.Content.Text != c.Description ||
		m.CorrelationID != c.ID || string(m.Metadata) != `{"task_id":"`+c.ID+`"}` || m.Channel != api.DefaultChannel {
		t.Errorf("delegation = %+v", m)
	}
	if want := api.DerivedID("boss", b.now(), "task:"+c.ID); m.ID != want {
		t.Errorf("delegation id = %s, want %s", m.ID, want)
	}
	if p := b.inbox("rita", api.InboxQuery{}); len(p.Messages) != 1 || p.Messages[0].ID != m.ID {
		t.Errorf("rita's inbox = %+v, want the delegation", p.Messages)
	}
	lines := b.auditLines()
	if want := "[boss→rex,rita] TASK_DELEGATION: " + c.Title; !strings.HasSuffix(lines[len(lines)-1], want) {
		t.Errorf("audit line %q, want %q", lines[len(lines)-1], want)
	}

	// Without a description (or a blank one) the title is the text.
	for _, desc := range []string{"", " \u00a0\n"} {
		c = b.newTask("eve")
		c.Description = desc
		b.create(c)
		if m := b.lastMessage(); m.Content.Text != c.Title || !slices.Equal(m.Recipients, []string{"eve"}) {
			t.Errorf("delegation with description %q = %+v", desc, m)
		}
	}
}

func TestTaskCreateIdempotent(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	first := b.create(c)
	claim := b.claim(c.ID, "rita")

	before := dataDump(t, b.f)
	again := b.create(c)
	if *again != *first {
		t.Errorf("retried create = %+v, want the original %+v", again, first)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried create changed the state")
	}
	if b.task(c.ID).State != api.TaskRunning || claim.State != api.TaskRunning {
		t.Error("the retried create reset the task")
	}

	other := c
	other.Title = "something else"
	err := b.refused(api.OpTaskCreate, other, api.ErrConflict, "task id "+c.ID+" is taken by another task")
	// The API answers with the *ConflictError's words alone.
	var ce *api.ConflictError
	if !errors.As(err, &ce) || ce.Reason != "task id "+c.ID+" is taken by another task (created at seq "+itoa(first.Seq)+"): create yours with a new id" {
		t.Errorf("conflict = %#v", err)
	}
}

func TestTaskCreateRefusals(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita", "task-404")
	b.refused(api.OpTaskCreate, c, api.ErrNotFound, "task task-404 (depends_on[0]): not found")

	c = b.newTask("rita")
	c.Priority = "medium"
	b.refused(api.OpTaskCreate, c, api.ErrInvalid, `priority: "medium": want one of`)

	c = b.newTask("rita")
	c.Title = "bell\a"
	b.refused(api.OpTaskCreate, c, api.ErrInvalid, "title: must not contain control characters")

	// The rules decide the delegation as any message; a refusal refuses
	// the task and leaves the BLOCKED line alone.
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Forbidden: []rules.ForbiddenRule{{From: "boss", To: "eve", Reason: "eve is off today"}}}})
	c = b.newTask("eve")
	b.refused(api.OpTaskCreate, c, api.ErrForbidden, "eve is off today")
	if _, err := b.f.Task(c.ID); !isErr(err, api.ErrNotFound) {
		t.Errorf("a refused task is stored: %v", err)
	}
	lines := b.auditLines()
	if !strings.Contains(lines[len(lines)-1], "[boss→eve] BLOCKED: eve is off today") {
		t.Errorf("last audit line %q, want the BLOCKED delegation", lines[len(lines)-1])
	}
	// strict_senders refuses an unregistered creator.
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "strict_senders", Value: json.RawMessage("true")})
	c = b.newTask("rita")
	c.From = "stranger"
	b.refused(api.OpTaskCreate, c, api.ErrForbidden, "sender stranger is not a registered agent")
}

// A queue nobody serves yet takes tasks: the delegation reaches the
// channel alone, and an agent registered later claims the task.
func TestTaskCreateForAnEmptyQueue(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("capability:haskell")
	b.create(c)
	m := b.lastMessage()
	if m.Type != api.TypeTaskDelegation || len(m.Recipients) != 0 {
		t.Errorf("delegation to an empty queue = %+v, want no recipients", m)
	}
	b.register("hal", "engineer", "haskell")
	if r := b.claim(c.ID, "hal"); r.State != api.TaskRunning {
		t.Errorf("claim = %+v", r)
	}
}

func TestTaskClaim(t *testing.T) {
	b := newTaskBox(t)
	role := b.newTask("role:reviewer")
	b.create(role)

	// Outside the queue: 403, whatever the state.
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: role.ID, Agent: "eve"}, api.ErrForbidden, "task "+role.ID+" is for role:reviewer and eve has role engineer")
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: role.ID, Agent: "zed"}, api.ErrForbidden, "zed is not a registered agent: register it with that role first")
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: "task-nope", Agent: "rita"}, api.ErrNotFound, "task task-nope: not found")

	// The race: two claims, one wins; the loser is told who holds it.
	at := b.now().Add(time.Microsecond)
	won := b.claim(role.ID, "rex")
	if won.State != api.TaskRunning || won.Attempt != 1 || won.Fence != b.idx || won.Seq != b.idx ||
		!won.LeaseExpires.Equal(at.Add(10*time.Second)) {
		t.Errorf("claim = %+v, want running, attempt 1, fence %d, lease until %s", won, b.idx, at.Add(10*time.Second))
	}
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: role.ID, Agent: "rita"}, api.ErrConflict,
		"task "+role.ID+" is running, claimed by rex (fence "+itoa(won.Fence)+") until")

	// The winner's retry answers its claim and changes nothing.
	before := dataDump(t, b.f)
	again := b.claim(role.ID, "rex")
	if again.Fence != won.Fence || again.Seq != won.Seq || !again.LeaseExpires.Equal(*won.LeaseExpires) || again.Attempt != 1 {
		t.Errorf("retried claim = %+v, want %+v", again, won)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried claim changed the state")
	}
	task := b.task(role.ID)
	if task.ClaimedBy != "rex" || task.Fence != won.Fence || !slices.Equal(events(task), []string{"boss created ready", "rex claimed running"}) {
		t.Errorf("task = %+v, history %q", task, events(task))
	}

	// A capability queue is claimed by capability, an agent's task by it alone.
	capTask := b.newTask("capability:go")
	b.create(capTask)
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: capTask.ID, Agent: "rex"}, api.ErrForbidden, "rex has not that capability (registered with: none)")
	if r := b.claim(capTask.ID, "eve"); r.State != api.TaskRunning {
		t.Errorf("capability claim = %+v", r)
	}
	direct := b.newTask("rita")
	b.create(direct)
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: direct.ID, Agent: "rex"}, api.ErrForbidden, "task "+direct.ID+" is for rita, not rex")
	// An agent's own task needs no registration.
	loose := b.newTask("zed")
	b.create(loose)
	if r := b.claim(loose.ID, "zed"); r.State != api.TaskRunning {
		t.Errorf("unregistered assignee's claim = %+v", r)
	}

	// A claim of a task that ended says so.
	b.succeed(direct.ID, "rita", b.claim(direct.ID, "rita").Fence)
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: direct.ID, Agent: "rita"}, api.ErrConflict, "task "+direct.ID+" has ended (succeeded, success): nothing to claim")
}

func TestTaskProgress(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	b.create(c)
	cl := b.claim(c.ID, "rita")

	b.jump(b.now().Add(4 * time.Second))
	res := mustTaskResult(t, b.ok(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, Message: "halfway", Progress: ptr(0.5)}))
	if !res.LeaseExpires.Equal(b.now().Add(10*time.Second)) || res.Fence != cl.Fence {
		t.Errorf("progress = %+v, want the lease renewed to %s", res, b.now().Add(10*time.Second))
	}
	task := b.task(c.ID)
	if *task.Progress != 0.5 || task.ProgressMessage != "halfway" || task.History[2].Detail != "halfway (50%)" {
		t.Errorf("task = %+v, last event %+v", task, task.History[2])
	}
	// A report without a progress keeps the last number.
	b.ok(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, Message: "tests run"})
	if task := b.task(c.ID); *task.Progress != 0.5 || task.ProgressMessage != "tests run" {
		t.Errorf("task = %+v", task)
	}

	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rex", Fence: cl.Fence}, api.ErrConflict, "is claimed by rita (fence "+itoa(cl.Fence)+"), not rex")
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence + 1}, api.ErrConflict, "fence "+itoa(cl.Fence+1)+" is not the current claim's")

	// The lease lapsed at the entry's time: refused before any tick.
	lease := b.task(c.ID).LeaseExpires
	b.jump(*lease)
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence}, api.ErrConflict,
		"your lease (fence "+itoa(cl.Fence)+") ended at "+stamp(*lease))

	ready := b.newTask("rex")
	b.create(ready)
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: ready.ID, Agent: "rex", Fence: 1}, api.ErrConflict, "is ready, not running: claim it first")
}

func TestTaskComplete(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("role:reviewer")
	b.create(c)
	cl := b.claim(c.ID, "rita")
	done := api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "LGTM", ConfidenceScore: ptr(0.97), ExecutionTimeMS: 1200,
		ActionsTaken: []json.RawMessage{json.RawMessage(`{"action":"read","file":"retry.go"}`)}, Rationale: "small change",
		NextSteps: []string{"merge"}, Metrics: json.RawMessage(`{"files":1}`), Outputs: []string{"review.md"}}
	res := b.complete(c.ID, "rita", cl.Fence, done)
	if res.State != api.TaskSucceeded || res.Seq != b.idx || res.LeaseExpires != nil {
		t.Errorf("complete = %+v", res)
	}
	task := b.task(c.ID)
	if task.State != api.TaskSucceeded || task.Completion == nil || task.Completion.Result != "LGTM" || task.ClaimedBy != "rita" || task.LeaseExpires != nil {
		t.Errorf("task = %+v", task)
	}
	if last := task.History[len(task.History)-1]; last.Event != "completed" || last.Detail != "success (0.97)" || last.Actor != "rita" {
		t.Errorf("last event = %+v", last)
	}

	reply := b.lastMessage()
	if reply.Seq != res.Seq || reply.Type != api.TypeTaskCompletion || reply.From != "rita" || !slices.Equal(reply.Recipients, []string{"boss"}) ||
		reply.InReplyTo != task.MessageID || reply.ThreadID != task.MessageID || reply.Title != "success (0.97) "+c.Title ||
		reply.Content.Text != "LGTM" || reply.CorrelationID != c.ID {
		t.Errorf("reply = %+v", reply)
	}
	if want := api.DerivedID("rita", b.now(), "task-done:"+c.ID); reply.ID != want {
		t.Errorf("reply id %s, want %s", reply.ID, want)
	}
	var meta api.TaskCompletion
	if err := json.Unmarshal(reply.Metadata, &meta); err != nil || meta.Status != api.TaskStatusSuccess || *meta.ConfidenceScore != 0.97 || meta.Rationale != "small change" {
		t.Errorf("reply metadata %s: %+v, %v", reply.Metadata, meta, err)
	}
	lines := b.auditLines()
	if want := "[rita→boss] TASK_COMPLETION: success (0.97) " + c.Title; !strings.HasSuffix(lines[len(lines)-1], want) {
		t.Errorf("audit line %q, want %q", lines[len(lines)-1], want)
	}
	if r := b.receipts(task.MessageID); r["rita"].State != api.ReceiptAnswered {
		t.Errorf("the delegation's receipt for rita = %+v, want answered", r["rita"])
	}

	// A retry with the same fence and completion answers the stored
	// result; another completion is refused.
	before := dataDump(t, b.f)
	again := b.complete(c.ID, "rita", cl.Fence, done)
	if *again != (api.TaskResult{ID: c.ID, Seq: res.Seq, State: api.TaskSucceeded, Attempt: 1, Fence: cl.Fence}) {
		t.Errorf("retried complete = %+v, want seq %d", again, res.Seq)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried complete changed the state")
	}
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, Completion: api.TaskCompletion{Status: api.TaskStatusFailure}},
		api.ErrConflict, "task "+c.ID+" has ended (succeeded, success): nothing to report")

	// The statuses and the states they make.
	for _, tc := range []struct {
		status string
		state  api.TaskState
		title  string
	}{
		{api.TaskStatusFailure, api.TaskFailed, "failure "},
		{api.TaskStatusPartialSuccess, api.TaskSucceeded, "partial_success "},
	} { // requires_approval awaits an approval: approval_task_test.go.
		c := b.newTask("rex")
		b.create(c)
		r := b.complete(c.ID, "rex", b.claim(c.ID, "rex").Fence, api.TaskCompletion{Status: tc.status})
		if r.State != tc.state || b.task(c.ID).Completion.Status != tc.status {
			t.Errorf("%s: state %s, want %s", tc.status, r.State, tc.state)
		}
		if m := b.lastMessage(); m.Title != tc.title+c.Title || m.Content.Text != m.Title {
			t.Errorf("%s: reply title %q text %q", tc.status, m.Title, m.Content.Text)
		}
	}

	// The reply goes through the rules: one they block refuses the
	// completion, which then has not happened.
	c = b.newTask("eve")
	b.create(c)
	cl = b.claim(c.ID, "eve")
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Forbidden: []rules.ForbiddenRule{{From: "eve", To: "boss", Reason: "eve reports to rex"}}}})
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.ID, Agent: "eve", Fence: cl.Fence, Completion: done}, api.ErrForbidden, "eve reports to rex")
	if b.task(c.ID).State != api.TaskRunning {
		t.Error("a refused completion ended the task")
	}
}

func TestTaskHandoff(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	b.create(c)
	cl := b.claim(c.ID, "rita")
	b.ok(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, Progress: ptr(0.3)})

	b.refused(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence + 7, To: "eve"}, api.ErrConflict, "is not the current claim's")
	res := mustTaskResult(t, b.ok(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "capability:rust", Reason: "needs rust"}))
	if res.State != api.TaskReady || res.Fence != 0 || res.LeaseExpires != nil || res.Attempt != 1 {
		t.Errorf("handoff = %+v", res)
	}
	task := b.task(c.ID)
	if task.To != "capability:rust" || task.ClaimedBy != "" || task.Progress != nil || task.History[len(task.History)-1].Detail != "to capability:rust: needs rust" {
		t.Errorf("task after handoff = %+v", task)
	}
	m := b.lastMessage()
	if m.Type != api.TypeTaskHandoff || m.From != "rita" || !slices.Equal(m.Recipients, []string{"eve"}) || m.Content.Text != "needs rust" || m.InReplyTo != task.MessageID {
		t.Errorf("handoff message = %+v", m)
	}
	if !strings.HasSuffix(b.auditLines()[len(b.auditLines())-1], "[rita→eve] HANDOFF: "+c.Title) {
		t.Errorf("audit = %q", b.auditLines()[len(b.auditLines())-1])
	}

	// A retried handoff answers the handoff and changes nothing; the
	// same fence to another assignee is not a retry.
	before := dataDump(t, b.f)
	again := mustTaskResult(t, b.ok(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "capability:rust", Reason: "needs rust"}))
	if *again != *res {
		t.Errorf("retried handoff = %+v, want %+v", again, res)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried handoff changed the state")
	}
	b.refused(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "rex", Reason: "needs rust"}, api.ErrConflict, "is ready, not running")

	// The old claimant's late reports are refused; the new queue claims.
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}},
		api.ErrConflict, "is ready, not running")
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: c.ID, Agent: "rita"}, api.ErrForbidden, "rita has not that capability")
	if r := b.claim(c.ID, "eve"); r.Attempt != 2 {
		t.Errorf("claim after handoff = %+v, want attempt 2", r)
	}
	// Still a retry once the task moved on: it answers the handoff.
	if again := mustTaskResult(t, b.ok(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "capability:rust", Reason: "needs rust"})); *again != *res {
		t.Errorf("retried handoff after a new claim = %+v", again)
	}
}

func TestTaskCancel(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	b.create(c)
	cl := b.claim(c.ID, "rita")

	b.refused(api.OpTaskCancel, api.TaskCancelCommand{ID: c.ID, From: "rita"}, api.ErrForbidden, "task "+c.ID+" was created by boss: only its creator cancels it, not rita")
	res := mustTaskResult(t, b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: c.ID, From: "boss", Reason: "not needed"}))
	if res.State != api.TaskCancelled || res.LeaseExpires != nil {
		t.Errorf("cancel = %+v", res)
	}
	if _, ok := b.f.NextDeadline(); ok {
		t.Error("a cancelled task's lease is still due")
	}
	task := b.task(c.ID)
	if last := task.History[len(task.History)-1]; last.Event != "cancelled" || last.Actor != "boss" || last.Detail != "not needed" {
		t.Errorf("last event = %+v", last)
	}
	// The claimant learns at its next report.
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence}, api.ErrConflict, "has ended (cancelled): nothing to report")

	// A retry answers the cancel; a task that ended otherwise is 409.
	before := dataDump(t, b.f)
	again := mustTaskResult(t, b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: c.ID, From: "boss"}))
	if again.Seq != res.Seq || again.State != api.TaskCancelled || dataDump(t, b.f) != before {
		t.Errorf("retried cancel = %+v, want %+v and no change", again, res)
	}
	done := b.newTask("rex")
	b.create(done)
	b.succeed(done.ID, "rex", b.claim(done.ID, "rex").Fence)
	b.refused(api.OpTaskCancel, api.TaskCancelCommand{ID: done.ID, From: "boss"}, api.ErrConflict, "has ended (succeeded, success): nothing to cancel")

	// Waiting and ready tasks cancel too.
	ready := b.newTask("rex")
	b.create(ready)
	waiting := b.newTask("rex", ready.ID)
	b.create(waiting)
	if r := mustTaskResult(t, b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: waiting.ID, From: "boss"})); r.State != api.TaskCancelled {
		t.Errorf("cancel waiting = %+v", r)
	}
	if r := mustTaskResult(t, b.ok(api.OpTaskCancel, api.TaskCancelCommand{ID: ready.ID, From: "boss"})); r.State != api.TaskCancelled {
		t.Errorf("cancel ready = %+v", r)
	}
}

func TestTaskCommandsDecodeErrors(t *testing.T) {
	b := newTaskBox(t)
	for _, op := range []api.Op{api.OpTaskCreate, api.OpTaskClaim, api.OpTaskProgress, api.OpTaskComplete, api.OpTaskHandoff, api.OpTaskCancel, api.OpTick} {
		b.idx++
		b.ts += 1000
		l := opEntry(t, b.idx, b.ts, op, nil)
		l.Data = append(l.Data[:len(l.Data)-len("null")], `{"id":`...)
		err := mustError(t, applyOne(b.f, l))
		if !strings.Contains(err.Error(), "fsm: apply "+string(op)+": decode") {
			t.Errorf("%s with a bad body: %v", op, err)
		}
	}
	b.refused(api.OpTaskClaim, api.TaskClaimCommand{ID: "-x", Agent: "rita"}, api.ErrInvalid, "id: ")
	b.refused(api.OpTaskComplete, api.TaskCompleteCommand{ID: "t", Agent: "rita", Fence: 1, Completion: api.TaskCompletion{Status: "done"}}, api.ErrInvalid, "status: ")
	b.refused(api.OpTaskHandoff, api.TaskHandoffCommand{ID: "t", Agent: "rita", Fence: 1, To: "team:x"}, api.ErrInvalid, "to: ")
	b.refused(api.OpTaskCancel, api.TaskCancelCommand{ID: "t", From: "Boss"}, api.ErrInvalid, "from: ")
	b.refused(api.OpTaskProgress, api.TaskProgressCommand{ID: "t", Agent: "rita", Fence: 1, Progress: ptr(2.0)}, api.ErrInvalid, "progress: ")
}
