package watcher

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// TestRunnerDoesTasksInProcess: an agent whose Runner is Go code does its
// tasks under the watcher's machinery: the runner gets the task's env and
// prompt, its status lines become the task's progress, its stdout the
// completion; a runner that keeps failing is retried (1+retries attempts)
// and the task fails with its error and stderr kept. KeepRecord leaves
// the agent's record (an A2A remote) as it was registered.
func TestRunnerDoesTasksInProcess(t *testing.T) {
	svc, cl := apiNode(t, "lead")
	ctx := context.Background()
	if _, err := svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ext", Role: "remote",
		A2A: &api.A2ARemote{URL: "http://127.0.0.1:9/agent", Credential: "tok"}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	envs := map[string][]string{}
	failRuns := 0
	runner := RunnerFunc(func(ctx context.Context, inv Invocation) Result {
		id := ""
		for _, e := range inv.Env {
			if v, ok := strings.CutPrefix(e, "MAOS_TASK_ID="); ok {
				id = v
			}
		}
		mu.Lock()
		envs[id] = inv.Env
		mu.Unlock()
		if id == "task-fail" {
			mu.Lock()
			failRuns++
			mu.Unlock()
			return Result{Stderr: []string{"remote said no"}, Err: errors.New("the remote failed")}
		}
		inv.OnLine(`{"type":"status","message":"relaying ` + id + `","progress":0.5}`)
		// The line renews the claim at once, with its words: seen
		// before the run ends.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if task, err := cl.Task(ctx, id); err == nil && task.ProgressMessage == "relaying "+id {
				break
			}
		}
		return Result{Stdout: `{"type":"status","message":"relaying ` + id + `","progress":0.5}` + "\n" +
			`{"type":"complete","result":"success"}` + "\nthe answer to " + id}
	})
	retries := 2
	f := &File{Agents: []AgentConfig{{ID: "ext", Role: "remote", Runner: runner, KeepRecord: true, Retries: &retries,
		ContextMessages: new(int)}}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for _, id := range []string{"task-ok", "task-fail"} {
		if _, err := cl.CreateTask(ctx, api.TaskCreateCommand{ID: id, From: "lead", To: "ext", Title: "job " + id}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	ok := waitTaskState(t, cl, "task-ok", api.TaskSucceeded)
	if c := ok.Completion; c.Status != api.TaskStatusSuccess || c.Result != "the answer to task-ok" {
		t.Errorf("task-ok completion %+v, want success with the runner's text", c)
	}
	if !slices.ContainsFunc(ok.History, func(e api.TaskEvent) bool {
		return e.Event == "progress" && strings.HasPrefix(e.Detail, "relaying task-ok")
	}) {
		t.Errorf("task-ok history %+v: no progress with the runner's status line", ok.History)
	}
	mu.Lock()
	env := envs["task-ok"]
	mu.Unlock()
	for _, want := range []string{"MAOS_TASK_ID=task-ok", "MAOS_TASK_ATTEMPT=1", "MAOS_AGENT_ID=ext"} {
		if !slices.Contains(env, want) {
			t.Errorf("runner env %v lacks %s", env, want)
		}
	}
	failed := waitTaskState(t, cl, "task-fail", api.TaskFailed)
	if c := failed.Completion; c == nil || c.Error == nil || c.Error.RetryCount != retries ||
		!strings.Contains(c.Error.ErrorMessage, "the remote failed") || !strings.Contains(c.Error.ErrorMessage, "remote said no") {
		t.Errorf("task-fail completion %+v, want the runner's error and stderr after %d retries", c, retries)
	}
	mu.Lock()
	if failRuns != 1+retries {
		t.Errorf("the failing runner ran %d times, want %d", failRuns, 1+retries)
	}
	mu.Unlock()
	a, err := cl.Agent(ctx, "ext", api.Local)
	if err != nil || a.A2A == nil || a.A2A.URL != "http://127.0.0.1:9/agent" || a.Role != "remote" {
		t.Errorf("ext after its watcher started: %+v (%v), want its A2A record kept", a, err)
	}
}
