package maosctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func writeGatePolicy(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gates.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const pushEvent = `{"hook_event_name":"PreToolUse","session_id":"sess-1","cwd":"/repo","tool_name":"Bash",` +
	`"tool_input":{"command":"git push origin main","description":"Push the branch"},"tool_use_id":"toolu_01"}`

func denyAnswer(reason string) string { return denyAnswerIn("claude-code", reason) }

// denyAnswerIn is the gate's deny with reason as dialect prints it.
func denyAnswerIn(dialect, reason string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode("maos gate: " + reason) // a string always encodes
	quoted := strings.TrimSuffix(b.String(), "\n")
	if dialect == "gemini" {
		return `{"decision":"deny","reason":` + quoted + `}` + "\n"
	}
	return `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":` +
		quoted + `}}` + "\n"
}

// The hook's command line end to end: a gated call files the approval of
// the event's exact call and prints Claude Code's answer when it is
// decided; Codex gets nothing for a plain allow and the same deny.
func TestHookGateDecides(t *testing.T) {
	e, _ := newGateEnv(t)
	policy := writeGatePolicy(t, examplePolicy)

	run := func(dialect, stdin string, args ...string) <-chan runResult {
		ch := make(chan runResult, 1)
		go func() { ch <- e.run(stdin, append([]string{"hook", dialect}, args...)...) }()
		return ch
	}
	done := run("claude-code", pushEvent, "--agent", "claude", "--gate", policy)
	a := e.approvalsFiled(1)[0]
	want := `{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin main","description":"Push the branch"},"tool_name":"Bash"}`
	if string(a.Action) != want || a.From != "claude" || strings.Join(a.Approvers, ",") != "alice,role:lead" ||
		a.ID != gateApprovalID(gateCall{Agent: "claude", SessionID: "sess-1", ToolUseID: "toolu_01"}, a.ActionHash) {
		t.Errorf("approval filed: %+v", a)
	}
	e.decideApproval(a.ID, "alice", api.DecisionApprove, "", nil)
	r := <-done
	if r.err != nil || r.errOut != "" ||
		r.out != `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice (approval `+a.ID+`)"}}`+"\n" {
		t.Errorf("approved: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}

	// Codex, the policy from $MAOS_GATE_FILE, another call: an allow
	// prints nothing, a reject the same deny as for Claude Code.
	t.Setenv(envGateFile, policy)
	for i, decision := range []string{api.DecisionApprove, api.DecisionReject} {
		ev := strings.Replace(pushEvent, "toolu_01", "toolu_1"+string(rune('0'+i)), 1)
		done = run("codex", ev, "--agent", "claude")
		id := e.approvalsFiled(2 + i)[1+i].ID
		e.decideApproval(id, "carol", decision, "", nil)
		want := ""
		if decision == api.DecisionReject {
			want = denyAnswer("rejected by carol (approval " + id + "). Do not retry this call; ask the approver or change the plan")
		}
		if r := <-done; r.err != nil || r.errOut != "" || r.out != want {
			t.Errorf("codex %s: err=%v out=%q stderr=%q, want %q", decision, r.err, r.out, r.errOut, want)
		}
	}

	// A call no gate matches, and every call with no policy: nothing, and
	// nothing is asked of the node.
	t.Setenv(envGateFile, "")
	for _, args := range [][]string{
		{"--agent", "claude", "--gate", policy},
		{"--agent", "claude"},
		{},
	} {
		for _, ev := range []string{
			`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"}}`,
			`{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/repo/git push"}}`,
			pushEvent,
		} {
			if ev == pushEvent && len(args) > 2 {
				continue
			}
			if r := <-run("claude-code", ev, args...); r.err != nil || r.out != "" || r.errOut != "" {
				t.Errorf("%v %s: err=%v out=%q stderr=%q", args, ev, r.err, r.out, r.errOut)
			}
		}
	}
	e.approvalsFiled(3)
}

// PreToolUse fails closed: what the hook cannot check denies the call,
// saying why, on stdout (the coding agent's answer) and as one line on
// stderr, and the hook still exits 0.
func TestHookGateFailsClosed(t *testing.T) {
	e := newTestEnv(t)
	policy := writeGatePolicy(t, examplePolicy)
	bad := writeGatePolicy(t, "gates: [{tool: Bash, match: 'git push', approvers: [alice], quorum: 2}]")
	missing := filepath.Join(t.TempDir(), "gates.yaml")
	const every = "; until it is fixed every call this hook sees is denied, so that nothing gated runs unreviewed"
	const needs = "this Bash call needs an approval (gate 1 (tool Bash, match git push|rm -rf)), which could not be requested: "
	for _, tc := range []struct {
		name   string
		addr   string
		stdin  string
		args   []string
		reason string
	}{
		{"bad policy", e.addr, pushEvent, []string{"--agent", "claude", "--gate", bad},
			"gate policy " + bad + ": gates[0].quorum: 2 of 1 listed agents can never be reached: want at most 1, or list a role" + every},
		{"bad policy, ungated call", e.addr, `{"hook_event_name":"PreToolUse","tool_name":"Read"}`, []string{"--agent", "claude", "--gate", bad},
			"gate policy " + bad + ": gates[0].quorum: 2 of 1 listed agents can never be reached: want at most 1, or list a role" + every},
		{"missing policy", e.addr, pushEvent, []string{"--agent", "claude", "--gate", missing},
			"gate policy: open " + missing + ": no such file or directory" + every},
		{"no agent", e.addr, pushEvent, []string{"--gate", policy},
			needs + "--agent is required: give it, set $MAOS_AGENT_ID, or use an agent's token (see 'maosctl hook DIALECT --help')"},
		{"malformed address", "127.0.0.1:notaport", pushEvent, []string{"--agent", "claude", "--gate", policy},
			needs + `--addr (or $MAOS_ADDR): "127.0.0.1:notaport": port must be 1..65535; want HOST:PORT (e.g. 127.0.0.1:7070) or http(s)://HOST:PORT`},
	} {
		for _, dialect := range []string{"claude-code", "codex", "gemini"} {
			reason := strings.ReplaceAll(tc.reason, "DIALECT", dialect)
			event := hookDialects[dialect].eventNamed(eventToolCall)
			stdin := strings.Replace(tc.stdin, `"PreToolUse"`, `"`+event+`"`, 1)
			r := runApp(tc.addr, stdin, append([]string{"hook", dialect}, tc.args...)...)
			if want := denyAnswerIn(dialect, reason); r.err != nil || r.out != want || r.errOut != "maosctl: hook "+event+": "+reason+"\n" {
				t.Errorf("%s, %s: err=%v\n out=%q\nwant %q\nstderr=%q", tc.name, dialect, r.err, r.out, want, r.errOut)
			}
		}
	}
	if _, n := proposedApproval[api.ApprovalRequestCommand](e, api.OpApprovalRequest); n != 0 {
		t.Errorf("%d approvals requested", n)
	}

	// A node that does not answer: denied, naming it in the words every
	// command uses for it.
	away := closedAddr(t)
	r := runApp(away, pushEvent, "hook", "codex", "--agent", "claude", "--gate", policy)
	reason := regexp.QuoteMeta(needs+"cannot reach a maos node at http://"+away+" (") + `.*connection refused\): ` +
		regexp.QuoteMeta("is maosd running there? Set --addr or MAOS_ADDR to a node's API address")
	var out hookPermissionOutput
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.err != nil ||
		!regexp.MustCompile(`^maos gate: `+reason+`$`).MatchString(out.HookSpecificOutput.PermissionDecisionReason) ||
		out.HookSpecificOutput.PermissionDecision != "deny" || !regexp.MustCompile(`^maosctl: hook PreToolUse: `+reason+"\n$").MatchString(r.errOut) {
		t.Errorf("unreachable: err=%v %v\n out=%q\nstderr=%q", r.err, err, r.out, r.errOut)
	}
}

// Gemini CLI's BeforeTool end to end: a run_shell_command call a gate
// matches waits for its approval and gets Gemini's decision/reason
// answer; an approved modify comes back as hookSpecificOutput.tool_input.
// Gemini sends no tool-use id, so each call files its own approval.
func TestHookGateGemini(t *testing.T) {
	e, _ := newGateEnv(t)
	policy := writeGatePolicy(t, "gates:\n  - tool: run_shell_command\n    match: 'git push'\n    approvers: [alice]\n")
	const ev = `{"hook_event_name":"BeforeTool","session_id":"g-1","cwd":"/repo","tool_name":"run_shell_command",` +
		`"tool_input":{"command":"git push origin main"},"timestamp":"2026-01-01T00:00:00Z"}`
	run := func() <-chan runResult {
		ch := make(chan runResult, 1)
		go func() { ch <- e.run(ev, "hook", "gemini", "--agent", "claude", "--gate", policy) }()
		return ch
	}
	done := run()
	a := e.approvalsFiled(1)[0]
	if want := `{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin main"},"tool_name":"run_shell_command"}`; string(a.Action) != want || a.Title != "run_shell_command: git push origin main" {
		t.Errorf("approval filed: %+v", a)
	}
	e.decideApproval(a.ID, "alice", api.DecisionApprove, "", nil)
	if r := <-done; r.err != nil || r.errOut != "" || r.out != `{"decision":"allow","reason":"maos gate: approved by alice (approval `+a.ID+`)"}`+"\n" {
		t.Errorf("approved: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}

	done = run()
	b := e.approvalsFiled(2)[1]
	if b.ID == a.ID {
		t.Fatalf("a second call reused approval %s", a.ID)
	}
	changed := json.RawMessage(`{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin HEAD:review"},"tool_name":"run_shell_command"}`)
	e.decideApproval(b.ID, "alice", api.DecisionModify, "push for review", changed)
	e.decideApproval(b.ID, "alice", api.DecisionApprove, "", nil)
	want := `{"decision":"allow","reason":"maos gate: approved by alice with changes by alice: push for review (approval ` + b.ID + `)",` +
		`"hookSpecificOutput":{"hookEventName":"BeforeTool","tool_input":{"command":"git push origin HEAD:review"}}}` + "\n"
	if r := <-done; r.err != nil || r.errOut != "" || r.out != want {
		t.Errorf("modified:\n got %q\nwant %q (err %v, stderr %q)", r.out, want, r.err, r.errOut)
	}
}
