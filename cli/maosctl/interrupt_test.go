package maosctl

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/watcher"
)

// interruptEnv is a fake node with a real state machine behind sends and
// reads too, the
// hierarchical rules (workers talk only to the orchestrator role, which
// may message anyone), and agents registered with their roles.
func interruptEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newTestEnv(t)
	for id, role := range map[string]string{"master": "orchestrator", "claude": "developer", "tester": "tester"} {
		e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: id, Role: role})
	}
	e.ok("rules", "set", "--preset", "hierarchical", "--orchestrator-role", "orchestrator")
	return e
}

func interruptMessage(t *testing.T, e *testEnv, id string) api.Message {
	t.Helper()
	var m api.Message
	if err := json.Unmarshal([]byte(e.ok("--json", "get", id)), &m); err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return m
}

func TestInterruptSendsUrgentMessage(t *testing.T) {
	e := interruptEnv(t)
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n2", State: "AWAKE", Substate: "WORKING", Channel: "dev"})
	var res interruptResult
	out := e.ok("--json", "interrupt", "claude", "--from", "master", "--reason", "stop:\nthe spec changed")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("interrupt --json: %v\n%s", err, out)
	}
	if res.Agent != "claude" || res.Node != "n2" || res.Escape || res.Message == nil || res.Message.Seq == 0 {
		t.Fatalf("interrupt --json = %+v", res)
	}
	m := interruptMessage(t, e, res.Message.ID)
	if m.From != "master" || len(m.To) != 1 || m.To[0] != "claude" || m.Channel != "dev" ||
		m.Priority != "urgent" || m.Type != "alert" || m.Content.Text != "[INTERRUPT] stop:\nthe spec changed" ||
		m.Title != "[INTERRUPT] stop: the spec changed" {
		t.Errorf("stored message %+v", m)
	}
	if audit := e.ok("audit"); !strings.Contains(audit, "[master→claude] ALERT: [INTERRUPT] stop: the spec changed") {
		t.Errorf("the interrupt is not in the audit trail:\n%s", audit)
	}

	// Text output; sender and channel from the environment.
	t.Setenv(envAgent, "master")
	t.Setenv(envChannel, "ops")
	out = e.ok("interrupt", "claude", "--reason", "wrong branch")
	lines := strings.Split(out, "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "interrupt claude: msg-") || lines[1] != "agent claude is on node n2" ||
		!strings.HasPrefix(lines[2], "no ESC sent: ") || !strings.Contains(lines[2], "n2") {
		t.Errorf("interrupt printed %q", out)
	}
	id := strings.Fields(strings.TrimPrefix(lines[0], "interrupt claude: "))[0]
	if m := interruptMessage(t, e, id); m.From != "master" || m.Channel != "ops" {
		t.Errorf("message from the environment: %+v", m)
	}
}

// Messaging is not interrupting: under the hierarchical rules claude (a
// developer) may message master, and tester may not message claude; neither
// may interrupt. A refusal is the rule's words, stores nothing, sends no
// ESC (the tmux target would fail if tried) and leaves a BLOCKED line.
func TestInterruptRefusedWithoutAuthority(t *testing.T) {
	e := interruptEnv(t)
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Channel: "dev"})
	e.svc.SetPresence(api.Presence{AgentID: "master", Node: "n1", State: "AWAKE", Channel: "dev"})
	if out := e.ok("rules", "check", "--from", "claude", "--to", "master"); !strings.HasPrefix(out, "allowed:") {
		t.Fatalf("the rules should let claude message master: %q", out)
	}
	before := e.svc.NumStored()
	for _, tt := range []struct{ from, agent string }{{"tester", "claude"}, {"claude", "master"}} {
		e.fail([]string{"interrupt", tt.agent, "--from", tt.from, "--reason", "stop", "--tmux-target", "nosuch:0.0",
			"--tmux-socket", filepath.Join(t.TempDir(), "none")},
			rules.DefaultInterruptReason, "403")
		if audit := e.ok("audit"); !strings.Contains(audit, "["+tt.from+"→"+tt.agent+"] BLOCKED: "+rules.DefaultInterruptReason) {
			t.Errorf("no BLOCKED line for %s interrupting %s:\n%s", tt.from, tt.agent, audit)
		}
	}
	if n := e.svc.NumStored(); n != before {
		t.Errorf("refused interrupts stored %d messages", n-before)
	}
	if audit := e.ok("audit"); strings.Contains(audit, "ALERT") {
		t.Errorf("a refused interrupt left an alert:\n%s", audit)
	}
}

func TestInterruptUsage(t *testing.T) {
	e := interruptEnv(t)
	before := e.svc.NumStored()
	e.fail([]string{"interrupt", "--from", "master", "--reason", "x"}, "missing AGENT")
	e.fail([]string{"interrupt", "claude", "--from", "master"}, "missing required flag --reason")
	e.fail([]string{"interrupt", "claude", "--reason", "x"}, "--from is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
	e.fail([]string{"interrupt", "master", "--from", "master", "--reason", "x"}, "cannot interrupt itself")
	e.fail([]string{"interrupt", "bad_id!", "--from", "master", "--reason", "x"}, `id: must match`, `(got "bad_id!")`)
	// No --channel and no presence to take one from.
	e.fail([]string{"interrupt", "claude", "--from", "master", "--reason", "x"}, "channel: required", "presence of claude")
	if n := e.svc.NumStored(); n != before {
		t.Errorf("failed interrupts stored %d messages", n-before)
	}
}

// tmuxPane starts a private tmux server with a pane that records every
// byte it gets, raw, and returns the server's socket, the pane and a
// function reading what the pane got so far.
func tmuxPane(t *testing.T) (sock, pane string, got func() string) {
	t.Helper()
	testenv.Tool(t, "tmux", "a pane of a private tmux server records what it is sent")
	dir, err := os.MkdirTemp("", "maos-tmux-")
	if err != nil {
		t.Fatal(err)
	}
	sock, ready, bytesFile := filepath.Join(dir, "s"), filepath.Join(dir, "ready"), filepath.Join(dir, "bytes")
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	script := `stty raw -echo && : > '` + ready + `' && exec cat > '` + bytesFile + `'`
	if out, err := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "agents",
		"sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if i == 400 {
			t.Fatal("the pane never started")
		}
		time.Sleep(25 * time.Millisecond)
	}
	return sock, "agents:0.0", func() string {
		b, _ := os.ReadFile(bytesFile)
		return string(b)
	}
}

// waitBytes waits until got() is want, and a little longer to see that
// nothing follows it.
func waitBytes(t *testing.T, got func() string, want string) {
	t.Helper()
	for i := 0; got() != want; i++ {
		if i == 400 {
			t.Fatalf("the pane got %q, want %q", got(), want)
		}
		time.Sleep(25 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if g := got(); g != want {
		t.Fatalf("the pane got %q, want %q", g, want)
	}
}

// --tmux-target: ESC in a pane on this host, once the node stored the
// alert; a refused interrupt presses nothing.
func TestInterruptSendsEscapeToLocalPane(t *testing.T) {
	sock, pane, got := tmuxPane(t)
	e := interruptEnv(t)
	e.fail([]string{"interrupt", "claude", "--from", "tester", "--channel", "dev", "--reason", "stop",
		"--tmux-target", pane, "--tmux-socket", sock}, rules.DefaultInterruptReason)
	out := e.ok("interrupt", "claude", "--from", "master", "--channel", "dev", "--reason", "stop",
		"--tmux-target", pane, "--tmux-socket", sock)
	if !strings.Contains(out, "ESC sent to tmux pane agents:0.0\n") {
		t.Errorf("interrupt printed %q", out)
	}
	waitBytes(t, got, "\x1b")

	// A pane that is not there: the message went out, the error says so
	// and names the pane.
	e.fail([]string{"interrupt", "claude", "--from", "master", "--channel", "dev", "--reason", "again",
		"--tmux-target", "nosuch:0.0", "--tmux-socket", sock}, "sent, but no ESC", `"nosuch:0.0"`, "can't find")
}

// Without --tmux-target the node that hosts the agent presses ESC, after
// the alert is stored; a refused interrupt stores nothing (so no watcher
// types anything) and presses nothing.
func TestInterruptSendsEscapeThroughTheNode(t *testing.T) {
	sock, pane, got := tmuxPane(t)
	e := interruptEnv(t)
	var storedAtESC []int
	srv := httptest.NewServer(transport.NewServer(e.svc, transport.ServerOptions{
		Interrupt: func(ctx context.Context, agent string) error {
			storedAtESC = append(storedAtESC, e.svc.NumStored())
			return watcher.Tmux{Socket: sock}.Interrupt(ctx, pane)
		},
	}))
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Channel: "dev"})

	before := e.svc.NumStored()
	e.fail([]string{"interrupt", "claude", "--from", "tester", "--reason", "stop"}, rules.DefaultInterruptReason)
	if n := e.svc.NumStored(); n != before || len(storedAtESC) != 0 {
		t.Fatalf("a refused interrupt stored %d messages and pressed ESC %d times", n-before, len(storedAtESC))
	}
	out := e.ok("interrupt", "claude", "--from", "master", "--reason", "stop")
	if !strings.Contains(out, "agent claude is on node n1\n") || !strings.Contains(out, "ESC sent to tmux pane on node n1\n") {
		t.Errorf("interrupt printed %q", out)
	}
	waitBytes(t, got, "\x1b")
	if len(storedAtESC) != 1 || storedAtESC[0] != before+1 {
		t.Errorf("ESC pressed with %v messages stored, want once after the alert (%d)", storedAtESC, before+1)
	}
}
