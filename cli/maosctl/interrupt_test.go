package maosctl

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// interruptEnv is a fake node with a real state machine behind sends and
// reads too, the
// hierarchical rules (workers talk only to the orchestrator role, which
// may message anyone), and agents registered with their roles.
func interruptEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newTestEnv(t)
	for id, role := range map[string]string{"master": "orchestrator", "claude": "developer", "tester": "tester"} {
		e.apply(fsm.OpRegisterAgent, fsm.RegisterAgentCommand{ID: id, Role: role})
	}
	e.ok("rules", "set", "--preset", "hierarchical", "--orchestrator-role", "orchestrator")
	return e
}

func interruptMessage(t *testing.T, e *testEnv, id string) fsm.Message {
	t.Helper()
	var m fsm.Message
	if err := json.Unmarshal([]byte(e.ok("--json", "get", id)), &m); err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return m
}

func TestInterruptSendsUrgentMessage(t *testing.T) {
	e := interruptEnv(t)
	e.svc.SetPresence(transport.Presence{AgentID: "claude", Node: "n2", State: "AWAKE", Substate: "WORKING", Channel: "dev"})
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

func TestInterruptRefusedByRules(t *testing.T) {
	e := interruptEnv(t)
	e.svc.SetPresence(transport.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Channel: "dev"})
	// tester may not message claude; the tmux target would fail if tried.
	e.fail([]string{"interrupt", "claude", "--from", "tester", "--reason", "stop", "--tmux-target", "nosuch:0.0",
		"--tmux-socket", filepath.Join(t.TempDir(), "none")},
		"tester may not interrupt claude", "nothing was sent")
	if audit := e.ok("audit"); strings.Contains(audit, "INTERRUPT") {
		t.Errorf("a refused interrupt left a message:\n%s", audit)
	}
}

func TestInterruptUsage(t *testing.T) {
	e := interruptEnv(t)
	e.fail([]string{"interrupt", "--from", "master", "--reason", "x"}, "missing AGENT")
	e.fail([]string{"interrupt", "claude", "--from", "master"}, "missing required flag --reason")
	e.fail([]string{"interrupt", "claude", "--reason", "x"}, "missing required flag --from", "$MAOS_AGENT_ID")
	e.fail([]string{"interrupt", "master", "--from", "master", "--reason", "x"}, "cannot interrupt itself")
	e.fail([]string{"interrupt", "bad id!", "--from", "master", "--reason", "x"}, "not an agent id")
	// No --channel and no presence to take one from.
	e.fail([]string{"interrupt", "claude", "--from", "master", "--reason", "x"}, "missing required flag --channel")
	if audit := e.ok("audit"); strings.Contains(audit, "INTERRUPT") {
		t.Errorf("a failed interrupt left a message:\n%s", audit)
	}
}

func TestInterruptSendsEscapeToPane(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux is needed by this test (.ci/run installs it): %v", err)
	}
	dir, err := os.MkdirTemp("", "maos-tmux-")
	if err != nil {
		t.Fatal(err)
	}
	sock, ready, got := filepath.Join(dir, "s"), filepath.Join(dir, "ready"), filepath.Join(dir, "bytes")
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	// A session that keeps the server up after the pane below exits.
	if out, err := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "keep",
		"sleep", "600").CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	// A pane whose program writes the first byte it gets to a file.
	script := `stty raw -echo && : > '` + ready + `' && exec dd bs=1 count=1 of='` + got + `' 2>/dev/null`
	if out, err := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "agents",
		"sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	readFile := func(p string) string {
		for i := 0; i < 400; i++ {
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 || err == nil && p == ready {
				return string(b)
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("%s never written", p)
		return ""
	}
	readFile(ready)

	e := interruptEnv(t)
	out := e.ok("interrupt", "claude", "--from", "master", "--channel", "dev", "--reason", "stop",
		"--tmux-target", "agents:0.0", "--tmux-socket", sock)
	if !strings.Contains(out, "ESC sent to tmux pane agents:0.0\n") {
		t.Errorf("interrupt printed %q", out)
	}
	if b := readFile(got); b != "\x1b" {
		t.Errorf("pane got %q, want ESC", b)
	}

	// A pane that is not there: the message went out, the error says so
	// and names the pane.
	e.fail([]string{"interrupt", "claude", "--from", "master", "--channel", "dev", "--reason", "again",
		"--tmux-target", "nosuch:0.0", "--tmux-socket", sock}, "sent, but no ESC", `"nosuch:0.0"`, "can't find")
}
