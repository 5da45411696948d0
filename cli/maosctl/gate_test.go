package maosctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// examplePolicy is docs/TASKS.md's example gate policy.
const examplePolicy = `gates:
  - tool: Bash
    match: 'git push|rm -rf'
    approvers: [alice, role:lead]
    quorum: 1
    timeout: 10m
  - tool: Bash
    match: '(kubectl|helm) .*(apply|upgrade|delete)|terraform apply|make deploy'
    approvers: [alice, bob, carol]
    quorum: 2
    timeout: 20m
    expires: 4h
  - tool: Edit|Write
    match: '"file_path":"[^"]*/\.github/workflows/'
    approvers: [role:lead]
`

func TestGatePolicyParse(t *testing.T) {
	p, err := parseGatePolicy([]byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Gates) != 3 {
		t.Fatalf("%d gates", len(p.Gates))
	}
	g := p.Gates[0]
	if g.Index != 0 || g.ToolExpr != "Bash" || g.MatchExpr != "git push|rm -rf" || strings.Join(g.Approvers, ",") != "alice,role:lead" ||
		g.Quorum != 1 || g.Timeout != 10*time.Minute || g.Expires != api.DefaultApprovalTimeout {
		t.Errorf("gate 0: %+v", g)
	}
	if g := p.Gates[1]; g.Quorum != 2 || g.Timeout != 20*time.Minute || g.Expires != 4*time.Hour {
		t.Errorf("gate 1: %+v", g)
	}
	// Defaults: quorum 1, timeout 5m, expires the longer of 1h and timeout.
	if g := p.Gates[2]; g.Quorum != 1 || g.Timeout != gateDefaultTimeout || g.Expires != time.Hour || g.match == nil {
		t.Errorf("gate 2: %+v", g)
	}
	p, err = parseGatePolicy([]byte("gates: [{tool: Bash, approvers: [alice], timeout: 2h}]"))
	if err != nil || p.Gates[0].Expires != 2*time.Hour || p.Gates[0].match != nil {
		t.Errorf("expires follows a long timeout: %+v %v", p, err)
	}
}

// Every mistake in a policy is refused, naming the gate's field and what
// is wanted; the approvers, quorum and expiry by the cluster's own rules.
func TestGatePolicyRefusals(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"", "empty: want gates: [{tool, match, approvers, quorum, timeout, expires}]"},
		{"gates: []", "gates: none: want at least one {tool, match, approvers}"},
		{"gate: []", "field gate not found (want gates)"},
		{"gates: [{tool: Bash, approver: [alice]}]", "field approver not found (want tool, match, approvers, quorum, timeout, expires)"},
		{"gates: {tool: Bash}", "cannot unmarshal !!map into a list of gates"},
		{"gates: [Bash]", "cannot unmarshal !!str `Bash` into a gate {tool, match, approvers, ...}"},
		{"[1]", "cannot unmarshal !!seq into a policy {gates: [...]}"},
		{"gates: [{tool: Bash, approvers: [alice]", "yaml: line 1: did not find expected ',' or '}'"},
		{"gates: [{match: x, approvers: [alice]}]", "gates[0].tool: required: the tool's name, a regexp (e.g. Bash, or Edit|Write)"},
		{"gates: [{tool: 'Ba(sh', approvers: [alice]}]", `gates[0].tool: "Ba(sh": error parsing regexp: missing closing ): ` + "`^(?:Ba(sh)$`"},
		{"gates: [{tool: Bash, approvers: [alice]}, {tool: Bash, match: 'a[', approvers: [alice]}]", `gates[1].match: "a[": error parsing regexp: missing closing ]: ` + "`[`"},
		{"gates: [{tool: Bash}]", "gates[0].approvers: required: agent ids or role:NAME entries"},
		{"gates: [{tool: Bash, approvers: [Alice]}]", `gates[0].approvers[0]: "Alice": want an agent id or role:NAME`},
		{"gates: [{tool: Bash, approvers: [alice, alice]}]", `gates[0].approvers[1]: "alice" is listed twice`},
		{"gates: [{tool: Bash, approvers: [alice], quorum: 2}]", "gates[0].quorum: 2 of 1 listed agents can never be reached: want at most 1, or list a role"},
		{"gates: [{tool: Bash, approvers: [alice], quorum: -1}]", "gates[0].quorum: -1: want 1..64"},
		{"gates: [{tool: Bash, approvers: [alice], timeout: soon}]", `gates[0].timeout: "soon": want a positive duration such as 90s or 10m`},
		{"gates: [{tool: Bash, approvers: [alice], timeout: -1m}]", `gates[0].timeout: "-1m": want a positive duration such as 90s or 10m`},
		{"gates: [{tool: Bash, approvers: [alice], expires: 0s}]", `gates[0].expires: "0s": want a positive duration such as 1h or 24h`},
		{"gates: [{tool: Bash, approvers: [alice], timeout: 10m, expires: 5m}]", "gates[0].expires: 5m0s is shorter than timeout 10m0s: the approval would expire while the hook waits"},
		{"gates: [{tool: Bash, approvers: [alice], expires: 800h}]", "gates[0].expires: 800h0m0s: want 1s..720h0m0s"},
	} {
		_, err := parseGatePolicy([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
}

func TestGatePolicyLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gates.yaml")
	if err := os.WriteFile(path, []byte(examplePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := loadGatePolicy(path)
	if err != nil || p.File != path || len(p.Gates) != 3 {
		t.Fatalf("load: %+v %v", p, err)
	}
	// The file is named in every error.
	if _, err := loadGatePolicy(filepath.Join(dir, "missing.yaml")); err == nil ||
		err.Error() != "gate policy: open "+filepath.Join(dir, "missing.yaml")+": no such file or directory" {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("gates: [{tool: Bash}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadGatePolicy(bad); err == nil || err.Error() != "gate policy "+bad+": gates[0].approvers: required: agent ids or role:NAME entries" {
		t.Errorf("bad file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", gateMaxPolicyBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadGatePolicy(big); err == nil || !strings.Contains(err.Error(), "over 1048576 bytes") {
		t.Errorf("big file: %v", err)
	}
}

// The first gate that matches applies; tool is anchored, match is not and
// runs over the input's canonical JSON.
func TestGatePolicyMatch(t *testing.T) {
	p, err := parseGatePolicy([]byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, input string
		want        int // gate index, -1 for none
	}{
		{"Bash", `{"command":"git push origin main"}`, 0},
		{"Bash", `{"command": "rm -rf build", "description": "clean"}`, 0},
		{"Bash", `{"command":"git status"}`, -1},
		{"Bash", `{"command":"kubectl -n prod apply -f app.yaml"}`, 1},
		{"Bash", `{"command":"terraform apply && git push"}`, 0}, // first match wins
		{"Bash", `{"command":"terraform plan"}`, -1},
		{"BashOutput", `{"command":"git push"}`, -1}, // tool is anchored
		{"MyBash", `{"command":"git push"}`, -1},
		{"Edit", `{"file_path":"/repo/.github/workflows/ci.yml","old_string":"a","new_string":"b"}`, 2},
		// Canonical JSON: spacing and key order do not hide a match.
		{"Write", "{\"content\": \"x\",\n  \"file_path\" : \"/repo/.github/workflows/ci.yml\"}", 2},
		{"Write", `{"file_path":"/repo/README.md","content":"git push"}`, -1},
		{"Read", `{"file_path":"/repo/.github/workflows/ci.yml"}`, -1},
		{"Bash", ``, -1},
	} {
		g := p.match(tc.tool, json.RawMessage(tc.input))
		got := -1
		if g != nil {
			got = g.Index
		}
		if got != tc.want {
			t.Errorf("%s %s: gate %d, want %d", tc.tool, tc.input, got, tc.want)
		}
	}
	// A gate without match takes every call of its tools.
	p, err = parseGatePolicy([]byte("gates: [{tool: 'mcp__.*', approvers: [alice]}]"))
	if err != nil {
		t.Fatal(err)
	}
	if p.match("mcp__github__merge_pull_request", json.RawMessage(`{}`)) == nil || p.match("Bash", json.RawMessage(`{}`)) != nil {
		t.Errorf("a gate without match")
	}
	if got := gateInputText(json.RawMessage(`{"b": 1, "a": "<x>"}`)); got != `{"a":"<x>","b":1}` {
		t.Errorf("input text %q", got)
	}
	if got := gateInputText(nil); got != "null" {
		t.Errorf("no input: %q", got)
	}
	if got := p.Gates[0].describe(); got != "gate 1 (tool mcp__.*)" {
		t.Errorf("describe %q", got)
	}
}

// docs/TASKS.md's gate policy is examplePolicy, as these tests read it, and the
// PreToolUse hook timeout it shows for it is above its longest gate
// timeout plus the hook's last read, so Claude Code never stops the hook
// before it answers.
func TestGatePolicyDoc(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "TASKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	if !strings.Contains(text, "```yaml\n"+examplePolicy+"```\n") {
		t.Errorf("docs/TASKS.md has no yaml block holding examplePolicy exactly")
	}
	p, err := parseGatePolicy([]byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	var longest time.Duration
	for _, g := range p.Gates {
		longest = max(longest, g.Timeout)
	}
	m := regexp.MustCompile(`"PreToolUse": \[\{"matcher": "[^"]*", "hooks": \[\{"type": "command", "timeout": (\d+),\s+"command": "maosctl hook claude-code [^"]*--gate `).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("docs/TASKS.md shows no PreToolUse hook with a timeout and --gate")
	}
	secs, _ := strconv.Atoi(m[1])
	if hook := time.Duration(secs) * time.Second; hook <= longest+hookDefaultMaxTime {
		t.Errorf("docs/TASKS.md's hook timeout %s is not above the longest gate timeout %s plus the last read's %s", hook, longest, hookDefaultMaxTime)
	}
}
