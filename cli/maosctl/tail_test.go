package maosctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
)

func seed(t *testing.T, e *testEnv, channel, text string) {
	t.Helper()
	m := fsm.Message{From: "codex", To: fsm.Recipients{"claude"}, Channel: channel, Title: text, Content: fsm.Content{Text: text}}
	m.Normalize(time.Now())
	if _, err := e.svc.Apply(context.Background(), fsm.OpSend, fsm.SendCommand{Message: m}); err != nil {
		t.Fatal(err)
	}
}

func TestTailBacklog(t *testing.T) {
	e := newTestEnv(t)
	seed(t, e, "ops", "first")
	seed(t, e, "dev", "second")
	out := e.ok("tail", "--channel", "ops")
	if !strings.Contains(out, "[codex→claude] CHAT #") || !strings.Contains(out, ": first") || strings.Contains(out, "second") {
		t.Fatalf("tail --channel ops printed %q", out)
	}
	lines := strings.Split(strings.TrimSpace(e.ok("--json", "tail")), "\n")
	if len(lines) != 2 {
		t.Fatalf("tail --json printed %d lines: %q", len(lines), lines)
	}
	var m fsm.Message
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || m.Title != "second" {
		t.Fatalf("second line %q: %+v, %v", lines[1], m, err)
	}
	if r := e.run("", "tail", "--agent", "Not An Agent"); r.err == nil || !strings.Contains(r.errOut, "agent") {
		t.Fatalf("bad agent: err=%v stderr=%q", r.err, r.errOut)
	}
}

func TestTailFollow(t *testing.T) {
	e := newTestEnv(t)
	seed(t, e, "ops", "before")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out syncBuffer
	app := App()
	app.Writer, app.ErrWriter = &out, &out
	done := make(chan error, 1)
	go func() { done <- app.RunContext(ctx, []string{"maosctl", "--addr", e.addr, "tail", "-f"}) }()
	wait := func(what string) {
		t.Helper()
		for !strings.Contains(out.String(), what) {
			select {
			case err := <-done:
				t.Fatalf("tail -f ended (%v) before printing %q: %q", err, what, out.String())
			case <-ctx.Done():
				t.Fatalf("no %q in %q", what, out.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	wait(": before")
	seed(t, e, "ops", "after")
	wait(": after")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tail -f after Ctrl-C: %v", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Fatalf("tail -f printed %d lines, want 2: %q", n, out.String())
	}
}
