package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Presence follows the invocations: WORKING on what runs now, never on
// what was answered, and IDLE once the last fork ended; every heartbeat
// in between keeps the task.
func TestPresenceIdleOnceTheLastInvocationEnds(t *testing.T) {
	svc, cl := apiNode(t)

	// Each invocation waits until the test creates the file named after
	// its message.
	gate := t.TempDir()
	script := `while [ ! -e '` + gate + `'/"$MAOS_MESSAGE_ID" ]; do sleep 0.01; done; echo "answer to $MAOS_MESSAGE_ID"`
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: w\n  command: [sh, -c, %q]\n  context_messages: 0\n  policy: {mode: fork, max_forks: 2}\n", script))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler),
			BackoffBase: 10 * time.Millisecond, Heartbeat: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				p, _ := cl.AgentPresence(context.Background(), "w")
				t.Fatalf("%s: not within 10s; presence %s/%s task %q", what, p.State, p.Substate, p.Task)
			}
		}
	}
	presenceIs := func(sub string, tasks ...string) func() bool {
		return func() bool {
			p, err := cl.AgentPresence(context.Background(), "w")
			if err != nil || p.State != transport.PresenceAwake || p.Substate != sub {
				return false
			}
			for _, task := range tasks {
				if p.Task == task {
					return true
				}
			}
			return len(tasks) == 0 && p.Task == ""
		}
	}
	release := func(id string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(gate, id), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		wait("the reply to "+id, func() bool {
			m := svc.Stored(id)
			return m != nil && svc.Stored(ReplyID("w", m)) != nil
		})
	}

	wait("w registered", func() bool { _, err := cl.Agent(context.Background(), "w", transport.Local); return err == nil })
	for _, id := range []string{"job-a", "job-b"} {
		if _, err := cl.Send(context.Background(), &fsm.Message{ID: id, Channel: "dev", From: "lead", To: fsm.Recipients{"w"},
			Content: fsm.Content{Text: "please do " + id}}); err != nil {
			t.Fatal(err)
		}
	}
	wait("WORKING on both", presenceIs(transport.SubstateWorking, "answering job-a (and 1 more)", "answering job-b (and 1 more)"))

	release("job-a")
	wait("WORKING on job-b alone once job-a is answered", presenceIs(transport.SubstateWorking, "answering job-b"))

	release("job-b")
	wait("IDLE once the last fork ended", presenceIs(transport.SubstateIdle))
	seen := len(svc.PresenceUpdates())
	wait("more heartbeats", func() bool { return len(svc.PresenceUpdates()) >= seen+3 })
	if !presenceIs(transport.SubstateIdle)() {
		p, _ := cl.AgentPresence(context.Background(), "w")
		t.Errorf("after IDLE, a later update made it %s task %q", p.Substate, p.Task)
	}

	for i, u := range svc.PresenceUpdates() {
		if u.Substate == transport.SubstateWorking && !strings.HasPrefix(u.Task, "answering job-") {
			t.Errorf("update %d: WORKING without naming what runs: task %q", i, u.Task)
		}
		if u.Substate == transport.SubstateIdle && u.Task != "" {
			t.Errorf("update %d: IDLE with task %q", i, u.Task)
		}
	}
}

// Heartbeats carry the agent's task counters (seed 004's
// agent_health_check): a run that awaits approval is reported but
// neither succeeded nor failed; the last error on one line, cut to what
// presence keeps; OFFLINE carries none.
func TestHeartbeatCarriesTaskHealth(t *testing.T) {
	_, cl := apiNode(t)
	f, err := Parse([]byte("agents: [{id: w, command: [x]}]"))
	if err != nil {
		t.Fatal(err)
	}
	w := &agentWatcher{cfg: &f.Agents[0], c: cl, log: slog.New(slog.DiscardHandler),
		busyChanged: make(chan struct{}, 1)}
	w.taskRunning(1)
	w.taskEnded(runSucceeded, 300*time.Millisecond, "")
	w.taskEnded(runSucceeded, 100*time.Millisecond, "")
	w.taskEnded(runAwaits, 500*time.Millisecond, "") // reported, neither succeeded nor failed
	w.taskEnded(runFailed, 0, "task t-9 failed: cli_error: exit 3\nlast stderr lines:\n\tboom "+strings.Repeat("é", 100))
	ctx := context.Background()
	w.presence(ctx, transport.PresenceAwake, transport.SubstateWorking, transport.SourceWatcher, "doing task t-10")
	p, err := w.c.AgentPresence(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	h := p.AgentHealth
	if h.TasksRunning != 1 || h.TasksSucceeded != 2 || h.TasksFailed != 1 || h.MeanDurationMS != 300 {
		t.Errorf("health %+v; want 1 running, 2 succeeded, 1 failed, a mean of 300 ms over the three reported", h)
	}
	if !strings.HasPrefix(h.LastError, "task t-9 failed: cli_error: exit 3 last stderr lines: boom éé") ||
		len(h.LastError) > transport.MaxPresenceLastError || strings.ContainsAny(h.LastError, "\n\t") {
		t.Errorf("last_error %q: want one line of at most %d bytes", h.LastError, transport.MaxPresenceLastError)
	}
	w.presence(ctx, transport.PresenceOffline, "", "", "")
	if p, _ := w.c.AgentPresence(ctx, "w"); p.AgentHealth != (transport.AgentHealth{}) {
		t.Errorf("OFFLINE presence carries health %+v", p.AgentHealth)
	}
}
