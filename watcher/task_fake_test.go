package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

// fakeTasks is the task API of TASKS.md in memory, for the watcher's unit
// tests: claims only by an agent of the task's queue (403), of a ready
// task from its ReadyAt (409), a retried claim by the claimant answers
// its claim; progress, complete and handoff only by the claimant with the
// current fence (409); fences count up. A requires_approval completion
// leaves the task awaiting its approval (modify gives it back). Hooks may
// refuse a call first.
type fakeTasks struct {
	mu     sync.Mutex
	tasks  map[string]*api.Task
	queues map[string][]string // agent → the assignees it may claim
	index  uint64

	reads     []string // task ids read, in order
	claims    []string // "task agent", in order
	progress  []api.TaskProgressCommand
	completes []api.TaskCompleteCommand
	handoffs  []api.TaskHandoffCommand
	queries   []api.TaskQuery

	// Hooks, called under mu; a non-nil error is the answer.
	onClaim    func(id, agent string) error
	onProgress func(api.TaskProgressCommand) error
	onComplete func(api.TaskCompleteCommand) error
	// afterComplete sees the task a completion changed, before the
	// answer.
	afterComplete func(*api.Task)
	changed       chan struct{} // closed and renewed on every change
}

func newFakeTasks() *fakeTasks {
	return &fakeTasks{tasks: map[string]*api.Task{}, queues: map[string][]string{}, changed: make(chan struct{})}
}

func (f *fakeTasks) changedLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// add stores a task (normalized like a create), ready unless state says.
func (f *fakeTasks) add(t api.Task) *api.Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	if t.State == "" {
		t.State = api.TaskReady
	}
	if t.TimeoutSeconds == 0 {
		t.TimeoutSeconds = 300
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = api.DefaultTaskMaxAttempts
	}
	if t.Priority == "" {
		t.Priority = api.DefaultPriority
	}
	if t.Channel == "" {
		t.Channel = api.DefaultChannel
	}
	if t.From == "" {
		t.From = "lead"
	}
	t.Seq, t.MessageID, t.Created = f.index, "msg-of-"+t.ID, time.Now()
	f.tasks[t.ID] = &t
	f.changedLocked()
	return &t
}

// set changes a stored task under the lock.
func (f *fakeTasks) set(id string, fn func(*api.Task)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.tasks[id])
	f.changedLocked()
}

func (f *fakeTasks) get(id string) api.Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.tasks[id]
}

// wait polls cond under the lock until it holds (bounded).
func (f *fakeTasks) wait(t *testing.T, what string, cond func(*fakeTasks) bool) {
	t.Helper()
	deadline := time.After(time.Until(testenv.Deadline(t)))
	for {
		f.mu.Lock()
		ok, ch := cond(f), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: not by the test's deadline", what)
		}
	}
}

func conflict(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), api.ErrConflict)
}

func (f *fakeTasks) Task(_ context.Context, id string) (*api.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, id)
	defer f.changedLocked()
	t, ok := f.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, api.ErrNotFound)
	}
	c := *t
	return &c, nil
}

func (f *fakeTasks) Tasks(_ context.Context, q api.TaskQuery) (api.TaskPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	var out []*api.Task
	for _, t := range f.tasks {
		if (q.State == "" || t.State == q.State) && (q.To == "" || t.To == q.To) &&
			(q.ClaimedBy == "" || t.ClaimedBy == q.ClaimedBy) && t.Seq > q.After {
			c := *t
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *api.Task) int { return int(a.Seq) - int(b.Seq) })
	return api.TaskPage{Tasks: out}, nil
}

// ClaimTaskFenced is ClaimTask: the fake has no agent leases.
func (f *fakeTasks) ClaimTaskFenced(ctx context.Context, id, agent string, _ uint64) (api.TaskResult, error) {
	return f.ClaimTask(ctx, id, agent)
}

func (f *fakeTasks) ClaimTask(_ context.Context, id, agent string) (api.TaskResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, id+" "+agent)
	defer f.changedLocked()
	if f.onClaim != nil {
		if err := f.onClaim(id, agent); err != nil {
			return api.TaskResult{}, err
		}
	}
	t, ok := f.tasks[id]
	switch {
	case !ok:
		return api.TaskResult{}, fmt.Errorf("task %s: %w", id, api.ErrNotFound)
	case t.To != agent && !slices.Contains(f.queues[agent], t.To):
		return api.TaskResult{}, fmt.Errorf("%s is not of %s: %w", agent, t.To, api.ErrForbidden)
	case t.State == api.TaskRunning && t.ClaimedBy == agent:
		return api.TaskResult{ID: id, State: t.State, Attempt: t.Attempt, Fence: t.Fence, LeaseExpires: t.LeaseExpires}, nil
	case t.State != api.TaskReady:
		return api.TaskResult{}, conflict("task %s is %s (claimed by %q)", id, t.State, t.ClaimedBy)
	case t.ReadyAt != nil && time.Now().Before(*t.ReadyAt):
		return api.TaskResult{}, conflict("task %s is ready at %s", id, t.ReadyAt)
	}
	f.index++
	lease := time.Now().Add(time.Duration(t.TimeoutSeconds) * time.Second)
	t.State, t.ClaimedBy, t.Fence, t.LeaseExpires = api.TaskRunning, agent, f.index, &lease
	t.Attempt++
	return api.TaskResult{ID: id, Seq: f.index, State: t.State, Attempt: t.Attempt, Fence: t.Fence, LeaseExpires: t.LeaseExpires}, nil
}

// claimant checks the claimant and fence of a report.
func (f *fakeTasks) claimant(id, agent string, fence uint64) (*api.Task, error) {
	t, ok := f.tasks[id]
	switch {
	case !ok:
		return nil, fmt.Errorf("task %s: %w", id, api.ErrNotFound)
	case t.State != api.TaskRunning || t.ClaimedBy != agent || t.Fence != fence:
		return nil, conflict("task %s is %s, claimed by %q under fence %d, not %s under %d", id, t.State, t.ClaimedBy, t.Fence, agent, fence)
	}
	return t, nil
}

func (f *fakeTasks) TaskProgress(_ context.Context, cmd api.TaskProgressCommand) (api.TaskResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changedLocked()
	if err := cmd.Validate(); err != nil {
		return api.TaskResult{}, err
	}
	f.progress = append(f.progress, cmd)
	if f.onProgress != nil {
		if err := f.onProgress(cmd); err != nil {
			return api.TaskResult{}, err
		}
	}
	t, err := f.claimant(cmd.ID, cmd.Agent, cmd.Fence)
	if err != nil {
		return api.TaskResult{}, err
	}
	f.index++
	t.ProgressMessage, t.Progress = cmd.Message, cmd.Progress
	return api.TaskResult{ID: t.ID, Seq: f.index, State: t.State, Attempt: t.Attempt, Fence: t.Fence}, nil
}

func (f *fakeTasks) CompleteTask(_ context.Context, cmd api.TaskCompleteCommand) (api.TaskResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changedLocked()
	if err := cmd.Validate(); err != nil {
		return api.TaskResult{}, err
	}
	f.completes = append(f.completes, cmd)
	if f.onComplete != nil {
		if err := f.onComplete(cmd); err != nil {
			return api.TaskResult{}, err
		}
	}
	t, err := f.claimant(cmd.ID, cmd.Agent, cmd.Fence)
	if err != nil {
		return api.TaskResult{}, err
	}
	f.index++
	t.State, t.LeaseExpires = api.TaskSucceeded, nil
	switch cmd.Completion.Status {
	case api.TaskStatusFailure:
		t.State = api.TaskFailed
	case api.TaskStatusRequiresApproval:
		t.State, t.ApprovalID, t.ApprovedAction = api.TaskAwaitingApproval, fmt.Sprintf("appr-%s-%d", t.ID, t.Fence), nil
	}
	c := cmd.Completion
	t.Completion = &c
	if f.afterComplete != nil {
		f.afterComplete(t)
	}
	return api.TaskResult{ID: t.ID, Seq: f.index, State: t.State}, nil
}

// modifyLocked is what an approver's modify of t's approval does (t
// awaits it): t runs again for its claimant under a new fence and lease,
// with the approved action. Under mu.
func (f *fakeTasks) modifyLocked(t *api.Task, action string) {
	f.index++
	lease := time.Now().Add(time.Duration(t.TimeoutSeconds) * time.Second)
	t.State, t.Fence, t.LeaseExpires, t.Completion = api.TaskRunning, f.index, &lease, nil
	t.ApprovedAction = json.RawMessage(action)
	f.changedLocked()
}

func (f *fakeTasks) HandoffTask(_ context.Context, cmd api.TaskHandoffCommand) (api.TaskResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changedLocked()
	if err := cmd.Validate(); err != nil {
		return api.TaskResult{}, err
	}
	f.handoffs = append(f.handoffs, cmd)
	t, err := f.claimant(cmd.ID, cmd.Agent, cmd.Fence)
	if err != nil {
		return api.TaskResult{}, err
	}
	f.index++
	t.State, t.To, t.ClaimedBy, t.Fence, t.LeaseExpires = api.TaskReady, cmd.To, "", 0, nil
	return api.TaskResult{ID: t.ID, Seq: f.index, State: t.State}, nil
}

// taskWatcher is the watcher of the config's first agent on tasks, with
// its task loop running until the test ends; logs go to the test's log.
func taskWatcher(t *testing.T, yml string, tasks taskAPI) (*agentWatcher, context.CancelFunc) {
	t.Helper()
	f, err := Parse([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	a := &f.Agents[0]
	w := &agentWatcher{cfg: a, opts: Options{Addr: "http://maos.invalid", BackoffBase: 10 * time.Millisecond},
		log:   slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("agent", a.ID),
		tasks: tasks, taskOffers: make(chan taskOffer), busyChanged: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.taskLoop(ctx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return w, stop
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// offer hands a task (or only its id) to w's task loop.
func offer(t *testing.T, w *agentWatcher, o taskOffer) {
	t.Helper()
	ctx, cancel := testenv.Context(t)
	defer cancel()
	if !w.offerTask(ctx, o) {
		t.Fatalf("offering %s: the task loop does not take it", o.id)
	}
}

// waitExists polls (bounded) until path exists.
func waitExists(t *testing.T, path string) {
	t.Helper()
	for deadline := testenv.Deadline(t); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not created within 20s", path)
		}
	}
}
