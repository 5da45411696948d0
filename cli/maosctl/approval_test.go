package maosctl

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
)

// requestApproval runs approval request with args and returns its result.
func (e *testEnv) requestApproval(args ...string) fsm.ApprovalResult {
	e.t.Helper()
	var res fsm.ApprovalResult
	if err := json.Unmarshal([]byte(e.ok(append([]string{"--json", "approval", "request"}, args...)...)), &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

const deployAction = `{"cmd":"deploy","version":"2.3"}`

func TestApprovalRequestListShow(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	r := e.run(`{ "version": "2.3", "cmd": "deploy" }`, "approval", "request", "--from", "lead", "--approver", "alice,role:reviewer",
		"--approver", "carol", "--quorum", "2", "--title", "deploy v2.3", "--action", "-", "--rationale", "tests green",
		"--needed-for", "prod deploy", "--confidence", "0.9", "--priority", "high", "--timeout", "4h", "--on-timeout", "escalate",
		"--option", "approve,reject")
	if r.err != nil {
		t.Fatalf("request: %v %s", r.err, r.errOut)
	}
	hash, _ := fsm.ActionHash(json.RawMessage(deployAction))
	m := regexp.MustCompile(`^requested (appr-\d{8}-\d{6}-lead-[0-9a-f]{8}): pending, 0 of 2 approvals, action (sha256:[0-9a-f]{64}) \(seq (\d+)\)\n$`).FindStringSubmatch(r.out)
	if m == nil || m[2] != hash {
		t.Fatalf("request printed %q, want the hash %s", r.out, hash)
	}
	id := m[1]
	got, err := e.svc.State().Approval(id)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Action) != deployAction || got.Quorum != 2 || strings.Join(got.Approvers, ",") != "alice,role:reviewer,carol" ||
		got.TimeoutSeconds != 4*3600 || got.OnTimeout != fsm.OnTimeoutEscalate || got.Priority != fsm.PriorityHigh ||
		got.ApprovalNeededFor != "prod deploy" || got.Rationale != "tests green" || *got.Confidence != 0.9 ||
		strings.Join(got.Options, ",") != "approve,reject" || got.From != "lead" {
		t.Errorf("stored %+v", got)
	}
	other := e.requestApproval("--from", "bob", "--approver", "alice", "--title", "rm -rf build", "--action", `{"cmd":"rm -rf build"}`, "--id", "appr-rm")
	if other.ID != "appr-rm" {
		t.Errorf("--id: %+v", other)
	}

	out := e.ok("approval", "list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+STATE\s+APPROVALS\s+FROM\s+APPROVERS\s+TITLE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+id+`\s+pending\s+0/2\s+lead\s+alice,role:reviewer,carol\s+deploy v2.3$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^appr-rm\s+pending\s+0/1\s+bob\s+alice\s+rm -rf build$`).MatchString(lines[2]) {
		t.Errorf("approval list printed:\n%s", out)
	}
	if out := e.ok("approval", "list", "--from", "bob"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "appr-rm") {
		t.Errorf("list --from bob:\n%s", out)
	}
	if out := e.ok("approval", "list", "--limit", "1"); !strings.Contains(out, "more: maosctl approval list --after "+m[3]) {
		t.Errorf("list --limit 1:\n%s", out)
	}
	if out := e.ok("approval", "list", "--state", "approved"); out != "no approvals\n" {
		t.Errorf("list --state approved: %q", out)
	}
	var page fsm.ApprovalPage
	if err := json.Unmarshal([]byte(e.ok("approval", "list", "--approver", "bob", "--json")), &page); err != nil || len(page.Approvals) != 1 || page.Approvals[0].ID != id {
		t.Errorf("list --json --approver bob (by role): %+v, %v", page, err)
	}

	out = e.ok("approval", "show", id)
	for _, want := range []string{id + " pending (0 of 2 approvals, until ", "title: deploy v2.3",
		"from: lead → alice, role:reviewer, carol, channel general, priority high", "needed for: prod deploy", "rationale: tests green",
		"confidence: 0.9", "options: approve, reject", "timeout: 4h0m0s, then escalate",
		"action " + hash + ":\n  {\n    \"cmd\": \"deploy\",\n    \"version\": \"2.3\"\n  }\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	var one fsm.Approval
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "show", id)), &one); err != nil || one.ID != id || one.ActionHash != hash {
		t.Errorf("show --json: %+v, %v", one, err)
	}

	e.fail([]string{"approval", "request", "--from", "lead", "--title", "x", "--action", "1"}, "missing required flag --approver")
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x"}, "missing required flag --action")
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x", "--action", "{cmd:1}"}, "--action: not one JSON value")
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x", "--action", "1", "--quorum", "0"}, "--quorum 0")
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x", "--action", "1", "--quorum", "2"}, "quorum")
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x", "--action", "1", "--timeout", "1ms"}, "timeout")
	e.fail([]string{"approval", "show"}, "missing ID")
	e.fail([]string{"approval", "show", "appr-ghost"}, "appr-ghost")
	e.fail([]string{"approval", "list", "--state", "done"}, "state")
}

// approve, reject and modify show the action and its hash, then decide
// on that hash; a changed action, a second decision and an approver it
// does not list are refused; cancel by the requester only.
func TestApprovalDecide(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	res := e.requestApproval("--from", "lead", "--approver", "alice,bob,carol", "--quorum", "2", "--title", "deploy v2.3", "--action", deployAction, "--id", "appr-d")
	out := e.ok("approval", "approve", "appr-d", "--approver", "alice", "--comment", "checked")
	want := "appr-d pending (0 of 2 approvals, until "
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "): deploy v2.3\naction "+res.ActionHash+":\n  {\n") ||
		!strings.HasSuffix(out, "}\nappr-d pending: 1 of 2 approvals\n") {
		t.Errorf("approve printed:\n%s", out)
	}
	e.fail([]string{"approval", "approve", "appr-d", "--approver", "alice"}, "409")
	e.fail([]string{"approval", "approve", "appr-d", "--approver", "dave"}, "403")
	e.fail([]string{"approval", "approve", "appr-d"}, "missing required flag --approver")
	stale, _ := fsm.ActionHash(json.RawMessage(`{"cmd":"deploy","version":"2.2"}`))
	e.fail([]string{"approval", "approve", "appr-d", "--approver", "bob", "--hash", stale}, "the action changed to "+res.ActionHash, "409")

	// modify: the new action from stdin; alice's approval is void.
	r := e.run(`{"cmd":"deploy","version":"2.3","canary":true}`, "approval", "modify", "appr-d", "--approver", "bob", "--action", "-", "--comment", "canary first")
	newHash, _ := fsm.ActionHash(json.RawMessage(`{"canary":true,"cmd":"deploy","version":"2.3"}`))
	if r.err != nil || !strings.HasSuffix(r.out, "appr-d pending: the action is now "+newHash+"; the approvals before it are void, 0 of 2\n") {
		t.Fatalf("modify: %v %q %q", r.err, r.out, r.errOut)
	}
	e.fail([]string{"approval", "modify", "appr-d", "--approver", "bob"}, "missing required flag --action")
	out = e.ok("approval", "show", "appr-d")
	if !regexp.MustCompile(`(?m)^  \S+Z\s+#\d+\s+alice\s+approve \(void: the action changed\)\s+on sha256:[0-9a-f]{12}\s+checked$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  \S+Z\s+#\d+\s+bob\s+modify\s+on sha256:[0-9a-f]{12}\s+canary first new action: \{"canary":true`).MatchString(out) {
		t.Errorf("show after the modify:\n%s", out)
	}
	// With the hash read earlier (the old one), alice's approval is refused.
	e.fail([]string{"approval", "approve", "appr-d", "--approver", "alice", "--hash", res.ActionHash}, "409")
	e.ok("approval", "approve", "appr-d", "--approver", "alice")
	var a fsm.Approval
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "approve", "appr-d", "--approver", "carol")), &a); err != nil ||
		a.State != fsm.ApprovalApproved || len(a.Decisions) != 4 {
		t.Errorf("approve --json: %+v, %v", a, err)
	}

	// reject, cancel.
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-r")
	if out := e.ok("approval", "reject", "appr-r", "--approver", "alice", "--comment", "no"); !strings.HasSuffix(out, "appr-r rejected\n") {
		t.Errorf("reject printed %q", out)
	}
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-c")
	e.fail([]string{"approval", "cancel", "appr-c", "--from", "alice"}, "403")
	if out := e.ok("approval", "cancel", "appr-c", "--from", "lead", "--reason", "not needed"); out != "cancelled appr-c\n" {
		t.Errorf("cancel printed %q", out)
	}
	e.fail([]string{"approval", "cancel", "appr-r", "--from", "lead"}, "rejected", "409")
}

// approval wait: 0 approved, 1 rejected or cancelled, 2 expired or timed
// out, printing the decisions; a decision made while it waits is seen on
// the stream.
func TestApprovalWait(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	wait := func(args ...string) runResult {
		t.Helper()
		return e.run("", append([]string{"approval", "wait"}, args...)...)
	}
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-no")
	e.ok("approval", "reject", "appr-no", "--approver", "alice", "--comment", "not now")
	r := wait("appr-no")
	if ExitCode(r.err) != 1 || !regexp.MustCompile(`^appr-no rejected by alice\n  \S+Z alice reject on sha256:[0-9a-f]{12}: not now\n$`).MatchString(r.out) || r.errOut != "" {
		t.Errorf("wait on a rejected approval: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-gone")
	e.ok("approval", "cancel", "appr-gone", "--from", "lead")
	if r := wait("appr-gone", "--json"); ExitCode(r.err) != 1 || !strings.Contains(r.out, `"state": "cancelled"`) {
		t.Errorf("wait --json on a cancelled approval: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}

	e.requestApproval("--from", "lead", "--approver", "alice,bob", "--quorum", "2", "--title", "t", "--action", "1", "--id", "appr-slow")
	e.ok("approval", "approve", "appr-slow", "--approver", "alice")
	start := time.Now()
	if r := wait("appr-slow", "--timeout", "300ms"); ExitCode(r.err) != 2 ||
		!strings.HasPrefix(r.out, "appr-slow still pending after 300ms (1 of 2 approvals)\n  ") || r.errOut != "" {
		t.Errorf("wait that timed out: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("the 300ms wait took %s", d)
	}

	// Live: bob approves while wait follows the stream.
	done := make(chan runResult, 1)
	go func() { done <- wait("appr-slow", "--timeout", "20s") }()
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("wait returned before the decision: %v %q", r.err, r.out)
	case <-time.After(100 * time.Millisecond):
	}
	e.ok("approval", "approve", "appr-slow", "--approver", "bob")
	select {
	case r := <-done:
		if r.err != nil || !strings.HasPrefix(r.out, "appr-slow approved by alice, bob\n") || strings.Count(r.out, "\n") != 3 {
			t.Errorf("live wait: %v %q %q", r.err, r.out, r.errOut)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("wait did not see the approval decided")
	}

	e.fail([]string{"approval", "wait", "appr-ghost"}, "appr-ghost")
	e.fail([]string{"approval", "wait", "appr-slow", "--timeout", "-1s"}, "--timeout -1s: want a positive duration")
}

// The status line counts the approvals waiting for the agent's decision.
func TestStatusLineApprovals(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1")
	e.requestApproval("--from", "lead", "--approver", "role:reviewer", "--title", "t", "--action", "2")
	if out := e.ok("status-line", "--agent", "alice"); !strings.Contains(out, " | 🔐 2 to approve") {
		t.Errorf("status line %q", out)
	}
	if out := e.ok("status-line", "--agent", "carol"); strings.Contains(out, "🔐") {
		t.Errorf("status line of an agent with nothing to approve: %q", out)
	}
	var st status
	if err := json.Unmarshal([]byte(e.ok("status-line", "--agent", "bob", "--json")), &st); err != nil || st.ToApprove != 1 {
		t.Errorf("status --json %+v, %v", st, err)
	}
}

// The digest starts with the approvals waiting for the agent's decision,
// within its cap; with them alone it is that line.
func TestDigestApprovals(t *testing.T) {
	line := "2 approvals wait for alice's decision: maosctl approval list --approver alice --state pending; " +
		"approve: maosctl approval approve ID --approver alice; reject: maosctl approval reject ID --approver alice " +
		"(each shows the action and its hash first)\n"
	if got := digest(digestInput{Agent: "alice", ToApprove: 2}, DigestMaxChars); got != line {
		t.Errorf("approvals alone:\n%q\nwant\n%q", got, line)
	}
	one := digest(digestInput{Agent: "alice", ToApprove: 1}, DigestMaxChars)
	if !strings.HasPrefix(one, "1 approval waits for alice's decision: ") {
		t.Errorf("one approval: %q", one)
	}
	msgs := []fsm.Message{{ID: "m1", Seq: 1, From: "bob", Priority: "normal", Title: "please review"}}
	got := digest(digestInput{Agent: "alice", Messages: msgs, TotalUnread: 1, ToApprove: 2}, DigestMaxChars)
	if !strings.HasPrefix(got, line+"1 unread message for alice, urgent first") || !strings.Contains(got, "- m1 from bob [normal] please review\n") {
		t.Errorf("with mail:\n%s", got)
	}
	if capped := digest(digestInput{Agent: "alice", Messages: msgs, TotalUnread: 1, ToApprove: 2}, len(got)-1); len(capped) > len(got)-1 ||
		!strings.HasPrefix(capped, line) || strings.Contains(capped, "- m1 ") {
		t.Errorf("one under the cap:\n%s", capped)
	}
	if capped := digest(digestInput{Agent: "alice", ToApprove: 2}, 20); len(capped) > 20 {
		t.Errorf("a cap under the line: %q", capped)
	}
}

// The hook's digest tells the agent the approvals waiting for it, even
// without mail, and each command it prints runs as printed.
func TestHookApprovals(t *testing.T) {
	e := newHookEnv(t)
	e.ok("agents", "register", "bob", "--role", "reviewer")
	e.requestApproval("--from", "bob", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-a")
	e.requestApproval("--from", "bob", "--approver", "role:reviewer", "--title", "t", "--action", "2", "--id", "appr-r")
	// The requests are mail too: read them, so the approvals alone remain.
	e.ok("read-mark", "--agent", "alice", "--upto", "1000000")
	var out struct {
		HookSpecificOutput struct{ AdditionalContext string } `json:"hookSpecificOutput"`
	}
	r := e.hook("claude-code", `{"hook_event_name":"UserPromptSubmit"}`)
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.err != nil {
		t.Fatalf("hook: %v %v %q stderr %q", err, r.err, r.out, r.errOut)
	}
	text := out.HookSpecificOutput.AdditionalContext
	if !strings.Contains(text, "\n2 approvals wait for alice's decision: ") {
		t.Fatalf("the digest does not name the approvals:\n%s", text)
	}
	ran := map[string]bool{}
	for _, cmd := range printedCommandRE.FindAllString(text[strings.Index(text, "\n2 approvals"):], -1) {
		words := strings.Fields(strings.TrimSpace(cmd))
		if len(words) < 3 || words[1] != "approval" {
			continue
		}
		for i, w := range words {
			if w == "ID" {
				words[i] = map[string]string{"approve": "appr-a", "reject": "appr-r"}[words[2]]
			}
		}
		if r := e.run("", words[1:]...); r.err != nil || r.errOut != "" {
			t.Errorf("printed %q, ran %q: err=%v stderr %q", cmd, words, r.err, r.errOut)
		}
		ran[words[2]] = true
	}
	if !ran["list"] || !ran["approve"] || !ran["reject"] {
		t.Errorf("ran %v, want list, approve and reject", ran)
	}
	// Decided: nothing waits, and with no mail UserPromptSubmit is silent.
	if r := e.hook("claude-code", `{"hook_event_name":"UserPromptSubmit"}`); r.err != nil || r.out != "" {
		t.Errorf("nothing waits: err=%v out=%q", r.err, r.out)
	}
}
