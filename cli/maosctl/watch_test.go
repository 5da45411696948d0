package maosctl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/watcher"
)

func TestWatchRefusesBadInput(t *testing.T) {
	e := newTestEnv(t)
	e.fail([]string{"watch"}, "--config")
	e.fail([]string{"watch", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml")
	bad := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(bad, []byte("agents:\n  - id: w1\n    command: [x]\n    policy: {mode: sometimes}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fail([]string{"watch", "--config", bad}, "agents[0].policy.mode", "queue, interrupt or fork")
	e.fail([]string{"watch", "--config", bad, "extra"}, "unexpected argument")
}

// watch --dry-run prints, for each incoming message, which local agent
// takes it with which policy (or why it skips it), and runs, registers
// and acknowledges nothing.
func TestWatchDryRun(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			e := newTestEnv(t)
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			cfg := filepath.Join(dir, "agents.yaml")
			yml := fmt.Sprintf(`agents:
  - id: bob
    command: ["sh", "-c", "touch %[1]s"]
    policy: {mode: fork}
  - id: amy
    command: ["sh", "-c", "touch %[1]s"]
    match: {types: [chat]}
    policy: {mode: queue, overrides: [{priority: urgent, mode: interrupt}]}
`, marker)
			if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
				t.Fatal(err)
			}
			send := func(id, to, typ string, prio api.Priority) {
				t.Helper()
				m := api.Message{ID: id, From: "codex", To: api.Recipients{to}, Channel: "dev", Type: typ, Priority: prio,
					Content: api.Content{Text: "text of " + id}}
				m.Normalize(time.Now())
				if _, err := e.svc.Apply(context.Background(), api.OpSend, api.SendCommand{Message: m}); err != nil {
					t.Fatal(err)
				}
			}
			send("d1", "bob", "chat", "normal")
			send("d2", "amy", "chat", "urgent")

			args := []string{"watch", "--config", cfg, "--dry-run"}
			if asJSON {
				args = append(args, "--json")
			}
			f := e.follow(args...)
			printed := func(n int) func() bool {
				return func() bool { return strings.Count(f.out.String(), "\n") >= n }
			}
			f.waitUntil(printed(2)) // the backlog
			send("d3", "amy", "chat", "normal")
			send("d4", "amy", "response", "normal")
			f.waitUntil(printed(4)) // pushed while running
			f.stop()
			out := f.out.String()
			lines := strings.Split(strings.TrimSpace(out), "\n")
			want := map[string]string{ // by message id
				"d1": "id=d1 from=codex -> bob policy=fork (addressed)",
				"d2": "id=d2 from=codex -> amy policy=interrupt (addressed)",
				"d3": "id=d3 from=codex -> amy policy=queue (addressed)",
				"d4": "id=d4 from=codex -> amy skip (type filtered)",
			}
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d: %q", len(lines), len(want), out)
			}
			for _, l := range lines {
				if asJSON {
					var d watcher.Decision
					if err := json.Unmarshal([]byte(l), &d); err != nil {
						t.Fatalf("--json line %q: %v", l, err)
					}
					l = d.String()
				}
				seq, rest, _ := strings.Cut(l, " ")
				if n, err := strconv.ParseUint(strings.TrimPrefix(seq, "seq="), 10, 64); err != nil || n == 0 {
					t.Fatalf("line %q: no seq", l)
				}
				l = rest
				id := strings.Fields(l)[0][len("id="):]
				if want[id] != l {
					t.Fatalf("line %q, want %q", l, want[id])
				}
				delete(want, id)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the dry run ran an agent's command")
			}
			st := e.svc.State()
			for _, a := range []string{"bob", "amy"} {
				if _, err := st.Agent(a); err == nil {
					t.Fatalf("the dry run registered %s", a)
				}
				if cur, err := st.CursorOf(a); err == nil && cur.Seq != 0 {
					t.Fatalf("the dry run moved %s's cursor to %d", a, cur.Seq)
				}
			}
		})
	}
}
