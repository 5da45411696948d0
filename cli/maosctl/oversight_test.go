package maosctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

func oversightSend(t *testing.T, e *testEnv, id, from, channel, title, visibility string, to ...string) {
	t.Helper()
	m := api.Message{ID: id, From: from, Channel: channel, To: to, Title: title, Visibility: visibility,
		Type: "request", Content: api.Content{Text: "content of " + id}}
	m.Normalize(time.Now())
	e.apply(api.OpSend, api.SendCommand{Message: m})
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const seedRules = `allowed_interactions:
  master_agent:
    can_send_to: ["*"]
    can_receive_from: ["*"]
  developer_agent:
    can_send_to: ["master_agent", "reviewer_agent", "tester_agent"]
    can_receive_from: ["master_agent", "reviewer_agent"]
  reviewer_agent:
    can_send_to: ["master_agent", "developer_agent"]
    can_receive_from: ["master_agent", "developer_agent"]
  tester_agent:
    can_send_to: ["master_agent", "developer_agent"]
    can_receive_from: []
agents:
  - agent: "engineer_*"
    can_send_to: role:lead
forbidden_interactions:
  - from: "tester_agent"
    to: "reviewer_agent"
    reason: "Should go through developer first"
`

func rulesJSON(t *testing.T, e *testEnv) api.RulesState {
	t.Helper()
	var st api.RulesState
	out := e.ok("--json", "rules", "get")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("rules get --json: %v\n%s", err, out)
	}
	return st
}

func TestRulesSetGetCheck(t *testing.T) {
	e := newTestEnv(t)
	if out := e.ok("rules", "get"); out != "no rules document: everyone may message everyone\n" {
		t.Errorf("rules get before any: %q", out)
	}
	file := writeFile(t, "communication_rules.yaml", seedRules)
	out := e.ok("rules", "set", "-f", file)
	if out != "rules set at index 1001: 5 agent entries, 1 forbidden, default deny\n" {
		t.Errorf("rules set printed %q", out)
	}
	first := rulesJSON(t, e)
	if first.Rules == nil || len(first.Rules.AllowedInteractions) != 4 || first.Rules.AllowedInteractions["tester_agent"].CanReceiveFrom == nil {
		t.Fatalf("stored %+v", first.Rules)
	}

	// get prints YAML that set reads back to the same document.
	out = e.ok("rules", "get")
	if !regexp.MustCompile(`^# rules set at index 1001, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; a pair no rule mentions: deny\n`).MatchString(out) {
		t.Errorf("rules get header:\n%s", out)
	}
	for _, want := range []string{"- agent: engineer_*\n    can_send_to: ['role:lead']", "can_receive_from: []", "reason: Should go through developer first"} {
		if !strings.Contains(out, want) {
			t.Errorf("rules get lacks %q:\n%s", want, out)
		}
	}
	e.ok("rules", "set", "-f", writeFile(t, "again.yml", out))
	again := rulesJSON(t, e)
	b1, _ := json.Marshal(first.Rules)
	b2, _ := json.Marshal(again.Rules)
	if !bytes.Equal(b1, b2) || again.Index != 1002 {
		t.Errorf("round trip through rules get:\n%s\n%s", b1, b2)
	}

	for _, c := range []struct{ args, want string }{
		{"--from tester_agent --to reviewer_agent",
			"blocked: tester_agent (role agent) → reviewer_agent (no role): Should go through developer first\n"},
		{"--from developer_agent --to reviewer_agent", "allowed: developer_agent (role agent) → reviewer_agent (no role)\n"},
		{"--from engineer_1 --to boss --to-role lead", "allowed: engineer_1 (role agent) → boss (role lead)\n"},
		{"--from master_agent --to tester_agent",
			"blocked: master_agent (role agent) → tester_agent (no role): tester_agent accepts messages only from nobody (allowed_interactions.tester_agent.can_receive_from)\n"},
	} {
		if out := e.ok(append([]string{"rules", "check"}, strings.Fields(c.args)...)...); out != c.want {
			t.Errorf("rules check %s:\n%q\nwant\n%q", c.args, out, c.want)
		}
	}
	var chk api.RulesCheck
	if err := json.Unmarshal([]byte(e.ok("rules", "check", "--json", "--from", "tester_agent", "--to", "reviewer_agent")), &chk); err != nil ||
		chk.Allowed || chk.Reason != "Should go through developer first" || chk.FromRole != "agent" {
		t.Errorf("rules check --json: %+v, %v", chk, err)
	}

	// JSON from stdin, and the preset.
	r := e.run(`{"forbidden": [{"from": "a", "to": "b", "reason": "no"}]}`, "rules", "set", "-f", "-")
	if r.err != nil || r.out != "rules set at index 1003: 0 agent entries, 1 forbidden, default allow\n" {
		t.Errorf("rules set -f -: %q %q %v", r.out, r.errOut, r.err)
	}
	if out := e.ok("rules", "set", "--preset", "hierarchical", "--orchestrator-role", "lead"); out !=
		"rules set at index 1004: preset hierarchical (orchestrator_role lead), 0 agent entries, 0 forbidden, default deny\n" {
		t.Errorf("rules set --preset: %q", out)
	}
	if out := e.ok("rules", "check", "--from", "w1", "--to", "w2"); out !=
		"blocked: w1 (role agent) → w2 (no role): w1 (role agent) may send only to role:lead (preset hierarchical)\n" {
		t.Errorf("under the preset: %q", out)
	}

	// Interrupting is its own rule: the preset lets lead message everyone,
	// but without an interrupt list only the default roles may interrupt.
	for _, c := range []struct{ args, want string }{
		{"--interrupt --from w1 --from-role lead", "blocked: w1 (role lead) may not interrupt: " + rules.DefaultInterruptReason + "\n"},
		{"--interrupt --from w1 --from-role supervisor", "allowed: w1 (role supervisor) may interrupt\n"},
		{"--interrupt --from w1", "blocked: w1 (no role) may not interrupt: " + rules.DefaultInterruptReason + "\n"},
	} {
		if out := e.ok(append([]string{"rules", "check"}, strings.Fields(c.args)...)...); out != c.want {
			t.Errorf("rules check %s:\n%q\nwant\n%q", c.args, out, c.want)
		}
	}
	var ichk api.RulesCheck
	if err := json.Unmarshal([]byte(e.ok("rules", "check", "--json", "--interrupt", "--from", "w1")), &ichk); err != nil ||
		!ichk.Interrupt || ichk.Allowed || ichk.Reason != rules.DefaultInterruptReason {
		t.Errorf("rules check --interrupt --json: %+v, %v", ichk, err)
	}

	if out := e.ok("rules", "clear"); out != "rules removed at index 1005: everyone may message everyone\n" {
		t.Errorf("rules clear: %q", out)
	}
	if out := e.ok("rules", "get"); !strings.HasPrefix(out, "no rules document: everyone may message everyone (removed at index 1005, ") {
		t.Errorf("rules get after clear: %q", out)
	}
	if st := rulesJSON(t, e); st.Rules != nil || st.Default != "allow" {
		t.Errorf("after clear: %+v", st)
	}
}

func TestRulesErrors(t *testing.T) {
	e := newTestEnv(t)
	e.ok("rules", "set", "--preset", "hierarchical")
	badGlob := writeFile(t, "glob.yaml", "agents:\n  - agent: a\n    can_send_to: [b]\n  - agent: c\n    can_send_to: []\n  - agent: d\n    can_send_to: [\"x[\"]\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rules", "set", "-f", badGlob}, "maosctl: " + badGlob + `: agents[2].can_send_to[0]: bad glob "x[": syntax error in pattern` + "\n"},
		// The decoder's own refusals are package rules' to test; here, that
		// the file's name picks the syntax and prefixes the error.
		{[]string{"rules", "set", "-f", writeFile(t, "unknown.json", `{"agents": [], "colour": "red"}`)}, "colour: unknown field"},
		{[]string{"rules", "set", "-f", writeFile(t, "broken.yaml", "agents: [\n")}, "broken.yaml: malformed YAML"},
		{[]string{"rules", "set", "-f", writeFile(t, "big.yaml", "# "+strings.Repeat("x", rules.MaxBytes)+"\n")}, "over the limit of 262144 bytes (256 KiB)"},
		{[]string{"rules", "set", "-f", filepath.Join(t.TempDir(), "missing.yaml")}, "read -f"},
		{[]string{"rules", "set"}, "missing -f FILE (or --preset hierarchical)"},
		{[]string{"rules", "set", "-f", badGlob, "--preset", "hierarchical"}, "give -f FILE or --preset, not both"},
		{[]string{"rules", "set", "--preset", "flat"}, `--preset flat: preset: unknown preset "flat"; known: hierarchical`},
		{[]string{"rules", "set", "--orchestrator-role", "lead", "-f", badGlob}, "--orchestrator-role goes with --preset"},
		{[]string{"rules", "check", "--from", "a"}, "missing required flag --to"},
		{[]string{"rules", "check", "--interrupt"}, "--from is required: give it, set $MAOS_AGENT_ID, or use an agent's token"},
		{[]string{"rules", "check", "--interrupt", "--from", "a", "--to", "b"}, "interrupt: asks who may interrupt any agent"},
		{[]string{"rules", "check", "--from", "A B", "--to", "b"}, "from: must match"},
		{[]string{"rules", "get", "extra"}, `unexpected argument "extra"`},
		{[]string{"rules", "frob"}, `unknown command "frob"`},
	} {
		r := e.run("", c.args...)
		if r.err == nil || !strings.HasPrefix(r.errOut, "maosctl: ") || !strings.Contains(r.errOut, c.want) {
			t.Errorf("%v: err=%v stderr=%q, want %q", c.args, r.err, r.errOut, c.want)
		}
		if ExitCode(r.err) != 1 {
			t.Errorf("%v: exit %d", c.args, ExitCode(r.err))
		}
	}
	if st := rulesJSON(t, e); st.Index != 1001 || st.Rules == nil || st.Rules.Preset != "hierarchical" {
		t.Errorf("the rules changed: %+v", st)
	}
}

var auditLineRE = regexp.MustCompile(`^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] `)

func TestAudit(t *testing.T) {
	e := newTestEnv(t)
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "orchestrator", Role: "orchestrator"})
	oversightSend(t, e, "msg-1", "orchestrator", "issues", "Triage new issue #123", "", "triage")
	oversightSend(t, e, "msg-2", "triage", "issues", "secret plans", "private", "orchestrator")
	e.ok("rules", "set", "-f", writeFile(t, "r.json", `{"forbidden": [{"from": "triage", "to": "orchestrator", "reason": "busy"}]}`))
	m := api.Message{ID: "msg-3", From: "triage", Channel: "issues", To: []string{"orchestrator"}, Content: api.Content{Text: "again"}}
	m.Normalize(time.Now())
	if _, err := e.svc.Apply(context.Background(), api.OpSend, api.SendCommand{Message: m}); err == nil {
		t.Fatal("the forbidden send went through")
	}

	out := e.ok("audit")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var rest []string
	for _, l := range lines {
		if !auditLineRE.MatchString(l) {
			t.Errorf("line %q does not start with [TIME]", l)
			continue
		}
		rest = append(rest, auditLineRE.ReplaceAllString(l, ""))
	}
	got := strings.Join(rest, "\n")
	for _, want := range []string{
		"[orchestrator→triage] REQUEST: Triage new issue #123",
		"[triage→orchestrator] REQUEST: (private)",
		"RULES: replaced: 0 agent entries, 1 forbidden, default allow",
		"[triage→orchestrator] BLOCKED: busy",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("audit lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret plans") {
		t.Errorf("a private title leaked:\n%s", out)
	}

	// --after, --limit and the hint, --json lines.
	if out := e.ok("audit", "--after", fmt.Sprint(len(lines)-1)); out != lines[len(lines)-1]+"\n" {
		t.Errorf("audit --after %d = %q, want the last line", len(lines)-1, out)
	}
	r := e.run("", "audit", "--limit", "2")
	if r.err != nil || r.out != lines[0]+"\n"+lines[1]+"\n" || r.errOut != "(more after event 2: maosctl audit --after 2)\n" {
		t.Errorf("audit --limit 2: out=%q err=%q %v", r.out, r.errOut, r.err)
	}
	out = e.ok("--json", "audit")
	dec := json.NewDecoder(strings.NewReader(out))
	n := 0
	for dec.More() {
		var ev api.AuditEntry
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("audit --json: %v\n%s", err, out)
		}
		n++
		if ev.Seq != uint64(n) || ev.Line != lines[n-1] {
			t.Errorf("event %d: seq %d line %q", n, ev.Seq, ev.Line)
		}
	}
	if n != len(lines) || strings.Count(out, "\n") != n {
		t.Errorf("audit --json: %d objects on %d lines, want %d", n, strings.Count(out, "\n"), len(lines))
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "-f", "--limit", "3"}, "--limit stops the listing; -f never stops"},
		{[]string{"audit", "--limit", "-1"}, "--limit -1"},
		{[]string{"audit", "-f", "--interval", "0s"}, "--interval 0s: must be positive"},
		{[]string{"audit", "x"}, `unexpected argument "x"`},
	} {
		r := e.run("", c.args...)
		if r.err == nil || !strings.Contains(r.errOut, c.want) {
			t.Errorf("%v: err=%v stderr=%q", c.args, r.err, r.errOut)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAuditFollow(t *testing.T) {
	e := newTestEnv(t)
	oversightSend(t, e, "msg-1", "codex", "general", "first", "", "claude")

	f := e.follow("audit", "-f", "--interval", "10ms")
	f.waitUntil(func() bool {
		return strings.Contains(f.out.String(), "CHAT") || strings.Contains(f.out.String(), "REQUEST: first")
	})
	oversightSend(t, e, "msg-2", "codex", "general", "second", "", "claude")
	f.waitFor("REQUEST: second")
	f.stop()
	got := f.out.String()
	if strings.Count(got, "REQUEST: first") != 1 || strings.Count(got, "REQUEST: second") != 1 {
		t.Errorf("events printed twice or not at all:\n%s", got)
	}
	if strings.Index(got, "REQUEST: first") > strings.Index(got, "REQUEST: second") {
		t.Errorf("events out of order:\n%s", got)
	}
}

func TestAuditFollowUnreachable(t *testing.T) {
	// No node at all: the first call fails, and -f says so (exit 1) rather
	// than retrying in silence.
	r := runApp("127.0.0.1:1", "", "audit", "-f", "--interval", "10ms")
	if r.err == nil || !strings.Contains(r.errOut, "cannot reach a maos node at http://127.0.0.1:1 (connection refused)") {
		t.Errorf("err=%v stderr=%q", r.err, r.errOut)
	}
}

var overviewLineRE = regexp.MustCompile(`^#(\d+) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (\S+): (\S+) → (\S+) \[request/normal\] (.*) \((msg-\d)\)$`)

func TestOverview(t *testing.T) {
	e := newTestEnv(t)
	for i, ch := range []string{"a", "b", "a", "b", "a"} {
		vis := ""
		if i == 1 {
			vis = "private"
		}
		oversightSend(t, e, fmt.Sprintf("msg-%d", i+1), "codex", ch, fmt.Sprintf("title %d", i+1), vis, "claude")
	}
	out := e.ok("overview")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("overview printed %d lines:\n%s", len(lines), out)
	}
	for i, l := range lines {
		m := overviewLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %q does not match %s", l, overviewLineRE)
			continue
		}
		title := fmt.Sprintf("title %d", i+1)
		if i == 1 {
			title = "(private)"
		}
		if m[1] != fmt.Sprint(1001+i) || m[3] != "codex" || m[4] != "claude" || m[5] != title || m[6] != fmt.Sprintf("msg-%d", i+1) {
			t.Errorf("line %d: %q", i, l)
		}
	}
	if strings.Contains(out, "content of") {
		t.Errorf("overview shows content:\n%s", out)
	}

	if out := e.ok("overview", "--channel", "a"); strings.Count(out, "\n") != 3 || strings.Contains(out, " b: ") {
		t.Errorf("overview --channel a:\n%s", out)
	}
	r := e.run("", "overview", "--channel", "a", "--limit", "2")
	if r.err != nil || strings.Count(r.out, "\n") != 2 || r.errOut != "(more after #1003: maosctl overview --channel a --after 1003, or --all)\n" {
		t.Errorf("overview --limit 2: out=%q err=%q %v", r.out, r.errOut, r.err)
	}
	if out := e.ok("overview", "--page-size", "1", "--all"); out != e.ok("overview") {
		t.Errorf("overview --all by pages of 1 differs:\n%s", out)
	}
	var entries []api.OverviewEntry
	if err := json.Unmarshal([]byte(e.ok("--json", "overview", "--channel", "b")), &entries); err != nil ||
		len(entries) != 2 || entries[0].ID != "msg-2" || !entries[0].Private || entries[1].Title != "title 4" {
		t.Errorf("overview --json: %+v, %v", entries, err)
	}
	if out := e.ok("--json", "overview", "--channel", "none"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty overview --json = %q", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"overview", "--channel", "Bad Name"}, `channel: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Bad Name")`},
		{[]string{"overview", "--page-size", "5000"}, "--page-size 5000: must be 1..1000"},
		{[]string{"overview", "--limit", "2", "--all"}, "--all and --limit 2: give one of them"},
		{[]string{"overview", "--limit", "0"}, "--limit 0: want a positive number"},
	} {
		r := e.run("", c.args...)
		if r.err == nil || !strings.HasPrefix(r.errOut, "maosctl: ") || !strings.Contains(r.errOut, c.want) {
			t.Errorf("%v: err=%v stderr=%q", c.args, r.err, r.errOut)
		}
	}
}

func TestOversightHelp(t *testing.T) {
	e := newTestEnv(t)
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"rules", "--help"}, []string{"maosctl rules set -f communication_rules.yaml", "forbidden", "check"}},
		{[]string{"rules", "set", "--help"}, []string{"maosctl rules set --preset hierarchical", "agents[2].can_send_to[0]", "256 KiB"}},
		{[]string{"rules", "check", "--help"}, []string{"--from", "--to-role", "exit status is 0"}},
		{[]string{"audit", "--help"}, []string{"[orchestrator→triage] TASK_ASSIGN: Triage new issue #123", "--follow", "Ctrl-C"}},
		{[]string{"overview", "--help"}, []string{"#SEQ TIME CHANNEL: FROM → TO [TYPE/PRIORITY] TITLE (ID)", "--channel", "maosctl get"}},
	} {
		out := e.ok(c.args...)
		for _, w := range c.wants {
			if !strings.Contains(out, w) {
				t.Errorf("%v lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}
