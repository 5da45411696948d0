package system

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/watcher"
)

// startWatcherOpts is startWatcher with options (a private tmux server,
// a logger to read).
func startWatcherOpts(t *testing.T, c *client.Client, yml string, opts watcher.Options) {
	t.Helper()
	f, err := watcher.Parse([]byte(yml))
	if err != nil {
		t.Fatalf("watcher config: %v", err)
	}
	opts.Client = c
	opts.BackoffBase = 10 * time.Millisecond
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watcher.Run(ctx, f, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher.Run: %v", err)
		}
	})
}

// writeScript writes a shell script into dir and returns its path.
func writeScript(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(p, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func sendTo(t *testing.T, c *client.Client, id, to, priority string) *api.Message {
	t.Helper()
	return sendJob(t, c, &api.Message{ID: id, To: api.Recipients{to}, Priority: api.Priority(priority)})
}

// oneReply waits for the reply to m and checks it is the only one.
func oneReply(t *testing.T, c *client.Client, agent string, m *api.Message) *api.Message {
	t.Helper()
	r := awaitReplies(t, c, m)
	if len(r) != 1 || r[0].ID != watcher.ReplyID(agent, m) || r[0].Type != "response" {
		t.Fatalf("replies to %s: %+v", m.ID, r)
	}
	return r[0]
}

// gone reports whether pid is dead (or a zombie nobody reaped yet).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// An urgent message preempts the running invocation: the process group of
// the running CLI is killed, the urgent message is answered first, and the
// cancelled message is run again and answered exactly once.
func TestWatcherInterruptPolicyPreempts(t *testing.T) {
	c := clustertest.New(t, 3)
	dir := t.TempDir()
	// The first run of "slow" starts a grandchild and waits for it (300 s,
	// far past the test's bounds): only a kill of the group ends it.
	script := writeScript(t, dir, fmt.Sprintf(`D=%s
echo "start $MAOS_MESSAGE_ID" >> $D/log
if [ "$MAOS_MESSAGE_ID" = slow ] && [ ! -e $D/slow.once ]; then
  : > $D/slow.once
  sleep 300 &
  echo $! > $D/child.tmp && mv $D/child.tmp $D/child.pid
  wait
fi
exec %s
`, dir, stubmodelBin))
	startWatcher(t, c.Nodes[2].Client, fmt.Sprintf(`
agents:
  - id: bob
    command: ["sh", %q]
    context_messages: 0
    retries: 0
    policy: {mode: interrupt}
`, script))
	waitRegistered(t, c.Nodes[0].Client, "bob")
	cl := c.Nodes[0].Client
	slow := sendTo(t, cl, "slow", "bob", "normal")
	pidFile := filepath.Join(dir, "child.pid")
	clustertest.WaitFor(t, 30*time.Second, "the slow invocation running", func() bool { return readFile(t, pidFile) != "" })
	child, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	// Only a sender the interrupt rule admits preempts (apply stamps its
	// messages' may_interrupt): lead is an orchestrator.
	if _, err := cl.RegisterAgent(context.Background(), api.RegisterAgentCommand{ID: "lead", Role: "orchestrator"}); err != nil {
		t.Fatal(err)
	}
	urgent := sendTo(t, cl, "urgent", "bob", "urgent")

	ru := oneReply(t, cl, "bob", urgent)
	rs := oneReply(t, cl, "bob", slow)
	if ru.Seq >= rs.Seq {
		t.Fatalf("urgent answered at seq %d, slow at %d: the urgent one must come first", ru.Seq, rs.Seq)
	}
	if ru.Content.Text != "stub answer to urgent" || rs.Content.Text != "stub answer to slow" {
		t.Fatalf("answers: %q, %q", ru.Content.Text, rs.Content.Text)
	}
	clustertest.WaitFor(t, 10*time.Second, "the preempted group's grandchild killed", func() bool { return gone(child) })
	waitCursor(t, cl, "bob", urgent.Seq)
	if got, want := readFile(t, filepath.Join(dir, "log")), "start slow\nstart urgent\nstart slow\n"; got != want {
		t.Fatalf("invocations:\n%swant:\n%s", got, want)
	}
	answeredOnce(t, cl, slow, urgent)
}

// Fork: messages run concurrently up to max_forks (a barrier only the
// concurrent runs pass), never more (each run logs how many run with it,
// while the first three are held); each is answered once; the cursor
// stays before a message still running even when later ones are done.
func TestWatcherForkPolicyConcurrentUpToMaxForks(t *testing.T) {
	c := clustertest.New(t, 3)
	dir := t.TempDir()
	script := writeScript(t, dir, fmt.Sprintf(`D=%s
id=$MAOS_MESSAGE_ID
: > $D/started.$id
: > $D/running.$id
echo "$id $(ls $D | grep -c '^running\.')" >> $D/log
i=0
while [ "$(ls $D | grep -c '^started\.')" -lt 3 ]; do
  i=$((i+1)); if [ $i -gt 600 ]; then rm -f $D/running.$id; echo "barrier timeout" >&2; exit 1; fi
  sleep 0.05
done
gate=release2
if [ "$id" = f1 ]; then gate=release; fi
i=0
while [ ! -e $D/$gate ]; do
  i=$((i+1)); if [ $i -gt 1200 ]; then rm -f $D/running.$id; echo "$gate timeout" >&2; exit 1; fi
  sleep 0.05
done
rm -f $D/running.$id
echo "done $id"
`, dir))
	startWatcher(t, c.Nodes[1].Client, fmt.Sprintf(`
agents:
  - id: forky
    command: ["sh", %q]
    context_messages: 0
    retries: 0
    policy: {mode: fork, max_forks: 3}
`, script))
	cl := c.Nodes[0].Client
	waitRegistered(t, cl, "forky")
	var msgs []*api.Message
	for i := 1; i <= 5; i++ {
		msgs = append(msgs, sendTo(t, cl, fmt.Sprintf("f%d", i), "forky", "normal"))
	}
	// f1..f3 run at once (the barrier) and are held; f4 and f5 may only
	// start when f2 and f3 end, after release2.
	clustertest.WaitFor(t, 30*time.Second, "three invocations started", func() bool {
		for _, id := range []string{"f1", "f2", "f3"} {
			if _, err := os.Stat(filepath.Join(dir, "started."+id)); err != nil {
				return false
			}
		}
		return true
	})
	if err := os.WriteFile(filepath.Join(dir, "release2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[1:] {
		r := oneReply(t, cl, "forky", m)
		if r.Content.Text != "done "+m.ID || !api.IsForkOf(r.From, "forky") {
			t.Fatalf("reply to %s from %s: %q; want one of forky's forks'", m.ID, r.From, r.Content.Text)
		}
	}
	// f2..f5 are answered, f1 still runs: the cursor must not pass it.
	if r := repliesTo(t, cl, "f1"); len(r) != 0 {
		t.Fatalf("f1 answered before its release: %+v", r)
	}
	cur, err := cl.Cursor(context.Background(), "forky", api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Seq >= msgs[0].Seq {
		t.Fatalf("cursor %d passed f1 (seq %d) while f1 was running", cur.Seq, msgs[0].Seq)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	oneReply(t, cl, "forky", msgs[0])
	waitCursor(t, cl, "forky", msgs[4].Seq)

	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "log"))), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d invocations, want 5:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var id string
		var running int
		if _, err := fmt.Sscanf(l, "%s %d", &id, &running); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if seen[id] {
			t.Fatalf("%s invoked twice:\n%s", id, strings.Join(lines, "\n"))
		}
		seen[id] = true
		if running > 3 {
			t.Fatalf("%d invocations ran at once, max_forks is 3:\n%s", running, strings.Join(lines, "\n"))
		}
	}
	answeredOnce(t, cl, msgs...)
}

// Queue with idle_after: nothing runs while messages keep arriving. The
// test sends three messages (well within idle_after of each other) and
// then drops a marker file; every invocation must see the marker, so
// none ran before the burst was over. Then they run one at a time in
// seq order.
func TestWatcherQueueIdleAfterWaitsForQuiet(t *testing.T) {
	c := clustertest.New(t, 3)
	dir := t.TempDir()
	script := writeScript(t, dir, fmt.Sprintf(`D=%s
if [ -e $D/sent ]; then w=after; else w=before; fi
echo "$MAOS_MESSAGE_ID $w" >> $D/log
exec %s
`, dir, stubmodelBin))
	startWatcher(t, c.Nodes[2].Client, fmt.Sprintf(`
agents:
  - id: calm
    command: ["sh", %q]
    context_messages: 0
    policy: {mode: queue, idle_after: 3s}
`, script))
	cl := c.Nodes[0].Client
	waitRegistered(t, cl, "calm")
	var msgs []*api.Message
	for i := 1; i <= 3; i++ {
		msgs = append(msgs, sendTo(t, cl, fmt.Sprintf("q%d", i), "calm", "normal"))
	}
	if err := os.WriteFile(filepath.Join(dir, "sent"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, m := range msgs {
		r := oneReply(t, cl, "calm", m)
		if r.Seq <= last {
			t.Fatalf("reply to %s at seq %d, not after the previous reply (%d)", m.ID, r.Seq, last)
		}
		last = r.Seq
	}
	waitCursor(t, cl, "calm", msgs[2].Seq)
	if got, want := readFile(t, filepath.Join(dir, "log")), "q1 after\nq2 after\nq3 after\n"; got != want {
		t.Fatalf("invocations:\n%swant:\n%s", got, want)
	}
}

// tmux delivery in the watcher loop: each message is typed into the
// agent's pane (on the test's private tmux server) exactly once, marked
// read, and the cursor passes it; no reply is posted.
func TestWatcherTmuxDelivery(t *testing.T) {
	testenv.Tool(t, "tmux", "delivery types into a pane of a private tmux server")
	// A short path: a unix socket's path is limited to ~100 bytes.
	tdir, err := os.MkdirTemp("", "maos-tmux-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tdir, "s")
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", sock, "kill-server").Run() // only this test's server
		os.RemoveAll(tdir)
	})
	out, ready := filepath.Join(tdir, "pane.out"), filepath.Join(tdir, "ready")
	script := `: > '` + ready + `'; while IFS= read -r l; do printf '%s\n' "$l" >> '` + out + `'; done`
	if b, err := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "tina",
		"-x", "200", "-y", "50", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, b)
	}
	clustertest.WaitFor(t, 10*time.Second, "the pane's reader", func() bool { _, err := os.Stat(ready); return err == nil })

	c := clustertest.New(t, 3)
	startWatcherOpts(t, c.Nodes[2].Client, `
agents:
  - id: tina
    delivery: tmux
    tmux_target: "tina:0.0"
`, watcher.Options{Tmux: watcher.Tmux{Socket: sock, Confirm: 5 * time.Second}})
	cl := c.Nodes[0].Client
	waitRegistered(t, cl, "tina")
	ctx := context.Background()

	m1 := sendTo(t, cl, "t1", "tina", "normal")
	line1 := "[FROM: lead] job t1 — please do t1"
	clustertest.WaitFor(t, 30*time.Second, "t1 typed into the pane", func() bool { return strings.Contains(readFile(t, out), line1) })
	clustertest.WaitFor(t, 30*time.Second, "t1 marked read", func() bool {
		p, err := cl.Inbox(ctx, "tina", api.InboxQuery{}, api.Strong)
		return err == nil && len(p.Messages) == 1 && p.Messages[0].ID == "t1" && p.Messages[0].Read
	})
	waitCursor(t, cl, "tina", m1.Seq)
	// A second message proves the first is not typed again (the loop has
	// moved on) and is typed once too.
	m2 := sendTo(t, cl, "t2", "tina", "normal")
	line2 := "[FROM: lead] job t2 — please do t2"
	clustertest.WaitFor(t, 30*time.Second, "t2 typed into the pane", func() bool { return strings.Contains(readFile(t, out), line2) })
	waitCursor(t, cl, "tina", m2.Seq)
	r, err := cl.Receipts(ctx, "t2", api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Receipts) != 1 || r.Receipts[0].Agent != "tina" || r.Receipts[0].State != "read" {
		t.Fatalf("t2 receipts: %+v", r.Receipts)
	}
	if got, want := readFile(t, out), line1+"\n"+line2+"\n"; got != want {
		t.Fatalf("pane received:\n%q\nwant:\n%q", got, want)
	}
	for _, m := range []*api.Message{m1, m2} {
		if _, err := cl.Message(ctx, watcher.ReplyID("tina", m), api.Strong); err == nil {
			t.Fatalf("a tmux delivery of %s posted a reply", m.ID)
		}
	}
}
