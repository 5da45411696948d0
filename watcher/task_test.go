package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

// script is an agent config whose command is sh -c script; extra lines
// (indented for the agent) follow.
func script(id, sh string, extra ...string) string {
	y := fmt.Sprintf("agents:\n  - id: %s\n    role: reviewer\n    command: [sh, -c, %q]\n    context_messages: 0\n", id, sh)
	for _, e := range extra {
		y += "    " + e + "\n"
	}
	return y
}

// A task addressed to the agent is claimed and run with its prompt (the
// title, description, context, role and guardrails) and the task's
// environment; plain text is a success with that text.
func TestTaskPlainTextSucceeds(t *testing.T) {
	dir := t.TempDir()
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `cat > `+dir+`/prompt; env | grep ^MAOS_ | sort > `+dir+`/env; echo "  reviewed: fine  "`,
		"guardrails: never push to main"), tasks)
	tasks.add(api.Task{ID: "task-1", To: "bob", Title: "review the parser", Description: "look at parse.go",
		Context: json.RawMessage(`{"pr":42}`), Priority: api.PriorityHigh})
	offer(t, w, taskOffer{id: "task-1"})
	tasks.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) > 0 })

	c := tasks.completes[0]
	if c.ID != "task-1" || c.Agent != "bob" || c.Fence != tasks.get("task-1").Fence || c.Fence == 0 {
		t.Errorf("completed %s by %s under fence %d; want task-1 by bob under the claim's fence %d", c.ID, c.Agent, c.Fence, tasks.get("task-1").Fence)
	}
	if c.Completion.Status != api.TaskStatusSuccess || c.Completion.Result != "reviewed: fine" || c.Completion.Error != nil {
		t.Errorf("completion %+v; want success with the trimmed text", c.Completion)
	}
	if got := tasks.get("task-1").State; got != api.TaskSucceeded {
		t.Errorf("task state %s, want succeeded", got)
	}
	prompt, _ := os.ReadFile(filepath.Join(dir, "prompt"))
	for _, want := range []string{"You are bob", `role "reviewer"`, "never push to main", "id: task-1", "from: lead",
		"priority: high", "title: review the parser", `context: {"pr":42}`, "look at parse.go", `{"type":"complete"`} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(string(prompt), "Message to answer") {
		t.Errorf("a task's prompt is the message prompt:\n%s", prompt)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	for _, want := range []string{"MAOS_AGENT_ID=bob", "MAOS_AGENT_ROLE=reviewer", "MAOS_MESSAGE_ID=msg-of-task-1",
		"MAOS_TASK_ATTEMPT=1", fmt.Sprintf("MAOS_TASK_FENCE=%d", c.Fence), "MAOS_TASK_ID=task-1", "MAOS_SESSION_ID=general"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("the CLI's environment lacks %s:\n%s", want, env)
		}
	}
	tasks.wait(t, "the run's end counted", func(*fakeTasks) bool { return w.health().TasksRunning == 0 })
	if h := w.health(); h.TasksSucceeded != 1 || h.TasksFailed != 0 || h.LastError != "" || h.MeanDurationMS <= 0 {
		t.Errorf("health %+v; want 1 succeeded", h)
	}
}

// Status lines renew the lease as they come (with their words and
// progress); artifacts and the complete line make the completion. The
// lease is renewed on its period too, every third of timeout_seconds.
func TestTaskStatusLinesAndCompleteLine(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `
echo '{"type":"status","message":"reading","progress":0.25}'
while [ ! -e '`+gate+`' ]; do sleep 0.01; done
echo 'some notes'
echo '{"type":"artifact","path":"out/report.md","description":"the report"}'
echo '{"type":"status","message":"too far","progress":7}'
echo '{"type":"complete","result":"partial_success","outputs":["out/report.md","out/extra.txt"],"confidence_score":0.9,"rationale":"half of it"}'
`), tasks)
	tasks.add(api.Task{ID: "task-2", To: "bob", Title: "t", TimeoutSeconds: 1})
	offer(t, w, taskOffer{id: "task-2"})
	tasks.wait(t, "the status line as progress", func(f *fakeTasks) bool {
		return len(f.progress) > 0 && f.progress[0].Message == "reading"
	})
	if p := tasks.progress[0]; p.Progress == nil || *p.Progress != 0.25 || p.Fence != tasks.get("task-2").Fence || p.Agent != "bob" {
		t.Errorf("first progress %+v; want reading at 0.25 under bob's fence", p)
	}
	tasks.wait(t, "two renewals on the period", func(f *fakeTasks) bool { return len(f.progress) >= 3 })
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tasks.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) > 0 })
	c := tasks.completes[0].Completion
	if c.Status != api.TaskStatusPartialSuccess || c.Result != "some notes" || c.Rationale != "half of it" ||
		c.ConfidenceScore == nil || *c.ConfidenceScore != 0.9 || !slices.Equal(c.Outputs, []string{"out/report.md", "out/extra.txt"}) {
		t.Errorf("completion %+v", c)
	}
	if c.ExecutionTimeMS <= 0 {
		t.Errorf("execution_time_ms %d, want the time it took", c.ExecutionTimeMS)
	}
	for _, p := range tasks.progress {
		if p.Message == "too far" && p.Progress != nil {
			t.Errorf("a progress of 7 was passed on: %+v", p)
		}
	}
}

// The stub model's task mode (--progress) is read as a task's CLI
// reports: its status lines renew the lease, its answer is the result,
// its artifact the output.
func TestTaskStubModelReports(t *testing.T) {
	stub := buildStub(t)
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, fmt.Sprintf("agents:\n- {id: bob, command: [%q, --progress, '2', --sleep, 1s], context_messages: 0}\n", stub), tasks)
	tasks.add(api.Task{ID: "task-stub", To: "bob", Title: "t"})
	offer(t, w, taskOffer{id: "task-stub"})
	tasks.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) > 0 })
	c := tasks.completes[0].Completion
	if c.Status != api.TaskStatusSuccess || c.Result != "stub answer to task-stub" || !slices.Equal(c.Outputs, []string{"stub/task-stub.txt"}) {
		t.Errorf("completion %+v", c)
	}
	var msgs []string
	for _, p := range tasks.progress {
		msgs = append(msgs, p.Message)
	}
	if !slices.Contains(msgs, "step 2 of 2") {
		t.Errorf("progress %q, want the stub's status lines", msgs)
	}
}

// A CLI that keeps failing completes the task with failure after the
// retries: the error type, exit code, retries and the last stderr lines.
func TestTaskFailingCLIFailsAfterRetries(t *testing.T) {
	log := filepath.Join(t.TempDir(), "tries")
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo try >> `+log+`; echo "it broke" >&2; exit 3`, "retries: 2"), tasks)
	tasks.add(api.Task{ID: "task-3", To: "bob", Title: "t"})
	offer(t, w, taskOffer{id: "task-3"})
	tasks.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) > 0 })
	c := tasks.completes[0].Completion
	if c.Status != api.TaskStatusFailure || c.Error == nil || c.Error.ErrorType != ErrorTypeCLI || c.Error.ErrorCode != "exit 3" ||
		c.Error.RetryCount != 2 || !strings.Contains(c.Error.ErrorMessage, "it broke") || !c.Error.IsRecoverable {
		t.Errorf("completion %+v error %+v", c, c.Error)
	}
	if data, _ := os.ReadFile(log); strings.Count(string(data), "try") != 3 {
		t.Errorf("%d runs, want 1 + 2 retries", strings.Count(string(data), "try"))
	}
	if tasks.get("task-3").State != api.TaskFailed {
		t.Errorf("task is %s, want failed", tasks.get("task-3").State)
	}
	tasks.wait(t, "the run's end counted", func(*fakeTasks) bool { return w.health().TasksRunning == 0 })
	if h := w.health(); h.TasksFailed != 1 || !strings.Contains(h.LastError, "task task-3 failed: cli_error") {
		t.Errorf("health %+v", h)
	}
}

// A run that prints nothing usable (no text, no §6 line that reports) is
// a failed attempt, retried, then empty_output; a complete line with a
// value out of bounds is reported as a failure naming the field.
func TestTaskEmptyAndInvalidReports(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo '{"type":"status","message":"hm"}'`, "retries: 1"), tasks)
	tasks.add(api.Task{ID: "task-e", To: "bob", Title: "t"})
	offer(t, w, taskOffer{id: "task-e"})
	tasks.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) > 0 })
	if c := tasks.completes[0].Completion; c.Status != api.TaskStatusFailure || c.Error.ErrorType != ErrorTypeEmptyOutput || c.Error.RetryCount != 1 {
		t.Errorf("empty: %+v %+v", c, c.Error)
	}

	api2 := newFakeTasks()
	w2, _ := taskWatcher(t, script("bob", `echo done; echo '{"type":"complete","result":"success","confidence_score":2}'`), api2)
	api2.add(api.Task{ID: "task-i", To: "bob", Title: "t"})
	offer(t, w2, taskOffer{id: "task-i"})
	api2.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) > 0 })
	if c := api2.completes[0].Completion; c.Status != api.TaskStatusFailure || c.Error.ErrorType != ErrorTypeInvalidCompletion ||
		!strings.Contains(c.Error.ErrorMessage, "confidence_score") || c.Result != "done" {
		t.Errorf("invalid: %+v %+v", c, c.Error)
	}
}

// A completion the node refuses as too large is reported again as a
// failure saying so, small, once; the task does not lapse to run again.
func TestTaskRefusedCompletionFallsBackToAFailure(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo done`), tasks)
	tasks.add(api.Task{ID: "task-big", To: "bob", Title: "t"})
	tasks.onComplete = func(cmd api.TaskCompleteCommand) error {
		if cmd.Completion.Status == api.TaskStatusSuccess {
			return fmt.Errorf("body over 256 KiB: %w", api.ErrTooLarge)
		}
		return nil
	}
	offer(t, w, taskOffer{id: "task-big"})
	tasks.wait(t, "the task ended", func(f *fakeTasks) bool { return f.tasks["task-big"].State.Final() })
	if len(tasks.completes) != 2 {
		t.Fatalf("%d completions sent, want the refused one and its failure", len(tasks.completes))
	}
	c := tasks.completes[1].Completion
	if c.Status != api.TaskStatusFailure || c.Error == nil || c.Error.ErrorType != ErrorTypeInvalidCompletion ||
		!strings.Contains(c.Error.ErrorMessage, "too large") || c.Result != "done" {
		t.Errorf("fallback %+v error %+v", c, c.Error)
	}

	// Refused again: dropped, not retried for ever.
	api2 := newFakeTasks()
	w2, _ := taskWatcher(t, script("bob", `echo done`), api2)
	api2.add(api.Task{ID: "task-bad", To: "bob", Title: "t"})
	api2.onComplete = func(api.TaskCompleteCommand) error { return fmt.Errorf("no: %w", api.ErrInvalid) }
	offer(t, w2, taskOffer{id: "task-bad"})
	api2.wait(t, "the work dropped", func(*fakeTasks) bool { return w2.health().TasksFailed == 1 })
	if len(api2.completes) != 2 {
		t.Errorf("%d completions sent, want 2", len(api2.completes))
	}
}

// A renewal refused with 409 means the claim is lost: the run is
// cancelled and nothing is reported. A completion refused with 409 (the
// lease lapsed before the report) is dropped, not retried.
func TestTaskLostClaimDropsTheWork(t *testing.T) {
	started, finished := filepath.Join(t.TempDir(), "started"), filepath.Join(t.TempDir(), "finished")
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `touch `+started+`; sleep 30; touch `+finished+`; echo late`), tasks)
	tasks.add(api.Task{ID: "task-4", To: "bob", Title: "t", TimeoutSeconds: 1})
	offer(t, w, taskOffer{id: "task-4"})
	tasks.wait(t, "the run", func(f *fakeTasks) bool {
		_, err := os.Stat(started)
		return err == nil
	})
	// Another agent's claim took over after a lapse.
	tasks.set("task-4", func(t *api.Task) { t.ClaimedBy, t.Fence = "amy", t.Fence+100 })
	tasks.wait(t, "the watcher to stop the run", func(f *fakeTasks) bool {
		return w.health().TasksRunning == 0 && w.health().TasksFailed == 1
	})
	if _, err := os.Stat(finished); err == nil {
		t.Error("the run went on to its end after the claim was lost")
	}
	if len(tasks.completes) != 0 || len(tasks.handoffs) != 0 {
		t.Errorf("a lost claim reported: completes %+v handoffs %+v", tasks.completes, tasks.handoffs)
	}
	if h := w.health(); !strings.Contains(h.LastError, "lost the claim of task task-4") {
		t.Errorf("health %+v", h)
	}

	api2 := newFakeTasks()
	w2, _ := taskWatcher(t, script("bob", `echo done`), api2)
	api2.add(api.Task{ID: "task-5", To: "bob", Title: "t"})
	api2.onComplete = func(cmd api.TaskCompleteCommand) error { return conflict("lease lapsed at fence %d", cmd.Fence) }
	offer(t, w2, taskOffer{id: "task-5"})
	api2.wait(t, "the refused completion counted", func(f *fakeTasks) bool { return w2.health().TasksFailed == 1 })
	if len(api2.completes) != 1 {
		t.Errorf("%d completions sent, want 1: a refused one is not retried", len(api2.completes))
	}
	if h := w2.health(); !strings.Contains(h.LastError, "completion of task task-5 refused") || h.MeanDurationMS != 0 {
		t.Errorf("health %+v", h)
	}
}

// Losing the claim race is normal: the task, read again, is another's,
// and the watcher moves on without running anything.
func TestTaskClaimRaceLost(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `touch `+ran+`; echo x`, `claim: ["role:reviewer"]`), tasks)
	tasks.queues["bob"] = []string{"role:reviewer"}
	tasks.add(api.Task{ID: "task-6", To: "role:reviewer", Title: "t"})
	tasks.onClaim = func(id, _ string) error {
		t := tasks.tasks[id]
		t.State, t.ClaimedBy, t.Fence = api.TaskRunning, "amy", 99
		return conflict("task %s is running, claimed by amy", id)
	}
	offer(t, w, taskOffer{id: "task-6"})
	tasks.wait(t, "the claim and the read after it", func(f *fakeTasks) bool { return len(f.claims) == 1 })
	// The loop is idle again: a second task is claimed and run.
	tasks.onClaim = nil
	tasks.add(api.Task{ID: "task-7", To: "bob", Title: "t"})
	offer(t, w, taskOffer{id: "task-7"})
	tasks.wait(t, "task-7 done", func(f *fakeTasks) bool { return len(f.completes) == 1 })
	if !slices.Equal(tasks.claims, []string{"task-6 bob", "task-7 bob"}) || tasks.completes[0].ID != "task-7" {
		t.Errorf("claims %v completes %+v; want one claim of task-6 (lost) and task-7 done", tasks.claims, tasks.completes)
	}
}

// A claim whose answer was lost (it committed, the connection broke) is
// not left to lapse: the task, read again, is the agent's, and claiming
// again answers that claim; the task runs once, under its fence.
func TestTaskClaimAnswerLost(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo ok`), tasks)
	tasks.add(api.Task{ID: "t-lost", To: "bob", Title: "t"})
	tasks.onClaim = func(id, agent string) error {
		tasks.onClaim = nil
		tasks.mu.Unlock() // the claim commits...
		_, err := tasks.ClaimTask(t.Context(), id, agent)
		tasks.mu.Lock()
		if err != nil {
			t.Error(err)
		}
		return errors.New("connection reset") // ...and its answer is lost
	}
	offer(t, w, taskOffer{id: "t-lost"})
	tasks.wait(t, "done", func(f *fakeTasks) bool { return len(f.completes) == 1 })
	if len(tasks.claims) != 3 || tasks.completes[0].Fence != tasks.get("t-lost").Fence {
		t.Errorf("claims %v completes %+v; want the lost claim, its commit and the retried claim answering it", tasks.claims, tasks.completes)
	}
}

// Only the agent's queues are claimed: its id and its claim entries; a
// task event that shows a task not ready, or of another queue, is not.
func TestTaskOnlyOurQueues(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo ok`, `claim: ["capability:go"]`), tasks)
	tasks.queues["bob"] = []string{"role:reviewer", "capability:go"}
	for _, tk := range []api.Task{
		{ID: "t-role", To: "role:reviewer", Title: "t"}, // bob's role, but not in claim:
		{ID: "t-amy", To: "amy", Title: "t"},
		{ID: "t-wait", To: "bob", Title: "t", State: api.TaskWaiting},
		{ID: "t-go", To: "capability:go", Title: "t"},
	} {
		task := tasks.add(tk)
		offer(t, w, taskOffer{id: task.ID, task: task})
	}
	offer(t, w, taskOffer{id: "t-role"}) // by id: read, then refused as not ours
	tasks.wait(t, "t-go done", func(f *fakeTasks) bool { return len(f.completes) == 1 })
	tasks.wait(t, "t-role read", func(f *fakeTasks) bool { return slices.Contains(f.reads, "t-role") })
	if !slices.Equal(tasks.claims, []string{"t-go bob"}) {
		t.Errorf("claims %v, want only t-go", tasks.claims)
	}
}

// At start the watcher offers what the stream after its cursor may not
// show: the ready tasks of each queue, and the tasks it held before a
// restart, which it claims again (the claim answers the current one) and
// runs under the same fence.
func TestTaskListAtStartResumesOwnClaims(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo "again: $MAOS_TASK_ATTEMPT"`, `claim: ["role:reviewer"]`), tasks)
	tasks.queues["bob"] = []string{"role:reviewer"}
	tasks.add(api.Task{ID: "t-held", To: "role:reviewer", Title: "t"})
	held, err := tasks.ClaimTask(t.Context(), "t-held", "bob")
	if err != nil {
		t.Fatal(err)
	}
	tasks.add(api.Task{ID: "t-ready", To: "role:reviewer", Title: "t"})
	tasks.add(api.Task{ID: "t-other", To: "amy", Title: "t"})
	w.listTasks(t.Context())
	tasks.wait(t, "both done", func(f *fakeTasks) bool { return len(f.completes) == 2 })
	byID := map[string]api.TaskCompleteCommand{}
	for _, c := range tasks.completes {
		byID[c.ID] = c
	}
	if c := byID["t-held"]; c.Fence != held.Fence || c.Completion.Result != "again: 1" {
		t.Errorf("t-held completed %+v; want under its fence %d", c, held.Fence)
	}
	if _, ok := byID["t-ready"]; !ok {
		t.Errorf("t-ready not done: %+v", tasks.completes)
	}
	want := []api.TaskQuery{{State: api.TaskRunning, ClaimedBy: "bob", Limit: api.MaxPageLimit},
		{State: api.TaskReady, To: "bob", Limit: api.MaxPageLimit}, {State: api.TaskReady, To: "role:reviewer", Limit: api.MaxPageLimit}}
	if !slices.Equal(tasks.queries, want) {
		t.Errorf("queries %+v, want %+v", tasks.queries, want)
	}
}

// A task whose backoff has not passed is claimed once it has, not before
// (the fake refuses an early claim).
func TestTaskClaimedFromReadyAt(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo ok`), tasks)
	at := time.Now().Add(500 * time.Millisecond)
	task := tasks.add(api.Task{ID: "t-later", To: "bob", Title: "t", ReadyAt: &at})
	offer(t, w, taskOffer{id: task.ID, task: task})
	tasks.wait(t, "done", func(f *fakeTasks) bool { return len(f.completes) == 1 })
	if !slices.Equal(tasks.claims, []string{"t-later bob"}) {
		t.Errorf("claims %v, want one, at its ready_at", tasks.claims)
	}
}

// With the queue policy one task runs at a time: the second is claimed
// only once the first ended; with fork, up to max_forks at once.
func TestTaskSlots(t *testing.T) {
	gate := t.TempDir()
	run := `touch ` + gate + `/"$MAOS_TASK_ID".started; while [ ! -e ` + gate + `/"$MAOS_TASK_ID" ]; do sleep 0.01; done; echo ok`
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", run), tasks)
	for _, id := range []string{"s-1", "s-2"} {
		tasks.add(api.Task{ID: id, To: "bob", Title: "t"})
		offer(t, w, taskOffer{id: id})
	}
	tasks.wait(t, "s-1 claimed", func(f *fakeTasks) bool { return len(f.claims) == 1 })
	waitExists(t, filepath.Join(gate, "s-1.started"))
	if len(tasks.claims) != 1 {
		t.Fatalf("claims %v while s-1 runs under the queue policy", tasks.claims)
	}
	if err := os.WriteFile(filepath.Join(gate, "s-1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tasks.wait(t, "s-2 claimed after s-1", func(f *fakeTasks) bool { return len(f.claims) == 2 })
	if err := os.WriteFile(filepath.Join(gate, "s-2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tasks.wait(t, "both done", func(f *fakeTasks) bool { return len(f.completes) == 2 })

	forks := newFakeTasks()
	wf, _ := taskWatcher(t, script("bob", run, "policy: {mode: fork, max_forks: 2}"), forks)
	for _, id := range []string{"f-1", "f-2", "f-3"} {
		forks.add(api.Task{ID: id, To: "bob", Title: "t"})
		offer(t, wf, taskOffer{id: id})
	}
	forks.wait(t, "two claimed at once", func(f *fakeTasks) bool { return len(f.claims) == 2 })
	for _, id := range []string{"f-1", "f-2"} {
		waitExists(t, filepath.Join(gate, id+".started"))
	}
	if len(forks.claims) != 2 || wf.health().TasksRunning != 2 {
		t.Fatalf("claims %v running %d; want max_forks 2", forks.claims, wf.health().TasksRunning)
	}
	for _, id := range []string{"f-1", "f-2", "f-3"} {
		if err := os.WriteFile(filepath.Join(gate, id), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	forks.wait(t, "all done", func(f *fakeTasks) bool { return len(f.completes) == 3 })
}

// A dependency line naming a task makes the run wait (the lease renewed,
// a progress note naming it) until that task succeeded, then run again
// with its result in the prompt; one that failed fails the task with
// dependency_failed. A dependency on an agent is a note: with text the
// run succeeds, without it the task fails as blocked.
func TestTaskDependencyLines(t *testing.T) {
	dir := t.TempDir()
	// The first run waits for dep; the second (its prompt holds dep's
	// result) answers.
	sh := `p=$(cat); echo "$p" > ` + dir + `/prompt-$MAOS_TASK_ID
case "$p" in
  *"dep result"*) echo "used the dep" ;;
  *) echo '{"type":"dependency","waiting_for":"dep-'$MAOS_TASK_ID'","reason":"need the schema"}' ;;
esac`
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", sh, "policy: {mode: fork}"), tasks)
	for _, id := range []string{"ok", "bad"} {
		tasks.add(api.Task{ID: "dep-" + id, To: "amy", Title: "the schema", State: api.TaskRunning, ClaimedBy: "amy", Fence: 1})
		tasks.add(api.Task{ID: id, To: "bob", Title: "t", TimeoutSeconds: 1})
		offer(t, w, taskOffer{id: id})
	}
	tasks.wait(t, "both waiting", func(f *fakeTasks) bool {
		n := 0
		for _, p := range f.progress {
			if p.Message == "waiting for task dep-"+p.ID+": need the schema" {
				n++
			}
		}
		return n >= 2
	})
	tasks.set("dep-ok", func(t *api.Task) {
		t.State, t.Completion = api.TaskSucceeded, &api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "dep result"}
	})
	tasks.set("dep-bad", func(t *api.Task) {
		t.State, t.Completion = api.TaskFailed, &api.TaskCompletion{Status: api.TaskStatusFailure}
	})
	tasks.wait(t, "both done", func(f *fakeTasks) bool { return len(f.completes) == 2 })
	for _, c := range tasks.completes {
		switch c.ID {
		case "ok":
			if c.Completion.Status != api.TaskStatusSuccess || c.Completion.Result != "used the dep" {
				t.Errorf("ok: %+v", c.Completion)
			}
		case "bad":
			if c.Completion.Status != api.TaskStatusFailure || c.Completion.Error == nil ||
				c.Completion.Error.ErrorType != api.TaskErrorDependencyFailed || !strings.Contains(c.Completion.Error.ErrorMessage, "dep-bad") {
				t.Errorf("bad: %+v", c.Completion)
			}
		}
	}
	prompt, _ := os.ReadFile(filepath.Join(dir, "prompt-ok"))
	if !strings.Contains(string(prompt), `- dep-ok "the schema": succeeded (success): dep result`) {
		t.Errorf("the second run's prompt lacks the dependency's result:\n%s", prompt)
	}

	agents := newFakeTasks()
	wa, _ := taskWatcher(t, script("bob", `echo '{"type":"dependency","waiting_for":"amy","reason":"need review"}'; [ "$MAOS_TASK_ID" = texty ] && echo "did what I could"; true`,
		"policy: {mode: fork}"), agents)
	for _, id := range []string{"texty", "mute"} {
		agents.add(api.Task{ID: id, To: "bob", Title: "t"})
		offer(t, wa, taskOffer{id: id})
	}
	agents.wait(t, "both done", func(f *fakeTasks) bool { return len(f.completes) == 2 })
	for _, c := range agents.completes {
		switch c.ID {
		case "texty":
			if c.Completion.Status != api.TaskStatusSuccess || c.Completion.Result != "did what I could" {
				t.Errorf("texty: %+v", c.Completion)
			}
		case "mute":
			if c.Completion.Status != api.TaskStatusFailure || c.Completion.Error == nil || c.Completion.Error.ErrorType != ErrorTypeBlocked ||
				c.Completion.Error.ErrorMessage != "waiting for amy: need review" || !strings.Contains(c.Completion.Error.SuggestedAction, "handoff") {
				t.Errorf("mute: %+v %+v", c.Completion, c.Completion.Error)
			}
		}
	}
	if !slices.ContainsFunc(agents.progress, func(p api.TaskProgressCommand) bool { return p.Message == "waiting for agent amy: need review" }) {
		t.Errorf("no progress note naming the agent: %+v", agents.progress)
	}
}

// A watcher stopping mid-task hands a queue's task back to its queue
// under its fence, and leaves a task addressed to its agent claimed.
func TestTaskStopHandsQueueTasksBack(t *testing.T) {
	gate := t.TempDir()
	tasks := newFakeTasks()
	w, stop := taskWatcher(t, script("bob", `touch `+gate+`/"$MAOS_TASK_ID"; sleep 30`, `claim: ["role:reviewer"]`, "policy: {mode: fork}"), tasks)
	tasks.queues["bob"] = []string{"role:reviewer"}
	for _, tk := range []api.Task{{ID: "q", To: "role:reviewer", Title: "t"}, {ID: "own", To: "bob", Title: "t"}} {
		tasks.add(tk)
		offer(t, w, taskOffer{id: tk.ID})
	}
	for _, id := range []string{"q", "own"} {
		waitExists(t, filepath.Join(gate, id))
	}
	fence := tasks.get("q").Fence
	stop()
	if len(tasks.handoffs) != 1 || tasks.handoffs[0].ID != "q" || tasks.handoffs[0].To != "role:reviewer" || tasks.handoffs[0].Fence != fence ||
		!strings.Contains(tasks.handoffs[0].Reason, "the watcher of bob stopped") {
		t.Errorf("handoffs %+v; want q back to role:reviewer under fence %d", tasks.handoffs, fence)
	}
	if got := tasks.get("q"); got.State != api.TaskReady {
		t.Errorf("q is %s, want ready", got.State)
	}
	if got := tasks.get("own"); got.State != api.TaskRunning || got.ClaimedBy != "bob" {
		t.Errorf("own is %s by %q, want still bob's", got.State, got.ClaimedBy)
	}
	if len(tasks.completes) != 0 {
		t.Errorf("a stopped run reported: %+v", tasks.completes)
	}
}

// The messages that hand a task to its recipients (delegation, handoff,
// the decision on its approval to its claimant) name it in their
// metadata; every other message is mail.
func TestTaskMessageID(t *testing.T) {
	for _, c := range []struct {
		typ, md string
		want    string
	}{
		{"task_delegation", `{"task_id":"task-1"}`, "task-1"},
		{"handoff", `{"task_id":"task-1","from_claim":7}`, "task-1"},
		{"hitl_decision", `{"approval_id":"appr-1","task_id":"task-1"}`, "task-1"}, // a task's approval decided
		{"hitl_decision", `{"approval_id":"appr-1"}`, ""},
		{"hitl_approval_request", `{"approval_id":"appr-1","task_id":"task-1"}`, ""}, // to the approvers
		{"task_completion", `{"task_id":"task-1"}`, ""},
		{"incident", `{"task_id":"task-1"}`, ""},
		{"task_delegation", `{"other":1}`, ""},
		{"task_delegation", ``, ""},
		{"task_delegation", `[1]`, ""},
		{"task_delegation", `{"task_id":7}`, ""},
	} {
		if got := taskMessageID(&api.Message{Type: c.typ, Metadata: json.RawMessage(c.md)}); got != c.want {
			t.Errorf("taskMessageID(%s %s) = %q, want %q", c.typ, c.md, got, c.want)
		}
	}
}

// Seed 002 §6 lines, and what a run's whole stdout reports.
func TestParseTaskReport(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
		typ  string
	}{
		{`{"type": "status", "message": "m", "progress": 0.1}`, true, LineStatus},
		{`  {"type":"artifact","path":"a"}  `, true, LineArtifact},
		{`{"type":"dependency","waiting_for":"x"}`, true, LineDependency},
		{`{"type":"complete","result":"success"}`, true, LineComplete},
		{`{"type":"other"}`, false, ""},
		{`{"result":"text"}`, false, ""},
		{`{"type":"complete","result":5}`, false, ""},
		{`plain {"type":"status"}`, false, ""},
		{`{"type":"status"`, false, ""},
	} {
		l, ok := ParseStatusLine(c.line)
		if ok != c.ok || l.Type != c.typ {
			t.Errorf("ParseStatusLine(%s) = %q, %v; want %q, %v", c.line, l.Type, ok, c.typ, c.ok)
		}
	}
	r := ParseTaskReport(`intro
{"type":"artifact","path":"a.txt"}
{"type":"artifact","path":"a.txt"}
{"type":"dependency","waiting_for":"t-1","reason":"r"}
{"type":"complete","result":"done it","status":"partial_success"}
outro`)
	if r.Text != "intro\noutro" || !slices.Equal(r.Outputs, []string{"a.txt"}) || len(r.Dependencies) != 1 ||
		r.Dependencies[0] != (Dependency{WaitingFor: "t-1", Reason: "r"}) || r.Complete == nil ||
		r.Complete.Status != api.TaskStatusPartialSuccess || r.Complete.Result != "done it" {
		t.Errorf("report %+v complete %+v", r, r.Complete)
	}
	// Seed 002's "result": "success" is the status; the text is the result.
	c := ParseTaskReport("the answer\n{\"type\":\"complete\",\"result\":\"success\",\"outputs\":[\"b\"]}").completion(5)
	if c.Status != api.TaskStatusSuccess || c.Result != "the answer" || !slices.Equal(c.Outputs, []string{"b"}) || c.ExecutionTimeMS != 5 {
		t.Errorf("completion %+v", c)
	}
	// claude --output-format json: the result field is the text.
	if r := ParseTaskReport(`{"result": "from json", "cost": 1}`); r.Text != "from json" {
		t.Errorf("json answer: %q", r.Text)
	}
	if !ParseTaskReport(`{"type":"status","message":"m"}`).empty() || ParseTaskReport(`{"type":"artifact","path":"p"}`).empty() {
		t.Error("empty(): want status lines alone to report nothing, an artifact something")
	}
	long := strings.Repeat("x", api.MaxTaskTextBytes) + "END"
	if c := ParseTaskReport(long).completion(1); len(c.Result) != api.MaxTaskTextBytes || !strings.HasSuffix(c.Result, "END") {
		t.Errorf("a long text is cut to its last %d bytes: %d bytes", api.MaxTaskTextBytes, len(c.Result))
	}
}

// A complete line with requires_approval is sent as it is, its proposed
// action included: the task then awaits its approval, holding no lease
// (no renewal after the completion), and the run counts neither as a
// success nor as a failure. Its updates while it awaits (the stream's,
// the decision message's offer) run nothing.
func TestTaskRequiresApprovalAwaits(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo 'I would close it'
echo '{"type":"complete","result":"requires_approval","proposed_action":{"action_type":"close_issue","issue_number":123},"rationale":"a duplicate of #456","confidence_score":0.96}'`), tasks)
	tasks.add(api.Task{ID: "t-ask", To: "bob", Title: "triage #123", TimeoutSeconds: 1})
	offer(t, w, taskOffer{id: "t-ask"})
	tasks.wait(t, "the completion", func(f *fakeTasks) bool { return len(f.completes) == 1 })
	c := tasks.completes[0]
	if c.Completion.Status != api.TaskStatusRequiresApproval || c.Completion.Rationale != "a duplicate of #456" ||
		c.Completion.Result != "I would close it" || c.Fence != tasks.get("t-ask").Fence {
		t.Errorf("completion %+v under fence %d; want requires_approval with the rationale and the text, under the claim's fence", c.Completion, c.Fence)
	}
	var action map[string]any
	if err := json.Unmarshal(c.Completion.ProposedAction, &action); err != nil || action["action_type"] != "close_issue" || action["issue_number"] != 123.0 {
		t.Errorf("proposed_action %s (%v); want the complete line's", c.Completion.ProposedAction, err)
	}
	tasks.wait(t, "the run's end counted", func(*fakeTasks) bool { return w.health().TasksRunning == 0 })
	if h := w.health(); h.TasksSucceeded != 0 || h.TasksFailed != 0 || h.MeanDurationMS <= 0 {
		t.Errorf("health %+v; want the run reported, neither succeeded nor failed", h)
	}
	task := tasks.get("t-ask")
	if task.State != api.TaskAwaitingApproval {
		t.Fatalf("task %s, want awaiting_approval", task.State)
	}
	renewals := len(tasks.progress)
	offer(t, w, taskOffer{id: "t-ask", task: &task}) // the stream's update
	offer(t, w, taskOffer{id: "t-ask"})              // the hitl_decision's, say
	tasks.wait(t, "the offer by id read", func(f *fakeTasks) bool { return len(f.reads) >= 2 })
	time.Sleep(time.Second) // three renewal periods of a lease it would hold
	if len(tasks.claims) != 1 || len(tasks.completes) != 1 || len(tasks.progress) != renewals {
		t.Errorf("claims %v, %d completions, renewals %d then %d; want the awaiting task left alone", tasks.claims, len(tasks.completes), renewals, len(tasks.progress))
	}
}

// A task whose approver modified the proposed action comes back running
// for its claimant under a new fence: the watcher runs it once more, the
// approved action in its prompt, and reports under that fence, though
// the update came while the first run was still ending. Replays of
// either claim's update run nothing (not even a read).
func TestTaskModifiedRunsAgainOnce(t *testing.T) {
	dir := t.TempDir()
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `p=$(cat); echo "$p" > `+dir+`/prompt-$MAOS_TASK_FENCE
case "$MAOS_TASK_ID:$p" in
  t-next:*) echo "next done" ;;
  *'{"cmd":"deploy v2"}'*) echo "deployed v2" ;;
  *) echo '{"type":"complete","result":"requires_approval","proposed_action":{"cmd":"deploy v1"}}' ;;
esac`), tasks)
	var first, modified api.Task
	tasks.afterComplete = func(tk *api.Task) {
		if tk.State != api.TaskAwaitingApproval || tk.ID != "t-mod" {
			return
		}
		first = *tk
		tasks.modifyLocked(tk, `{"cmd":"deploy v2"}`)
		modified = *tk
		// The stream's update, while the run that completed has not ended.
		ctx, cancel := context.WithDeadline(context.Background(), testenv.Deadline(t))
		defer cancel()
		if !w.offerTask(ctx, taskOffer{id: tk.ID, task: &modified}) {
			t.Error("the task loop does not take the modify's update")
		}
	}
	tasks.add(api.Task{ID: "t-mod", To: "bob", Title: "deploy", From: "alice"})
	offer(t, w, taskOffer{id: "t-mod"})
	tasks.wait(t, "the run under the new fence", func(f *fakeTasks) bool { return len(f.completes) == 2 })
	c1, c2 := tasks.completes[0], tasks.completes[1]
	if c1.Completion.Status != api.TaskStatusRequiresApproval || c1.Fence != first.Fence {
		t.Errorf("first completion %+v under fence %d, want requires_approval under %d", c1.Completion, c1.Fence, first.Fence)
	}
	if c2.Completion.Status != api.TaskStatusSuccess || c2.Completion.Result != "deployed v2" || c2.Fence != modified.Fence || c2.Fence <= c1.Fence {
		t.Errorf("second completion %+v under fence %d, want success with the approved action under the new fence %d", c2.Completion, c2.Fence, modified.Fence)
	}
	prompt, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("prompt-%d", modified.Fence)))
	if !strings.Contains(string(prompt), "alice changed it. Carry out this approved action, not the one you proposed:\n{\"cmd\":\"deploy v2\"}") {
		t.Errorf("the second run's prompt lacks the approved action:\n%s", prompt)
	}
	if first, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("prompt-%d", first.Fence))); strings.Contains(string(first), "approved action") {
		t.Errorf("the first run's prompt names an approved action:\n%s", first)
	}
	tasks.wait(t, "the second run's end counted", func(*fakeTasks) bool { return w.health().TasksSucceeded == 1 })

	reads := len(tasks.reads)
	claimed := first
	claimed.State, claimed.Completion = api.TaskRunning, nil
	offer(t, w, taskOffer{id: "t-mod", task: &claimed})  // the first claim's update, replayed
	offer(t, w, taskOffer{id: "t-mod", task: &modified}) // the modify's, replayed
	tasks.add(api.Task{ID: "t-next", To: "bob", Title: "next"})
	offer(t, w, taskOffer{id: "t-next"}) // taken after the replays
	tasks.wait(t, "t-next done", func(f *fakeTasks) bool { return len(f.completes) == 3 })
	if !slices.Equal(tasks.claims, []string{"t-mod bob", "t-mod bob", "t-next bob"}) || tasks.reads[reads] != "t-next" {
		t.Errorf("claims %v, reads after the runs %v; want t-mod claimed twice (the second answering the modify's claim), the replays not even read",
			tasks.claims, tasks.reads[reads:])
	}
	tasks.wait(t, "t-next's end counted", func(*fakeTasks) bool { return w.health().TasksRunning == 0 })
	if h := w.health(); h.TasksSucceeded != 2 || h.TasksFailed != 0 {
		t.Errorf("health %+v; want the rerun and t-next succeeded", h)
	}
}

// A task whose approval was approved or rejected has ended: its updates
// and the decision's offer run nothing again.
func TestTaskApprovedOrRejectedNotRunAgain(t *testing.T) {
	tasks := newFakeTasks()
	w, _ := taskWatcher(t, script("bob", `echo '{"type":"complete","result":"requires_approval","proposed_action":{"cmd":"ship"}}'`), tasks)
	ended := map[string]api.TaskState{"t-yes": api.TaskSucceeded, "t-no": api.TaskFailed}
	for _, id := range []string{"t-yes", "t-no"} {
		tasks.add(api.Task{ID: id, To: "bob", Title: "t"})
		offer(t, w, taskOffer{id: id})
		tasks.wait(t, id+" awaiting approval", func(f *fakeTasks) bool { return f.tasks[id].State == api.TaskAwaitingApproval })
		tasks.set(id, func(t *api.Task) { t.State = ended[id] })
		task := tasks.get(id)
		offer(t, w, taskOffer{id: id, task: &task}) // the stream's update
		offer(t, w, taskOffer{id: id})              // the hitl_decision's
	}
	tasks.add(api.Task{ID: "t-next", To: "bob", Title: "t"})
	offer(t, w, taskOffer{id: "t-next"})
	tasks.wait(t, "t-next done", func(f *fakeTasks) bool { return len(f.completes) == 3 })
	if !slices.Equal(tasks.claims, []string{"t-yes bob", "t-no bob", "t-next bob"}) {
		t.Errorf("claims %v; want each task claimed once", tasks.claims)
	}
	for id, state := range ended {
		if got := tasks.get(id).State; got != state {
			t.Errorf("%s is %s, want %s", id, got, state)
		}
	}
}
