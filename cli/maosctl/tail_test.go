package maosctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func seed(t *testing.T, e *testEnv, channel, text string) {
	t.Helper()
	m := api.Message{From: "codex", To: api.Recipients{"claude"}, Channel: channel, Title: text, Content: api.Content{Text: text}}
	m.Normalize(time.Now())
	if _, err := e.svc.Apply(context.Background(), api.OpSend, api.SendCommand{Message: m}); err != nil {
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
	var m api.Message
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
	f := e.follow("tail", "-f")
	f.waitFor(": before")
	seed(t, e, "ops", "after")
	f.waitFor(": after")
	f.stop()
	if n := strings.Count(f.out.String(), "\n"); n != 2 || f.errOut.String() != "" {
		t.Fatalf("tail -f printed %d lines, want 2: %q (stderr %q)", n, f.out.String(), f.errOut.String())
	}
}
