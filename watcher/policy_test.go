package watcher

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

func TestModeOf(t *testing.T) {
	w := &agentWatcher{cfg: agent(t, "agents:\n- id: w\n  command: [cat]\n  policy:\n    mode: queue\n    overrides:\n    - {priority: urgent, mode: interrupt}\n")}
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	msg := func(from string, prio api.Priority) *api.Message { return &api.Message{From: from, Priority: prio} }
	set := func(ps ...api.Policy) *runtimePolicy {
		return &runtimePolicy{set: api.PolicySet{Agent: "w", Policies: ps}}
	}
	quiet := api.Policy{Agent: "w", Mode: api.PolicyQuiet, Until: now.Add(time.Minute)}
	leadFork := api.Policy{Agent: "w", From: "lead", Mode: api.PolicyFork}
	for _, tt := range []struct {
		name string
		rt   *runtimePolicy
		m    *api.Message
		at   time.Time
		want string
	}{
		{"no run-time policy: the YAML", set(), msg("bob", "normal"), now, PolicyQueue},
		{"no run-time policy: the YAML's override", set(), msg("bob", "urgent"), now, PolicyInterrupt},
		{"quiet holds normal mail", set(quiet), msg("bob", "normal"), now, PolicyQuiet},
		{"quiet lets urgent mail through in the YAML's mode", set(quiet), msg("bob", "urgent"), now, PolicyInterrupt},
		{"quiet ends by the watcher's clock", set(quiet), msg("bob", "normal"), now.Add(time.Minute), PolicyQueue},
		{"a sender's override wins over quiet", set(quiet, leadFork), msg("lead", "normal"), now, PolicyFork},
		{"a sender's override is that sender's only", set(leadFork), msg("bob", "normal"), now, PolicyQueue},
		{"agent-wide run-time mode over the YAML", set(api.Policy{Agent: "w", Mode: api.PolicyFork}), msg("bob", "urgent"), now, PolicyFork},
	} {
		if got := w.modeOf(tt.m, tt.rt, tt.at); got != tt.want {
			t.Errorf("%s: mode %q, want %q", tt.name, got, tt.want)
		}
	}

	// Fork is queue where no fork can run it: a note from the agent's own
	// fork (never forked again), a tmux agent with no command.
	forkAll := set(api.Policy{Agent: "w", Mode: api.PolicyFork})
	if got := w.modeOf(msg("w-fork-1", "normal"), forkAll, now); got != PolicyQueue {
		t.Errorf("own fork's note: mode %q, want queue", got)
	}
	if got := w.modeOf(msg("v-fork-1", "normal"), forkAll, now); got != PolicyFork {
		t.Errorf("another agent's fork: mode %q, want fork", got)
	}
	tm := &agentWatcher{cfg: agent(t, "agents:\n- {id: w, delivery: tmux, tmux_target: \"s:0.0\"}\n")}
	if got := tm.modeOf(msg("bob", "normal"), forkAll, now); got != PolicyQueue {
		t.Errorf("tmux agent without a command: mode %q, want queue", got)
	}
	tm = &agentWatcher{cfg: agent(t, "agents:\n- {id: w, delivery: tmux, tmux_target: \"s:0.0\", command: [cat]}\n")}
	if got := tm.modeOf(msg("bob", "normal"), forkAll, now); got != PolicyFork {
		t.Errorf("tmux agent with a command: mode %q, want fork", got)
	}
}

// lockedBuffer is a log sink the watcher writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// `policy set --mode quiet` holds a normal message (the cursor stays
// before it) and lets an urgent one and a sender with an override of its
// own through; when the quiet ends by itself the held one is answered.
func TestRuntimeQuietHoldsUntilItEnds(t *testing.T) {
	svc, cl := apiNode(t)
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: w\n  command: [sh, -c, %q]\n  context_messages: 0\n  policy: {mode: queue}\n",
		`echo "answer to $MAOS_MESSAGE_ID"`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			BackoffBase: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
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
	answered := func(id string) bool {
		m := svc.Stored(id)
		return m != nil && svc.Stored(ReplyID("w", m)) != nil
	}
	send := func(id, from string, prio api.Priority) uint64 {
		t.Helper()
		res, err := cl.Send(context.Background(), &api.Message{ID: id, Channel: "dev", From: from, To: api.Recipients{"w"},
			Priority: prio, Content: api.Content{Text: "please do " + id}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Seq
	}
	// A watcher at rest reads the policy when the next message comes;
	// one holding a message reads it within a poll (awaitRead).
	setPolicy := func(req api.PolicyRequest, awaitRead bool) {
		t.Helper()
		seen := logs.count("run-time policy changed")
		if _, err := cl.SetPolicy(context.Background(), "w", req); err != nil {
			t.Fatal(err)
		}
		if awaitRead {
			wait("the watcher reads the policy", func() bool { return logs.count("run-time policy changed") > seen })
		}
	}

	wait("w registered", func() bool { _, err := cl.Agent(context.Background(), "w", api.Local); return err == nil })
	setPolicy(api.PolicyRequest{Mode: api.PolicyQuiet}, false)
	setPolicy(api.PolicyRequest{Mode: api.PolicyQueue, From: "lead"}, false)
	held := send("held-1", "bob", "normal")
	send("urgent-1", "bob", "urgent")
	send("lead-1", "lead", "normal")
	wait("the urgent message answered", func() bool { return answered("urgent-1") })
	wait("the override's sender answered", func() bool { return answered("lead-1") })
	if answered("held-1") {
		t.Fatal("quiet delivered a normal message")
	}
	if cur, err := cl.Cursor(context.Background(), "w", api.Strong); err != nil || cur.Seq >= held {
		t.Fatalf("cursor %+v, %v: passed the held message (seq %d)", cur, err, held)
	}

	// Still quiet, now for a second: it ends by itself, nobody clears it.
	setPolicy(api.PolicyRequest{Mode: api.PolicyQuiet, ForSeconds: 1}, true)
	wait("the held message answered once the quiet ended", func() bool { return answered("held-1") })
	wait("the cursor passes the answered message", func() bool {
		cur, err := cl.Cursor(context.Background(), "w", api.Strong)
		return err == nil && cur.Seq >= held
	})
	// Read changed when held-1 came (both policies at once) and when the
	// quiet got its end.
	if n := logs.count("run-time policy changed"); n < 2 {
		t.Errorf("the policy was read changed %d times, want at least 2", n)
	}
}

// A policy set before a message was sent applies to that message, however
// long the watcher's periodic read is away: the watcher reads the policy
// again when a message comes (the node applied the policy before it).
func TestPolicySetBeforeASendAppliesToIt(t *testing.T) {
	was := policyPoll
	t.Cleanup(func() { policyPoll = was }) // last: after the watcher stopped
	policyPoll = time.Hour
	svc, cl := apiNode(t, "w")
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: w\n  command: [sh, -c, %q]\n  context_messages: 0\n",
		`echo "answer from $MAOS_AGENT_ID"`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	answer := func(id string) *api.Message {
		t.Helper()
		if _, err := cl.Send(context.Background(), &api.Message{ID: id, Channel: "dev", From: "lead", To: api.Recipients{"w"},
			Content: api.Content{Text: "please"}}); err != nil {
			t.Fatal(err)
		}
		for deadline := testenv.Deadline(t); ; time.Sleep(5 * time.Millisecond) {
			if m := svc.Stored(id); m != nil {
				if r := svc.Stored(ReplyID("w", m)); r != nil {
					return r
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never answered", id)
			}
		}
	}
	// Answered by w itself: the loop runs and has read the policy (none).
	if r := answer("warm-up"); r.From != "w" {
		t.Fatalf("warm-up answered by %s", r.From)
	}
	if _, err := cl.SetPolicy(context.Background(), "w", api.PolicyRequest{Mode: api.PolicyFork}); err != nil {
		t.Fatal(err)
	}
	if r := answer("job-1"); r.From != "w-fork-1" || r.Content.Text != "answer from w-fork-1" {
		t.Fatalf("job-1 answered by %s (%q); want w-fork-1: the fork policy set before it was sent", r.From, r.Content.Text)
	}
}
