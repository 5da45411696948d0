package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/testenv"
)

func TestBatchText(t *testing.T) {
	m := func(from, title, text string) *api.Message {
		return &api.Message{From: from, Title: title, Content: api.Content{Text: text}}
	}
	one := m("lead", "job", "do it")
	if got, want := BatchText([]*api.Message{one}, true), "[FROM: lead] job — do it"; got != want {
		t.Errorf("one message = %q, want %q", got, want)
	}
	three := []*api.Message{one, m("codex", "", "looks fine"), m("rita", "q", "why?")}
	if got, want := BatchText(three, true), "3 messages while you worked: (1) [FROM: lead] job — do it (2) [FROM: codex] looks fine (3) [FROM: rita] q — why?"; got != want {
		t.Errorf("three waited = %q, want %q", got, want)
	}
	if got, want := BatchText(three[:2], false), "2 messages: (1) [FROM: lead] job — do it (2) [FROM: codex] looks fine"; got != want {
		t.Errorf("two not waited = %q, want %q", got, want)
	}
}

// tmuxAgent runs a watcher of agent tm (delivery tmux, extra YAML lines
// in more) against an API node, its pane target on s; PanePoll is short
// and the heartbeat's period an hour, so the test's hook reports are the
// node's word until the test changes them.
func tmuxAgent(t *testing.T, s *tmuxServer, target, more string) *client.Client {
	t.Helper()
	_, cl := apiNode(t)
	startTmuxWatcher(t, s, cl, target, more)
	return cl
}

// startTmuxWatcher is tmuxAgent's watcher on client cl; stop ends it (and
// waits for it), as does the test's end.
func startTmuxWatcher(t *testing.T, s *tmuxServer, cl *client.Client, target, more string) (stop func()) {
	t.Helper()
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: tm\n  delivery: tmux\n  tmux_target: %q\n%s", target, more))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), Tmux: s.tm,
			Heartbeat: time.Hour, PanePoll: 20 * time.Millisecond, BackoffBase: 10 * time.Millisecond})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	for deadline := testenv.Deadline(t); ; time.Sleep(10 * time.Millisecond) {
		if _, err := cl.AgentPresence(ctx, "tm"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher never reported presence")
		}
	}
	return stop
}

// hook reports sub for tm as the coding-agent hook does.
func hook(t *testing.T, cl *client.Client, sub string) {
	t.Helper()
	if _, err := cl.PutPresence(context.Background(), "tm", api.PresenceUpdate{State: api.PresenceAwake, Substate: sub, Source: api.SourceHook}); err != nil {
		t.Fatal(err)
	}
}

func send(t *testing.T, cl *client.Client, n int, prio api.Priority) *api.Message {
	t.Helper()
	m := &api.Message{ID: fmt.Sprintf("msg-20261125-040000-lead-%08x", n), From: "lead", To: api.Recipients{"tm"}, Channel: "work",
		Title: fmt.Sprintf("job %d", n), Priority: prio, Content: api.Content{Text: fmt.Sprintf("please do %d", n)}}
	res, err := cl.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	m.Seq = res.Seq
	return m
}

func receipt(t *testing.T, cl *client.Client, id string) api.Receipt {
	t.Helper()
	rc, err := cl.Receipts(context.Background(), id, api.Strong)
	if err != nil || len(rc.Receipts) != 1 {
		t.Fatalf("receipts of %s: %+v, %v", id, rc, err)
	}
	return rc.Receipts[0]
}

func waitReceipt(t *testing.T, cl *client.Client, id string, cond func(api.Receipt) bool) api.Receipt {
	t.Helper()
	var r api.Receipt
	for deadline := testenv.Deadline(t); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r = receipt(t, cl, id); cond(r) {
			return r
		}
	}
	t.Fatalf("receipt of %s never met the condition: %+v", id, r)
	return r
}

// A message to an agent whose hook said WORKING is not typed until the
// hook says IDLE; the three that waited arrive as one batch, each receipt
// queued, then delivered (and read); the cursor never passes one not yet
// typed.
func TestTmuxQueueWaitsForIdleThenBatches(t *testing.T) {
	s := newTmuxServer(t)
	target, out := s.catSession("agent")
	cl := tmuxAgent(t, s, target, "")
	hook(t, cl, api.SubstateWorking)
	ms := []*api.Message{send(t, cl, 1, api.PriorityNormal), send(t, cl, 2, api.PriorityHigh), send(t, cl, 3, api.PriorityNormal)}
	for _, m := range ms {
		r := waitReceipt(t, cl, m.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
		if r.Reached(api.ReceiptDelivered) || !r.TypedAt.IsZero() {
			t.Errorf("queued receipt of %s reached delivered: %+v", m.ID, r)
		}
	}
	// Still WORKING a while later: nothing typed, the cursor not past them.
	time.Sleep(300 * time.Millisecond)
	if got := readFileString(out); got != "" {
		t.Fatalf("typed into a WORKING agent's pane: %q", got)
	}
	if c, err := cl.Cursor(context.Background(), "tm", api.Strong); err != nil || c.Seq >= ms[0].Seq {
		t.Fatalf("cursor %+v (%v) passed a message not yet typed (seq %d)", c, err, ms[0].Seq)
	}

	hook(t, cl, api.SubstateIdle)
	want := "3 messages while you worked: (1) [FROM: lead] job 1 — please do 1 (2) [FROM: lead] job 2 — please do 2 (3) [FROM: lead] job 3 — please do 3\n"
	if got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") }); got != want {
		t.Fatalf("pane read %q, want one batch %q", got, want)
	}
	for _, m := range ms {
		r := waitReceipt(t, cl, m.ID, func(r api.Receipt) bool { return r.State == api.ReceiptRead })
		if r.QueuedAt.IsZero() || !r.TypedAt.After(r.QueuedAt) || !r.InterruptedAt.IsZero() || !r.Reached(api.ReceiptDelivered) {
			t.Errorf("receipt of %s after the batch = %+v, want queued then typed, not interrupted", m.ID, r)
		}
	}
	waitCursorSeq(t, cl, ms[2].Seq)
	// An idle agent gets the next message at once, alone.
	m4 := send(t, cl, 4, api.PriorityNormal)
	if got := waitFile(t, out, func(s string) bool { return strings.Count(s, "\n") == 2 }); !strings.HasSuffix(got, "\n[FROM: lead] job 4 — please do 4\n") {
		t.Fatalf("pane read %q, want job 4 alone after the batch", got)
	}
	if r := waitReceipt(t, cl, m4.ID, func(r api.Receipt) bool { return r.State == api.ReceiptRead }); !r.QueuedAt.IsZero() || r.TypedAt.IsZero() {
		t.Errorf("receipt of a message to an idle agent = %+v, want typed, never queued", r)
	}
}

// An urgent message to a WORKING agent sends the interrupt key first, then
// the message, and its receipt says interrupted; a normal one queued
// beside it goes in the same batch, delivered.
func TestTmuxUrgentInterruptsFirst(t *testing.T) {
	for _, tc := range []struct{ name, more, key string }{
		{"escape", "", "\x1b"},
		{"configured key", "  interrupt_key: C-g\n", "\x07"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTmuxServer(t)
			// Not canonical: ESC and C-u reach the line as bytes, so the
			// file shows what was typed before the message.
			out, ready := s.path("out"), s.path("ready")
			target := s.session("agent", `stty -icanon -echoctl; : > '`+ready+`'; while IFS= read -r l; do printf '%s\n' "$l" >> '`+out+`'; done`)
			waitFile(t, ready, func(string) bool { return true })
			cl := tmuxAgent(t, s, target, tc.more)
			mayInterrupt(t, cl, "lead")
			hook(t, cl, api.SubstateWorking)
			normal := send(t, cl, 1, api.PriorityNormal)
			waitReceipt(t, cl, normal.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
			urgent := send(t, cl, 2, api.PriorityUrgent)
			got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") })
			line := "2 messages while you worked: (1) [FROM: lead] job 1 — please do 1 (2) [FROM: lead] job 2 — please do 2\n"
			before, ok := strings.CutSuffix(got, line)
			if !ok || !strings.HasPrefix(before, tc.key) || strings.Count(before, tc.key) != 1 {
				t.Fatalf("pane read %q, want the key %q once, then %q", got, tc.key, line)
			}
			r := waitReceipt(t, cl, urgent.ID, func(r api.Receipt) bool { return r.State == api.ReceiptRead })
			if r.InterruptedAt.IsZero() || !r.TypedAt.Equal(r.InterruptedAt) {
				t.Errorf("urgent receipt = %+v, want interrupted", r)
			}
			if r := receipt(t, cl, normal.ID); !r.InterruptedAt.IsZero() || r.TypedAt.IsZero() {
				t.Errorf("normal receipt = %+v, want delivered, not interrupted", r)
			}
		})
	}
}

// mayInterrupt registers agent as an orchestrator, a role the default
// interrupt rule admits: its messages then carry interrupt authority.
func mayInterrupt(t *testing.T, cl *client.Client, agent string) {
	t.Helper()
	if _, err := cl.RegisterAgent(context.Background(), api.RegisterAgentCommand{ID: agent, Role: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
}

// Urgent mail from a sender the interrupt rule does not admit never
// interrupts a tmux agent: apply stored it without authority, so the
// watcher sends no key and it waits, queued, until the agent is idle, then
// goes delivered, not interrupted. (The watcher used to press the key for
// any urgent message: any agent could interrupt any tmux agent.)
func TestTmuxUrgentWithoutAuthorityWaits(t *testing.T) {
	s := newTmuxServer(t)
	out, ready := s.path("out"), s.path("ready")
	target := s.session("agent", `stty -icanon -echoctl; : > '`+ready+`'; while IFS= read -r l; do printf '%s\n' "$l" >> '`+out+`'; done`)
	waitFile(t, ready, func(string) bool { return true })
	cl := tmuxAgent(t, s, target, "")
	hook(t, cl, api.SubstateWorking)
	urgent := send(t, cl, 1, api.PriorityUrgent) // from lead, unregistered: no authority
	waitReceipt(t, cl, urgent.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
	if m, err := cl.Message(context.Background(), urgent.ID, api.Strong); err != nil || m.MayInterrupt {
		t.Fatalf("stored %+v (%v): want no interrupt authority", m, err)
	}
	// A later normal message from an authorized sender is queued too: the
	// agent is still WORKING and nothing was pressed.
	mayInterrupt(t, cl, "boss")
	normal := &api.Message{ID: "msg-20261125-040000-boss-00000002", From: "boss", To: api.Recipients{"tm"}, Channel: "work",
		Title: "fyi", Content: api.Content{Text: "later"}}
	if _, err := cl.Send(context.Background(), normal); err != nil {
		t.Fatal(err)
	}
	waitReceipt(t, cl, normal.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
	if got := readFileString(out); got != "" {
		t.Fatalf("pressed or typed into a WORKING pane for mail without interrupt authority: %q", got)
	}
	hook(t, cl, api.SubstateIdle)
	got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") })
	// C-u (\x15) clears the input line before the text; ESC would show.
	if strings.Contains(got, "\x1b") || !strings.HasPrefix(strings.TrimPrefix(got, "\x15"), "2 messages while you worked: (1) [FROM: lead] job 1") {
		t.Fatalf("pane read %q, want the two messages typed once idle, no key", got)
	}
	if r := waitReceipt(t, cl, urgent.ID, func(r api.Receipt) bool { return r.State == api.ReceiptRead }); !r.InterruptedAt.IsZero() || r.TypedAt.IsZero() {
		t.Errorf("urgent receipt = %+v, want delivered, not interrupted", r)
	}
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func waitCursorSeq(t *testing.T, cl *client.Client, seq uint64) {
	t.Helper()
	for deadline := testenv.Deadline(t); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := cl.Cursor(context.Background(), "tm", api.Strong); err == nil && c.Seq >= seq {
			return
		}
	}
	t.Fatalf("cursor never reached %d", seq)
}

// An interrupt key tmux refuses leaves urgent mail queued until the agent
// is idle by itself; the receipt then says delivered, not interrupted.
func TestTmuxUrgentWaitsWhenTheKeyFails(t *testing.T) {
	s := newTmuxServer(t)
	target, out := s.catSession("agent")
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal(err)
	}
	// A tmux that refuses the key F12 and runs every other command.
	wrapper := s.path("tmux")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nfor a; do [ \"$a\" = F12 ] && { echo 'no F12 here' >&2; exit 1; }; done\nexec '"+real+"' \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.tm.Binary = wrapper
	cl := tmuxAgent(t, s, target, "  interrupt_key: F12\n")
	mayInterrupt(t, cl, "lead")
	hook(t, cl, api.SubstateWorking)
	urgent := send(t, cl, 1, api.PriorityUrgent)
	waitReceipt(t, cl, urgent.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
	time.Sleep(300 * time.Millisecond)
	if got := readFileString(out); got != "" {
		t.Fatalf("typed into a WORKING pane the watcher could not interrupt: %q", got)
	}
	hook(t, cl, api.SubstateIdle)
	if got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") }); got != "[FROM: lead] job 1 — please do 1\n" {
		t.Fatalf("pane read %q", got)
	}
	if r := waitReceipt(t, cl, urgent.ID, func(r api.Receipt) bool { return r.State == api.ReceiptRead }); !r.InterruptedAt.IsZero() || r.TypedAt.IsZero() {
		t.Errorf("receipt = %+v, want delivered, not interrupted", r)
	}
}

// A message queued when its watcher stops is delivered by the next one:
// the cursor had not passed it.
func TestTmuxQueuedSurvivesRestart(t *testing.T) {
	s := newTmuxServer(t)
	target, out := s.catSession("agent")
	_, cl := apiNode(t)
	stop := startTmuxWatcher(t, s, cl, target, "")
	hook(t, cl, api.SubstateWorking)
	m := send(t, cl, 1, api.PriorityNormal)
	waitReceipt(t, cl, m.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
	stop()
	if c, err := cl.Cursor(context.Background(), "tm", api.Strong); err != nil || c.Seq >= m.Seq {
		t.Fatalf("cursor %+v (%v) passed the queued message (seq %d)", c, err, m.Seq)
	}
	if got := readFileString(out); got != "" {
		t.Fatalf("typed before the agent was idle: %q", got)
	}
	startTmuxWatcher(t, s, cl, target, "")
	hook(t, cl, api.SubstateIdle)
	if got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") }); got != "[FROM: lead] job 1 — please do 1\n" {
		t.Fatalf("pane read %q, want the queued message once", got)
	}
	waitCursorSeq(t, cl, m.Seq)
}

func TestTmuxInterrupts(t *testing.T) {
	for _, tc := range []struct {
		yml  string
		from string
		prio api.Priority
		want bool
	}{
		{"", "rita", api.PriorityUrgent, true},
		{"", "rita", api.PriorityHigh, false},
		{"  policy: {overrides: [{from: lead, mode: interrupt}]}\n", "lead", api.PriorityLow, true},
		{"  policy: {overrides: [{from: lead, mode: interrupt}]}\n", "rita", api.PriorityNormal, false},
		// The agent's own mode interrupt is urgent mail's, as for a command agent.
		{"  policy: {mode: interrupt}\n", "rita", api.PriorityNormal, false},
		{"  policy: {mode: interrupt}\n", "rita", api.PriorityUrgent, true},
	} {
		// Only a message whose sender may interrupt (apply's decision,
		// carried on it) ever does; without it none of these does.
		for _, may := range []bool{true, false} {
			f, err := Parse([]byte("agents:\n- id: tm\n  delivery: tmux\n  tmux_target: s:0.0\n" + tc.yml))
			if err != nil {
				t.Fatal(err)
			}
			w := &agentWatcher{cfg: &f.Agents[0]}
			m := &api.Message{From: tc.from, Priority: tc.prio, MayInterrupt: may}
			if got := w.interrupts(&item{m: m, mode: w.cfg.ModeFor(m)}); got != (tc.want && may) {
				t.Errorf("%q: from %s, %s, may_interrupt %t: interrupts = %v, want %v", tc.yml, tc.from, tc.prio, may, got, tc.want && may)
			}
			it := &item{m: m, mode: PolicyInterrupt}
			if got := it.urgentInterrupt(); got != (may && tc.prio == api.PriorityUrgent) {
				t.Errorf("a command agent's %s message from %s, may_interrupt %t: preempts = %v", tc.prio, tc.from, may, got)
			}
		}
	}
}

// A run-time quiet policy holds a tmux agent's normal mail (never typed,
// the cursor before it) while urgent mail goes through; cleared, the held
// message is typed.
func TestTmuxQuietHoldsNormalMail(t *testing.T) {
	s := newTmuxServer(t)
	target, out := s.catSession("agent")
	_, cl := apiNode(t)
	ctx := context.Background()
	// Set before the watcher starts: its loop reads the policy first thing.
	if _, err := cl.SetPolicy(ctx, "tm", api.PolicyRequest{Mode: PolicyQuiet, SetBy: "tm"}); err != nil {
		t.Fatal(err)
	}
	startTmuxWatcher(t, s, cl, target, "")
	normal := send(t, cl, 1, api.PriorityNormal)
	urgent := send(t, cl, 2, api.PriorityUrgent)
	if got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") }); got != "[FROM: lead] job 2 — please do 2\n" {
		t.Fatalf("pane read %q, want only the urgent message while quiet", got)
	}
	waitReceipt(t, cl, urgent.ID, func(r api.Receipt) bool { return r.State == api.ReceiptRead })
	if c, err := cl.Cursor(ctx, "tm", api.Strong); err != nil || c.Seq >= normal.Seq {
		t.Fatalf("cursor %+v (%v) passed the held message (seq %d)", c, err, normal.Seq)
	}
	if _, err := cl.ClearPolicy(ctx, "tm", ""); err != nil {
		t.Fatal(err)
	}
	if got := waitFile(t, out, func(s string) bool { return strings.Count(s, "\n") == 2 }); !strings.HasSuffix(got, "\n[FROM: lead] job 1 — please do 1\n") {
		t.Fatalf("pane read %q, want the held message once quiet ended", got)
	}
	waitCursorSeq(t, cl, urgent.Seq)
}

// A tmux agent with a command forks as a command agent does: the fork
// answers the sender and never types into the pane, even while the agent
// works; the fork's note to the agent is mail for its session, queued
// while it works and typed once its hook says IDLE.
func TestTmuxForkNeverTypesIntoThePane(t *testing.T) {
	s := newTmuxServer(t)
	target, out := s.catSession("agent")
	cl := tmuxAgent(t, s, target, "  command: [sh, -c, 'echo fork answer from $MAOS_AGENT_ID']\n  context_messages: 0\n  policy: {mode: fork}\n")
	hook(t, cl, api.SubstateWorking)
	m, err := cl.Message(context.Background(), send(t, cl, 1, api.PriorityNormal).ID, api.Local) // with its stored time
	if err != nil {
		t.Fatal(err)
	}
	var r *api.Message
	for deadline := testenv.Deadline(t); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if r, err = cl.Message(context.Background(), ReplyID("tm", m), api.Local); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer to %s: %v", m.ID, err)
		}
	}
	if r.From != "tm-fork-1" || r.Content.Text != "fork answer from tm-fork-1" {
		t.Fatalf("answer %+v, want tm-fork-1's", r)
	}
	note := forkNote(m, r, "tm")
	for deadline := testenv.Deadline(t); ; time.Sleep(10 * time.Millisecond) {
		if _, err := cl.Message(context.Background(), note.ID, api.Local); err == nil {
			break // the note follows the answer
		}
		if time.Now().After(deadline) {
			t.Fatalf("no note %s to tm", note.ID)
		}
	}
	waitReceipt(t, cl, note.ID, func(r api.Receipt) bool { return r.State == api.ReceiptQueued })
	if got := readFileString(out); got != "" {
		t.Fatalf("typed into a WORKING agent's pane: %q", got)
	}
	if rc := receipt(t, cl, m.ID); !rc.TypedAt.IsZero() || !rc.QueuedAt.IsZero() {
		t.Errorf("the forked message has a pane receipt: %+v", rc)
	}
	hook(t, cl, api.SubstateIdle)
	want := "[FROM: tm-fork-1] tm-fork-1 answered lead: job 1 — tm-fork-1 answered lead's message " + m.ID + " for you: fork answer from tm-fork-1\n"
	if got := waitFile(t, out, func(s string) bool { return strings.HasSuffix(s, "\n") }); got != want {
		t.Fatalf("pane read %q, want the note %q", got, want)
	}
	waitCursorSeq(t, cl, m.Seq+2)
}
