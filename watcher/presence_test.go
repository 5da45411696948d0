package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

// Presence names what runs: the oldest run and how many more while
// several do (a fork-mode agent's tasks), IDLE with no task once the last
// ended; every heartbeat publishes the list as it is when it writes.
func TestBusyNamesTheOldestRunAndHowManyMore(t *testing.T) {
	w := &agentWatcher{busyChanged: make(chan struct{}, 1)}
	check := func(sub, task string) {
		t.Helper()
		if gotSub, src, gotTask := w.busy(); gotSub != sub || gotTask != task || src != api.SourceWatcher {
			t.Fatalf("busy() = %s, %s, %q; want %s, watcher, %q", gotSub, src, gotTask, sub, task)
		}
	}
	check(api.SubstateIdle, "")
	w.setWorking("doing task t-1", true)
	w.setWorking("doing task t-2", true)
	check(api.SubstateWorking, "doing task t-1 (and 1 more)")
	w.setWorking("doing task t-1", false)
	check(api.SubstateWorking, "doing task t-2")
	w.setWorking("doing task t-2", false)
	check(api.SubstateIdle, "")
}

// Seed 003's fork: each message runs as a temporary agent w-fork-N (the
// lowest free slot) with its own presence (WORKING while it runs, OFFLINE
// after) and its own emptied working directory, while w itself stays
// IDLE; the answer goes to the sender from the fork under w's reply id,
// and w gets a private note of it, which w's watcher does not answer.
func TestForkAnswersAsATemporaryAgent(t *testing.T) {
	svc, cl := apiNode(t)
	ctx := context.Background()

	// Each run waits until the test creates the file named after its
	// message, then says who and where it is and what its directory held.
	gate := t.TempDir()
	forkDir := t.TempDir()
	script := `while [ ! -e '` + gate + `'/"$MAOS_MESSAGE_ID" ]; do sleep 0.01; done
n=$(ls -A | wc -l); touch left-by-$MAOS_MESSAGE_ID
echo "$MAOS_AGENT_ID of $MAOS_PARENT_AGENT answers $MAOS_MESSAGE_ID in $(basename "$PWD") with $n files"`
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: w\n  role: dev\n  command: [sh, -c, %q]\n  context_messages: 0\n  policy: {mode: fork, max_forks: 2, fork_dir: %q}\n", script, forkDir))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(rctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler),
			BackoffBase: 10 * time.Millisecond, Heartbeat: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := testenv.Deadline(t); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not by the test's deadline", what)
			}
		}
	}
	presenceOf := func(agent string) api.Presence {
		p, _ := cl.AgentPresence(ctx, agent)
		return p
	}
	working := func(agent, task string) func() bool {
		return func() bool {
			p := presenceOf(agent)
			return p.State == api.PresenceAwake && p.Substate == api.SubstateWorking && p.Task == task
		}
	}
	offline := func(agent string) func() bool {
		return func() bool { return presenceOf(agent).State == api.PresenceOffline }
	}
	send := func(id string) *api.Message {
		t.Helper()
		if _, err := cl.Send(ctx, &api.Message{ID: id, Channel: "dev", From: "lead", To: api.Recipients{"w"}, Title: "do " + id,
			Content: api.Content{Text: "please do " + id}}); err != nil {
			t.Fatal(err)
		}
		var m *api.Message
		wait(id+" stored", func() bool { m = svc.Stored(id); return m != nil })
		return m
	}
	release := func(m *api.Message, fork string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(gate, m.ID), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var r *api.Message
		wait("the answer to "+m.ID, func() bool { r = svc.Stored(ReplyID("w", m)); return r != nil })
		want := fmt.Sprintf("%s of w answers %s in %s with 0 files", fork, m.ID, fork)
		if r.From != fork || r.Content.Text != want || !slices.Equal(r.Recipients, []string{"lead"}) || r.InReplyTo != m.ID {
			t.Errorf("answer to %s: from %s to %v in reply to %s: %q; want from %s to [lead]: %q", m.ID, r.From, r.Recipients, r.InReplyTo, r.Content.Text, fork, want)
		}
		note := forkNote(m, r, "w")
		var got *api.Message
		wait("w's note of "+m.ID, func() bool { got = svc.Stored(note.ID); return got != nil })
		if got.From != fork || !slices.Equal(got.Recipients, []string{"w"}) || got.Visibility != api.VisibilityPrivate ||
			got.Type != ForkNoteType || !strings.Contains(got.Content.Text, want) || got.CorrelationID != m.ID {
			t.Errorf("note to w: %+v", got)
		}
		wait(fork+" OFFLINE once it answered", offline(fork))
	}

	wait("w registered", func() bool { _, err := cl.Agent(ctx, "w", api.Local); return err == nil })
	a, b := send("job-a"), send("job-b")
	wait("w-fork-1 WORKING on job-a", working("w-fork-1", "answering job-a"))
	wait("w-fork-2 WORKING on job-b", working("w-fork-2", "answering job-b"))
	if p := presenceOf("w"); p.State != api.PresenceAwake || p.Substate != api.SubstateIdle {
		t.Errorf("w is %s/%s %q while its forks work; want AWAKE/IDLE", p.State, p.Substate, p.Task)
	}
	for _, fork := range []string{"w-fork-1", "w-fork-2"} {
		if ag, err := cl.Agent(ctx, fork, api.Local); err != nil || ag.Role != "dev" {
			t.Errorf("%s registered as %+v, %v; want role dev", fork, ag, err)
		}
	}
	release(a, "w-fork-1")
	if !working("w-fork-2", "answering job-b")() {
		t.Errorf("w-fork-2 stopped working before its release: %+v", presenceOf("w-fork-2"))
	}
	release(b, "w-fork-2")

	// Slot 1 is free again: its directory is emptied for the next fork.
	c := send("job-c")
	wait("w-fork-1 WORKING on job-c", working("w-fork-1", "answering job-c"))
	release(c, "w-fork-1")
	wait("the cursor past every message and note", func() bool {
		cur, err := cl.Cursor(ctx, "w", api.Local)
		return err == nil && cur.Seq >= svc.Stored(forkNote(c, svc.Stored(ReplyID("w", c)), "w").ID).Seq
	})
	for _, m := range []*api.Message{a, b, c} {
		note := svc.Stored(forkNote(m, svc.Stored(ReplyID("w", m)), "w").ID)
		if r := svc.Stored(ReplyID("w", note)); r != nil {
			t.Errorf("w answered its fork's note: %+v", r)
		}
	}
	if p := presenceOf("w"); p.Substate != api.SubstateIdle {
		t.Errorf("w is %s after its forks; want IDLE", p.Substate)
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
	w.presence(ctx, api.PresenceAwake, api.SubstateWorking, api.SourceWatcher, "doing task t-10")
	p, err := w.c.AgentPresence(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	h := p.AgentHealth
	if h.TasksRunning != 1 || h.TasksSucceeded != 2 || h.TasksFailed != 1 || h.MeanDurationMS != 300 {
		t.Errorf("health %+v; want 1 running, 2 succeeded, 1 failed, a mean of 300 ms over the three reported", h)
	}
	if !strings.HasPrefix(h.LastError, "task t-9 failed: cli_error: exit 3 last stderr lines: boom éé") ||
		len(h.LastError) > api.MaxPresenceLastError || strings.ContainsAny(h.LastError, "\n\t") {
		t.Errorf("last_error %q: want one line of at most %d bytes", h.LastError, api.MaxPresenceLastError)
	}
	w.presence(ctx, api.PresenceOffline, "", "", "")
	if p, _ := w.c.AgentPresence(ctx, "w"); p.AgentHealth != (api.AgentHealth{}) {
		t.Errorf("OFFLINE presence carries health %+v", p.AgentHealth)
	}
}
