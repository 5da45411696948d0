package a2arelay_test

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/a2arelay"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
	"github.com/maos-project/maos/watcher"
)

// maos is a one-node maos API (a real state machine) with agent lead, and
// ext registered as the A2A remote at url, relayed by a Supervisor.
type maos struct {
	svc *transporttest.Service
	c   *client.Client
}

func newMaos(t *testing.T, url string) *maos {
	t.Helper()
	m := newAPI(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sup := &a2arelay.Supervisor{Client: m.c, Dir: t.TempDir(), Poll: 50 * time.Millisecond,
		Watcher: watcher.Options{Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 50 * time.Millisecond, Node: "n1", Instance: "maosd"}}
	go func() {
		defer close(done)
		sup.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return m
}

// newAPI is newMaos without the Supervisor.
func newAPI(t *testing.T, url string) *maos {
	t.Helper()
	svc := transporttest.New(t)
	svc.Register(t, "lead")
	if _, err := svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ext", Role: "remote",
		A2A: &api.A2ARemote{URL: url, Credential: remoteSecret}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Blobs: svc}))
	t.Cleanup(srv.Close)
	return &maos{svc: svc, c: client.NewClient(srv.URL, nil)}
}

func (m *maos) create(t *testing.T, id, title string) {
	t.Helper()
	if _, err := m.c.CreateTask(context.Background(), api.TaskCreateCommand{ID: id, From: "lead", To: "ext", Title: title,
		Description: "details of " + id, Context: []byte(`{"repo":"maos"}`)}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

// waitFor polls cond until it holds, failing at the test's deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(150 * time.Second)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d.Add(-5 * time.Second)
	}
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by the deadline", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (m *maos) waitState(t *testing.T, id string, states ...api.TaskState) *api.Task {
	t.Helper()
	var task *api.Task
	waitFor(t, "task "+id+" ends", func() bool {
		var err error
		task, err = m.c.Task(context.Background(), id)
		return err == nil && slices.Contains(states, task.State)
	})
	return task
}

// A completed remote task is the maos task's success: the status
// message and text artifact as its result, the file artifact uploaded as
// a maos artifact, the remote's states as progress notes naming the
// remote task; the remote got the title, description and context once.
// Both with a streaming remote and one the relay polls.
func TestRelayCompletesWithTextAndFile(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		t.Run(map[bool]string{true: "streaming", false: "polled"}[streaming], func(t *testing.T) {
			remote := newFakeRemote(t, streaming)
			m := newMaos(t, remote.URL)
			m.create(t, "task-done", "done please")
			task := m.waitState(t, "task-done", api.TaskSucceeded, api.TaskFailed)
			c := task.Completion
			if task.State != api.TaskSucceeded || !strings.Contains(c.Result, "all done") || !strings.Contains(c.Result, "the text artifact") {
				t.Fatalf("task-done: %s, completion %+v; want success with the remote's text", task.State, c)
			}
			if len(c.Outputs) != 1 {
				t.Fatalf("outputs %v, want the remote's file uploaded", c.Outputs)
			}
			var body strings.Builder
			if _, err := m.c.GetArtifact(context.Background(), c.Outputs[0], &body); err != nil || body.String() != "file bytes" {
				t.Errorf("artifact %s: %q, %v; want the remote file's bytes", c.Outputs[0], body.String(), err)
			}
			if !slices.ContainsFunc(task.History, func(e api.TaskEvent) bool {
				return e.Event == "progress" && strings.HasPrefix(e.Detail, a2arelay.RemoteTaskWords)
			}) {
				t.Errorf("history %+v: no progress note naming the remote task", task.History)
			}
			if got := remote.sent(); len(got) != 1 || got[0] != "done please\n\ndetails of task-done" {
				t.Errorf("the remote got %q, want the task's title and description once", got)
			}
		})
	}
}

// A remote task that fails fails the maos task after the watcher's
// retries with the remote's words kept; the retries resume the recorded
// remote task, so the remote got the work once.
func TestRelayFailedKeepsTheError(t *testing.T) {
	remote := newFakeRemote(t, true)
	m := newMaos(t, remote.URL)
	m.create(t, "task-fail", "fail please")
	task := m.waitState(t, "task-fail", api.TaskSucceeded, api.TaskFailed)
	if task.State != api.TaskFailed || task.Completion.Error == nil || !strings.Contains(task.Completion.Error.ErrorMessage, "remote broke") ||
		task.Completion.Error.RetryCount != watcher.DefaultRetries {
		t.Fatalf("task-fail: %s, completion %+v; want failed with the remote's words after %d retries", task.State, task.Completion, watcher.DefaultRetries)
	}
	if got := remote.sent(); len(got) != 1 {
		t.Errorf("the remote got %d messages %q, want 1: retries resume, never resend", len(got), got)
	}
}

// A remote that is down (connection refused) fails the task after its
// attempts, the error kept.
func TestRelayRemoteDownFailsTheTask(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	m := newMaos(t, "http://"+addr+"/agent")
	m.create(t, "task-down", "done please")
	task := m.waitState(t, "task-down", api.TaskSucceeded, api.TaskFailed)
	if task.State != api.TaskFailed || task.Completion.Error == nil || !strings.Contains(task.Completion.Error.ErrorMessage, "connection refused") {
		t.Fatalf("task-down: %s, completion %+v; want failed with the connection error", task.State, task.Completion)
	}
	if e := task.Completion.Error; e.ErrorType != a2arelay.ErrorTypeRemote || !strings.Contains(e.SuggestedAction, "remote A2A agent") ||
		strings.Count(e.ErrorMessage, "connection refused") != 1 {
		t.Fatalf("task-down's error %+v: want error_type %s, the remote named in the advice, and the error once", e, a2arelay.ErrorTypeRemote)
	}
}

// INPUT_REQUIRED asks the task's creator in the task's thread; the
// creator's reply continues the remote task, which completes.
func TestRelayInputRequiredAsksTheCreator(t *testing.T) {
	remote := newFakeRemote(t, true)
	m := newMaos(t, remote.URL)
	m.create(t, "task-ask", "ask please")
	ctx := context.Background()
	var q *api.Message
	waitFor(t, "the relay asks lead", func() bool {
		p, err := m.c.Inbox(ctx, "lead", api.InboxQuery{}, api.Local)
		if err != nil {
			return false
		}
		for _, e := range p.Messages {
			if e.From == "ext" && slices.Contains(e.Tags, a2arelay.InputTag) {
				q = &e.Message
				return true
			}
		}
		return false
	})
	if q.Content.Text != "which colour?" || q.CorrelationID != "task-ask" {
		t.Fatalf("question %+v: want the remote's words in task-ask's thread", q)
	}
	reply := api.NewReply(q, "lead", "blue")
	reply.ID = api.NewID("lead", time.Now())
	if _, err := m.c.Send(ctx, reply); err != nil {
		t.Fatal(err)
	}
	task := m.waitState(t, "task-ask", api.TaskSucceeded, api.TaskFailed)
	if task.State != api.TaskSucceeded || task.Completion.Result != "colour blue" {
		t.Fatalf("task-ask: %s, completion %+v; want success with the continued task's words", task.State, task.Completion)
	}
	if got := remote.sent(); len(got) != 2 || got[1] != "blue" {
		t.Errorf("the remote got %q, want the task then the reply", got)
	}
	if r, err := m.c.Message(ctx, watcher.ReplyID("ext", reply), api.Local); err == nil {
		t.Errorf("the relay answered lead's reply as mail: %+v", r)
	}
}

// A plain message to the relay agent is sent as an A2A message; the
// remote's answer is the agent's reply.
func TestRelayMessageIsAnswered(t *testing.T) {
	remote := newFakeRemote(t, false)
	m := newMaos(t, remote.URL)
	ctx := context.Background()
	msg := &api.Message{ID: api.NewID("lead", time.Now()), Channel: "general", From: "lead", To: api.Recipients{"ext"},
		Content: api.Content{Text: "echo hello"}}
	if _, err := m.c.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	stored, err := m.c.Message(ctx, msg.ID, api.Local)
	if err != nil {
		t.Fatal(err)
	}
	var r *api.Message
	waitFor(t, "ext answers", func() bool {
		r, err = m.c.Message(ctx, watcher.ReplyID("ext", stored), api.Local)
		return err == nil
	})
	if r.Content.Text != "echo: echo hello" || r.InReplyTo != msg.ID {
		t.Errorf("reply %+v, want the remote's answer to lead's message", r)
	}
}

// A later attempt resumes the remote task an earlier one recorded in the
// maos task's progress (as the watcher records a status line), rather
// than send the work again: the first run is cut off while the remote
// works (its node died), the second follows the same remote task to its
// end; the remote got one message.
func TestRelayResumesTheRecordedRemoteTask(t *testing.T) {
	remote := newFakeRemote(t, true)
	m := newAPI(t, remote.URL)
	m.create(t, "task-block", "block please")
	ctx := context.Background()
	claim, err := m.c.ClaimTask(ctx, "task-block", "ext")
	if err != nil {
		t.Fatal(err)
	}
	relay := &a2arelay.Relay{Agent: "ext", Client: m.c, Dir: t.TempDir()}
	inv := watcher.Invocation{Env: []string{"MAOS_TASK_ID=task-block", "MAOS_TASK_ATTEMPT=1"}, OnLine: func(line string) {
		if sl, ok := watcher.ParseStatusLine(line); ok && sl.Type == watcher.LineStatus {
			if _, err := m.c.TaskProgress(ctx, api.TaskProgressCommand{ID: "task-block", Agent: "ext", Fence: claim.Fence, Message: sl.Message}); err != nil {
				t.Errorf("progress: %v", err)
			}
		}
	}}
	run := func(ctx context.Context) <-chan watcher.Result {
		ch := make(chan watcher.Result, 1)
		go func() { ch <- relay.Run(ctx, inv) }()
		return ch
	}
	ctx1, cut := context.WithCancel(ctx)
	first := run(ctx1)
	waitFor(t, "the remote works on the task and its id is recorded", func() bool {
		task, err := m.c.Task(ctx, "task-block")
		return err == nil && len(remote.sent()) == 1 && strings.HasPrefix(task.ProgressMessage, a2arelay.RemoteTaskWords) &&
			strings.Contains(task.ProgressMessage, "working")
	})
	cut()
	if res := <-first; res.Err == nil {
		t.Fatalf("the cut-off run ended well: %+v", res)
	}
	second := run(ctx)
	remote.Release()
	res := <-second
	if res.Err != nil {
		t.Fatalf("the resumed run: %v (%v)", res.Err, res.Stderr)
	}
	rep := watcher.ParseTaskReport(res.Stdout)
	if rep.Complete == nil || rep.Complete.Status != api.TaskStatusSuccess || rep.Complete.Result != "released" {
		t.Errorf("the resumed run reported %+v (stdout %q), want the remote task's completion", rep.Complete, res.Stdout)
	}
	if got := remote.sent(); len(got) != 1 {
		t.Errorf("the remote got %d messages %q, want 1: the second attempt resumes", len(got), got)
	}
}

// The Supervisor relays an agent while it has an A2A remote: it takes the
// agent's lease as this node's "maosd"; registered again without a2a,
// the agent's relay stops and releases the lease.
func TestSupervisorFollowsTheRegistry(t *testing.T) {
	remote := newFakeRemote(t, true)
	m := newMaos(t, remote.URL)
	ctx := context.Background()
	waitFor(t, "the relay holds ext's lease", func() bool {
		l, err := m.c.AgentLease(ctx, "ext", api.Local)
		return err == nil && l.Holder.Node == "n1" && l.Holder.Instance == "maosd" && !l.Expired && !l.Released
	})
	if _, err := m.c.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "ext", Role: "remote"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay of ext stops and releases its lease", func() bool {
		l, err := m.c.AgentLease(ctx, "ext", api.Local)
		return err == nil && l.Released
	})
	if a, err := m.c.Agent(ctx, "ext", api.Local); err != nil || a.A2A != nil {
		t.Errorf("ext after the plain registration: %+v, %v; want no a2a (the stopped relay wrote no registration)", a, err)
	}
}
