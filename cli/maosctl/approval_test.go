package maosctl

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// The approval verbs are tested against a node whose approval reads and
// whose answers to the approval ops are transporttest's fakes: what the
// verbs send, print and exit with. What the state machine decides
// (quorum, stale hashes, who may decide) is fsm's and tested there; the
// end-to-end tests at the end of the file run the verbs against it.

// serveApprovals serves e's node anew with transporttest's approval
// reads, which it returns; Apply answers the approval ops as a pending
// approval's result (transporttest.PendingResult) unless the test says
// else.
func (e *testEnv) serveApprovals() *transporttest.ApprovalReads {
	e.t.Helper()
	node := transporttest.WithApprovalReads(e.svc)
	srv := httptest.NewServer(transport.NewServer(node, transport.ServerOptions{}))
	e.t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	e.svc.AnswerApprovals(transporttest.PendingResult)
	return node.Reads
}

// proposedApproval is the last command of op the node was asked to
// propose, decoded into T, and how many there were.
func proposedApproval[T any](e *testEnv, op api.Op) (T, int) {
	e.t.Helper()
	var v T
	n := 0
	for _, c := range e.svc.Applied() {
		if c.Op == op {
			n++
			v = *new(T)
			if err := json.Unmarshal(c.Body, &v); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return v, n
}

const deployAction = `{"cmd":"deploy","version":"2.3"}`

func deployHash(t *testing.T) string {
	t.Helper()
	h, err := api.ActionHash(json.RawMessage(deployAction))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// request: every flag reaches the proposed command, the id fixed before
// the first try; it prints the result with the action's hash, or with
// --json the API's answer; bad arguments are refused before any request.
func TestApprovalRequest(t *testing.T) {
	e := newTestEnv(t)
	e.serveApprovals()
	hash := deployHash(t)
	r := e.run(`{ "version": "2.3", "cmd": "deploy" }`, "approval", "request", "--from", "lead", "--approver", "alice,role:reviewer",
		"--approver", "carol", "--quorum", "2", "--title", "deploy v2.3", "--action", "-", "--rationale", "tests green",
		"--needed-for", "prod deploy", "--confidence", "0.9", "--priority", "high", "--timeout", "4h", "--on-timeout", "escalate",
		"--option", "approve,reject", "--task-id", "t-1", "--channel", "ops")
	if r.err != nil {
		t.Fatalf("request: %v %s", r.err, r.errOut)
	}
	m := regexp.MustCompile(`^requested (appr-\d{8}-\d{6}-lead-[0-9a-f]{8}): pending, 0 of 2 approvals, action (sha256:[0-9a-f]{64}) \(seq 7\)\n$`).FindStringSubmatch(r.out)
	if m == nil || m[2] != hash {
		t.Fatalf("request printed %q, want the hash %s", r.out, hash)
	}
	got, n := proposedApproval[api.ApprovalRequestCommand](e, api.OpApprovalRequest)
	if n != 1 || got.ID != m[1] || string(got.Action) != deployAction || got.Quorum != 2 || strings.Join(got.Approvers, ",") != "alice,role:reviewer,carol" ||
		time.Duration(got.Timeout) != 4*time.Hour || got.OnTimeout != api.OnTimeoutEscalate || got.Priority != api.PriorityHigh ||
		got.ApprovalNeededFor != "prod deploy" || got.Rationale != "tests green" || got.Confidence == nil || *got.Confidence != 0.9 ||
		strings.Join(got.Options, ",") != "approve,reject" || got.From != "lead" || got.TaskID != "t-1" || got.Channel != "ops" {
		t.Errorf("proposed %+v", got)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "request", "--from", "bob", "--approver", "alice", "--title", "rm -rf build",
		"--action", `{"cmd":"rm -rf build"}`, "--id", "appr-rm")), &res); err != nil || res["id"] != "appr-rm" || res["state"] != "pending" ||
		res["quorum"] != 1.0 || res["seq"] != 7.0 || !strings.HasPrefix(res["action_hash"].(string), "sha256:") || len(res) != 6 {
		t.Errorf("request --json: %v, %v", res, err)
	}
	if got, _ := proposedApproval[api.ApprovalRequestCommand](e, api.OpApprovalRequest); got.Confidence != nil || got.Channel != api.DefaultChannel ||
		time.Duration(got.Timeout) != api.DefaultApprovalTimeout || got.Quorum != 1 {
		t.Errorf("the defaults: %+v", got)
	}

	before := len(e.svc.Applied())
	e.failRequests()
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x", "--action", "1", "extra"}, "extra")
	if n := len(e.svc.Applied()); n != before {
		t.Errorf("%d refused requests were proposed", n-before)
	}
	// A failure whose outcome is unknown says how to check and retry.
	e.svc.AnswerApprovals(func(api.Op, json.RawMessage) (any, error) { return nil, api.ErrOutcomeUnknown })
	e.fail([]string{"approval", "request", "--from", "lead", "--approver", "alice", "--title", "x", "--action", "1", "--id", "appr-x"},
		"maosctl approval show appr-x", "retrying with --id appr-x is safe")
}

// list prints a line an approval and asks what its flags say; show
// prints the action, its hash and the decisions (void ones marked).
func TestApprovalListShow(t *testing.T) {
	e := newTestEnv(t)
	reads := e.serveApprovals()
	hash := deployHash(t)
	if out := e.ok("approval", "list", "--state", "approved"); out != "no approvals\n" {
		t.Errorf("an empty list: %q", out)
	}
	conf := 0.9
	at := time.Date(2026, 11, 24, 10, 30, 0, 0, time.UTC)
	reads.Put(&api.Approval{ID: "appr-d", Seq: 1001, From: "lead", Approvers: []string{"alice", "role:reviewer", "carol"}, Quorum: 2, Approvals: 1,
		Title: "deploy v2.3", ApprovalNeededFor: "prod deploy", Rationale: "tests green", Confidence: &conf, Priority: api.PriorityHigh,
		TimeoutSeconds: 4 * 3600, OnTimeout: api.OnTimeoutEscalate, Channel: "general", Options: []string{"approve", "reject"},
		Action: json.RawMessage(deployAction), ActionHash: hash, State: api.ApprovalPending, Deadline: at.Add(4 * time.Hour), Created: at, Updated: at,
		Decisions: []api.ApprovalDecision{
			{Seq: 1002, Time: at, Approver: "alice", Decision: api.DecisionApprove, ActionHash: "sha256:0123456789abcdef", Comment: "checked", Voided: true},
			{Seq: 1003, Time: at, Approver: "bob", Decision: api.DecisionModify, ActionHash: "sha256:0123456789abcdef", Comment: "canary first", Action: json.RawMessage(deployAction)},
			{Seq: 1004, Time: at, Approver: "carol", Decision: api.DecisionApprove, ActionHash: hash},
		}})
	reads.Put(&api.Approval{ID: "appr-rm", Seq: 1005, From: "bob", Approvers: []string{"alice"}, Quorum: 1, Title: "rm -rf build", State: api.ApprovalRejected})

	out := e.ok("approval", "list", "--approver", "alice", "--from", "lead", "--state", "pending", "--after", "3", "--limit", "5")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+STATE\s+APPROVALS\s+FROM\s+APPROVERS\s+TITLE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^appr-d\s+pending\s+1/2\s+lead\s+alice,role:reviewer,carol\s+deploy v2.3$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^appr-rm\s+rejected\s+0/1\s+bob\s+alice\s+rm -rf build$`).MatchString(lines[2]) {
		t.Errorf("approval list printed:\n%s", out)
	}
	qs := reads.Queries()
	if want := (api.ApprovalQuery{State: api.ApprovalPending, Approver: "alice", From: "lead", After: 3, Limit: 5}); qs[len(qs)-1] != want {
		t.Errorf("list asked %+v, want %+v", qs[len(qs)-1], want)
	}
	var page api.ApprovalPage
	if err := json.Unmarshal([]byte(e.ok("approval", "list", "--json")), &page); err != nil || len(page.Approvals) != 2 || page.Approvals[0].ID != "appr-d" {
		t.Errorf("list --json: %+v, %v", page, err)
	}

	out = e.ok("approval", "show", "appr-d")
	for _, want := range []string{"appr-d pending (1 of 2 approvals, until 2026-11-24T14:30:00Z)\n", "title: deploy v2.3",
		"from: lead → alice, role:reviewer, carol, channel general, priority high", "needed for: prod deploy", "rationale: tests green",
		"confidence: 0.9", "options: approve, reject", "timeout: 4h0m0s, then escalate", "created: 2026-11-24T10:30:00Z (seq 1001)",
		"action " + hash + ":\n  {\n    \"cmd\": \"deploy\",\n    \"version\": \"2.3\"\n  }\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	for _, re := range []string{`(?m)^  2026-11-24T10:30:00Z\s+#1002\s+alice\s+approve \(void: the action changed\)\s+on sha256:0123456789ab\s+checked$`,
		`(?m)^  \S+Z\s+#1003\s+bob\s+modify\s+on sha256:0123456789ab\s+canary first new action: \{"cmd":"deploy"`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("show lacks %s:\n%s", re, out)
		}
	}
	var one api.Approval
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "show", "appr-d")), &one); err != nil || one.ID != "appr-d" || one.ActionHash != hash || len(one.Decisions) != 3 {
		t.Errorf("show --json: %+v, %v", one, err)
	}
	e.fail([]string{"approval", "show"}, "missing ID")
	e.fail([]string{"approval", "show", "appr-ghost"}, "appr-ghost: not found")
	e.fail([]string{"approval", "list", "--state", "done"}, "state")
}

// approve, reject and modify show the action and its hash, then decide
// on that hash (or on --hash); the node's refusal is the error; cancel
// acts as --from.
func TestApprovalDecide(t *testing.T) {
	e := newTestEnv(t)
	reads := e.serveApprovals()
	hash := deployHash(t)
	pending := api.Approval{ID: "appr-d", From: "lead", Approvers: []string{"alice", "bob", "carol"}, Quorum: 2, Title: "deploy v2.3",
		Action: json.RawMessage(deployAction), ActionHash: hash, State: api.ApprovalPending}
	reads.Put(&pending)
	// The node's answer: the approval with the decision counted.
	e.svc.AnswerApprovals(func(op api.Op, body json.RawMessage) (any, error) {
		var cmd api.ApprovalDecideCommand
		if err := json.Unmarshal(body, &cmd); err != nil {
			return nil, err
		}
		a := pending
		a.Decisions = []api.ApprovalDecision{{Approver: cmd.Approver, Decision: cmd.Decision, ActionHash: cmd.ActionHash}}
		switch cmd.Decision {
		case api.DecisionApprove:
			a.Approvals = 1
		case api.DecisionReject:
			a.State = api.ApprovalRejected
		case api.DecisionModify:
			a.Action = cmd.Action
			a.ActionHash, _ = api.ActionHash(cmd.Action)
		}
		reads.Put(&a)
		return api.ApprovalResult{ID: a.ID, Seq: 9, State: a.State, ActionHash: a.ActionHash}, nil
	})
	out := e.ok("approval", "approve", "appr-d", "--approver", "alice", "--comment", "checked")
	if want := "appr-d pending (0 of 2 approvals, until 0001-01-01T00:00:00Z): deploy v2.3\naction " + hash +
		":\n  {\n    \"cmd\": \"deploy\",\n    \"version\": \"2.3\"\n  }\nappr-d pending: 1 of 2 approvals\n"; out != want {
		t.Errorf("approve printed:\n%s\nwant\n%s", out, want)
	}
	if cmd, _ := proposedApproval[api.ApprovalDecideCommand](e, api.OpApprovalDecide); cmd.ActionHash != hash || cmd.Approver != "alice" ||
		cmd.Decision != api.DecisionApprove || cmd.Comment != "checked" || cmd.ID != "appr-d" {
		t.Errorf("proposed %+v, want alice's approval on %s", cmd, hash)
	}
	// --hash: the decision is on the hash given, whatever the node shows.
	reads.Put(&pending)
	stale, _ := api.ActionHash(json.RawMessage(`{"cmd":"deploy","version":"2.2"}`))
	e.ok("approval", "approve", "appr-d", "--approver", "bob", "--hash", stale)
	if cmd, _ := proposedApproval[api.ApprovalDecideCommand](e, api.OpApprovalDecide); cmd.ActionHash != stale {
		t.Errorf("--hash %s: proposed %+v", stale, cmd)
	}

	// modify: the new action from stdin, canonical.
	reads.Put(&pending)
	r := e.run(`{"cmd":"deploy","version":"2.3","canary":true}`, "approval", "modify", "appr-d", "--approver", "bob", "--action", "-", "--comment", "canary first")
	newHash, _ := api.ActionHash(json.RawMessage(`{"canary":true,"cmd":"deploy","version":"2.3"}`))
	if r.err != nil || !strings.HasSuffix(r.out, "appr-d pending: the action is now "+newHash+"; the approvals before it are void, 0 of 2\n") {
		t.Fatalf("modify: %v %q %q", r.err, r.out, r.errOut)
	}
	if cmd, _ := proposedApproval[api.ApprovalDecideCommand](e, api.OpApprovalDecide); string(cmd.Action) != `{"canary":true,"cmd":"deploy","version":"2.3"}` || cmd.ActionHash != hash {
		t.Errorf("proposed modify %+v", cmd)
	}
	// reject; --json prints the API's answer alone.
	reads.Put(&pending)
	if out := e.ok("approval", "reject", "appr-d", "--approver", "carol", "--comment", "no"); !strings.HasSuffix(out, "}\nappr-d rejected\n") {
		t.Errorf("reject printed %q", out)
	}
	reads.Put(&pending)
	var a api.Approval
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "approve", "appr-d", "--approver", "carol")), &a); err != nil || a.Approvals != 1 || len(a.Decisions) != 1 {
		t.Errorf("approve --json: %+v, %v", a, err)
	}

	before := len(e.svc.Applied())
	e.fail([]string{"approval", "approve", "appr-d"}, "--approver is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
	e.fail([]string{"approval", "modify", "appr-d", "--approver", "bob"}, "missing required flag --action")
	e.fail([]string{"approval", "modify", "appr-d", "--approver", "bob", "--action", "{x"}, "--action: not one JSON value")
	e.fail([]string{"approval", "approve", "appr-ghost", "--approver", "bob"}, "appr-ghost: not found")
	if n := len(e.svc.Applied()); n != before {
		t.Errorf("%d refused decisions were proposed", n-before)
	}
	e.svc.AnswerApprovals(func(api.Op, json.RawMessage) (any, error) {
		return nil, &api.ConflictError{Reason: "approval appr-d: the action changed to " + newHash + ": look at it again"}
	})
	// It showed the action before the node refused the decision on it.
	e.fails("", []string{"approval", "approve", "appr-d", "--approver", "bob"}, "the action changed to "+newHash, "409")

	// cancel, as --from.
	e.svc.AnswerApprovals(transporttest.PendingResult)
	if out := e.ok("approval", "cancel", "appr-c", "--from", "lead", "--reason", "not needed"); out != "cancelled appr-c\n" {
		t.Errorf("cancel printed %q", out)
	}
	if cmd, _ := proposedApproval[api.ApprovalCancelCommand](e, api.OpApprovalCancel); cmd != (api.ApprovalCancelCommand{ID: "appr-c", From: "lead", Reason: "not needed"}) {
		t.Errorf("proposed cancel %+v", cmd)
	}
	var res api.ApprovalResult
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "cancel", "appr-c", "--from", "lead")), &res); err != nil || res.ID != "appr-c" {
		t.Errorf("cancel --json: %+v, %v", res, err)
	}
	e.fail([]string{"approval", "cancel", "appr-c"}, "--from is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
}

// approval wait exits 0 approved, 1 rejected or cancelled, 2 expired or
// timed out, printing the outcome and the decisions; a decision made
// while it waits reaches it on the stream.
func TestApprovalWait(t *testing.T) {
	e := newTestEnv(t, "bob")
	reads := e.serveApprovals()
	at := time.Date(2026, 11, 24, 10, 30, 0, 0, time.UTC)
	dec := func(who, what, comment string) api.ApprovalDecision {
		return api.ApprovalDecision{Time: at, Approver: who, Decision: what, ActionHash: "sha256:0123456789abcdef0123", Comment: comment}
	}
	for _, tc := range []struct {
		state api.ApprovalState
		ds    []api.ApprovalDecision
		code  int
		out   string
	}{
		{api.ApprovalApproved, []api.ApprovalDecision{dec("alice", "approve", ""), dec("bob", "approve", "ok")}, 0,
			"appr-w approved by alice, bob\n  2026-11-24T10:30:00Z alice approve on sha256:0123456789ab\n  2026-11-24T10:30:00Z bob approve on sha256:0123456789ab: ok\n"},
		{api.ApprovalRejected, []api.ApprovalDecision{dec("alice", "reject", "not now")}, 1,
			"appr-w rejected by alice\n  2026-11-24T10:30:00Z alice reject on sha256:0123456789ab: not now\n"},
		{api.ApprovalCancelled, nil, 1, "appr-w cancelled\n"},
		{api.ApprovalExpired, nil, 2, "appr-w expired\n"},
	} {
		reads.Put(&api.Approval{ID: "appr-w", State: tc.state, ActionHash: "sha256:0123456789abcdef0123", Decisions: tc.ds, Quorum: 2})
		r := e.run("", "approval", "wait", "appr-w")
		if ExitCode(r.err) != tc.code || r.out != tc.out || r.errOut != "" {
			t.Errorf("wait on %s: exit %d %q %q, want %d %q", tc.state, ExitCode(r.err), r.out, r.errOut, tc.code, tc.out)
		}
		r = e.run("", "approval", "wait", "appr-w", "--json")
		var a api.Approval
		if ExitCode(r.err) != tc.code || json.Unmarshal([]byte(r.out), &a) != nil || a.State != tc.state {
			t.Errorf("wait --json on %s: exit %d %q", tc.state, ExitCode(r.err), r.out)
		}
	}

	first := e.svc.FSM().AppliedIndex()
	slow := api.Approval{ID: "appr-slow", Seq: first, Channel: "general", State: api.ApprovalPending, Quorum: 2, Approvals: 1,
		ActionHash: "sha256:0123456789abcdef0123", Decisions: []api.ApprovalDecision{dec("alice", "approve", "")}}
	// Timed out: the approval as read when it gave up, with its decisions.
	reads.Put(&api.Approval{ID: "appr-slow", Seq: first, Channel: "general", State: api.ApprovalPending, Quorum: 2})
	go func() {
		time.Sleep(100 * time.Millisecond)
		reads.Put(&slow)
	}()
	if r := e.timedWait("approval", "wait", "appr-slow"); ExitCode(r.err) != 2 ||
		r.out != "appr-slow still pending after 300ms (1 of 2 approvals)\n  2026-11-24T10:30:00Z alice approve on sha256:0123456789ab\n" || r.errOut != "" {
		t.Errorf("wait that timed out: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}

	// Live: bob approves (the next entry's update) while wait follows the
	// stream; wait then reads the approval for its decisions.
	done := e.startWait("approval", "wait", "appr-slow")
	wantStillWaiting(t, done, 200*time.Millisecond, "the decision")
	approved := slow
	approved.State, approved.Approvals = api.ApprovalApproved, 2
	approved.Decisions = append(approved.Decisions, dec("bob", "approve", ""))
	reads.Put(&approved)
	reads.Event(first+1, approved)
	e.send("general", "lead", "bob", "the entry that approves it")
	if r := waitEnded(t, done, "the approval decided"); r.err != nil ||
		r.out != "appr-slow approved by alice, bob\n  2026-11-24T10:30:00Z alice approve on sha256:0123456789ab\n  2026-11-24T10:30:00Z bob approve on sha256:0123456789ab\n" {
		t.Errorf("live wait: %v %q %q", r.err, r.out, r.errOut)
	}

	e.fail([]string{"approval", "wait", "appr-ghost"}, "appr-ghost: not found")
	e.fail([]string{"approval", "wait", "appr-slow", "--timeout", "-1s"}, "--timeout -1s: want a positive duration")
	e.fail([]string{"approval", "wait"}, "missing ID")
}

// The status line counts the approvals waiting for the agent's decision.
func TestStatusLineApprovals(t *testing.T) {
	e := newTestEnv(t)
	reads := e.serveApprovals()
	e.reviewers()
	reads.SetPending("alice", 2)
	reads.SetPending("bob", 1)
	e.wantApprovalsStatus()
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
	msgs := []api.Message{{ID: "m1", Seq: 1, From: "bob", Priority: "normal", Title: "please review"}}
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
	reads := e.serveApprovals()
	for _, id := range []string{"appr-a", "appr-r"} {
		reads.Put(&api.Approval{ID: id, From: "bob", Approvers: []string{"alice"}, Quorum: 1, Title: "t", Action: json.RawMessage(`1`),
			ActionHash: "sha256:" + strings.Repeat("0", 64), State: api.ApprovalPending})
	}
	reads.SetPending("alice", 2)
	e.runHookApprovals("2 approvals wait for alice's decision: ")
	// Nothing waits: with no mail UserPromptSubmit is silent.
	reads.SetPending("alice", 0)
	if r := e.hook("claude-code", `{"hook_event_name":"UserPromptSubmit"}`); r.err != nil || r.out != "" {
		t.Errorf("nothing waits: err=%v out=%q", r.err, r.out)
	}
}

// End to end: the verbs against the real state machine of the test's
// node (no ApprovalReads, no AnswerApprovals), so what they send is
// decided as a cluster decides it.

// requestApproval runs approval request with args and returns its result.
func (e *testEnv) requestApproval(args ...string) api.ApprovalResult {
	e.t.Helper()
	var res api.ApprovalResult
	if err := json.Unmarshal([]byte(e.ok(append([]string{"--json", "approval", "request"}, args...)...)), &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

func TestApprovalRequestListShowEndToEnd(t *testing.T) {
	e := newTestEnv(t, "carol")
	e.reviewers()
	r := e.run(`{ "version": "2.3", "cmd": "deploy" }`, "approval", "request", "--from", "lead", "--approver", "alice,role:reviewer",
		"--approver", "carol", "--quorum", "2", "--title", "deploy v2.3", "--action", "-", "--rationale", "tests green",
		"--needed-for", "prod deploy", "--confidence", "0.9", "--priority", "high", "--timeout", "4h", "--on-timeout", "escalate",
		"--option", "approve,reject")
	if r.err != nil {
		t.Fatalf("request: %v %s", r.err, r.errOut)
	}
	hash, _ := api.ActionHash(json.RawMessage(deployAction))
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
		got.TimeoutSeconds != 4*3600 || got.OnTimeout != api.OnTimeoutEscalate || got.Priority != api.PriorityHigh ||
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
	var page api.ApprovalPage
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
	var one api.Approval
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "show", id)), &one); err != nil || one.ID != id || one.ActionHash != hash {
		t.Errorf("show --json: %+v, %v", one, err)
	}

	e.failRequests()
	e.fail([]string{"approval", "show"}, "missing ID")
	e.fail([]string{"approval", "show", "appr-ghost"}, "appr-ghost")
	e.fail([]string{"approval", "list", "--state", "done"}, "state")
}

// approve, reject and modify show the action and its hash, then decide
// on that hash; a changed action, a second decision and an approver it
// does not list are refused; cancel by the requester only.
func TestApprovalDecideEndToEnd(t *testing.T) {
	e := newTestEnv(t, "carol")
	e.reviewers()
	res := e.requestApproval("--from", "lead", "--approver", "alice,bob,carol", "--quorum", "2", "--title", "deploy v2.3", "--action", deployAction, "--id", "appr-d")
	out := e.ok("approval", "approve", "appr-d", "--approver", "alice", "--comment", "checked")
	want := "appr-d pending (0 of 2 approvals, until "
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "): deploy v2.3\naction "+res.ActionHash+":\n  {\n") ||
		!strings.HasSuffix(out, "}\nappr-d pending: 1 of 2 approvals\n") {
		t.Errorf("approve printed:\n%s", out)
	}
	e.fails("", []string{"approval", "approve", "appr-d", "--approver", "alice"}, "409")
	e.fails("", []string{"approval", "approve", "appr-d", "--approver", "dave"}, "403")
	e.fail([]string{"approval", "approve", "appr-d"}, "--approver is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
	stale, _ := api.ActionHash(json.RawMessage(`{"cmd":"deploy","version":"2.2"}`))
	e.fails("", []string{"approval", "approve", "appr-d", "--approver", "bob", "--hash", stale}, "the action changed to "+res.ActionHash, "409")

	// modify: the new action from stdin; alice's approval is void.
	r := e.run(`{"cmd":"deploy","version":"2.3","canary":true}`, "approval", "modify", "appr-d", "--approver", "bob", "--action", "-", "--comment", "canary first")
	newHash, _ := api.ActionHash(json.RawMessage(`{"canary":true,"cmd":"deploy","version":"2.3"}`))
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
	e.fails("", []string{"approval", "approve", "appr-d", "--approver", "alice", "--hash", res.ActionHash}, "409")
	e.ok("approval", "approve", "appr-d", "--approver", "alice")
	var a api.Approval
	if err := json.Unmarshal([]byte(e.ok("--json", "approval", "approve", "appr-d", "--approver", "carol")), &a); err != nil ||
		a.State != api.ApprovalApproved || len(a.Decisions) != 4 {
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
func TestApprovalWaitEndToEnd(t *testing.T) {
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
	if r := e.timedWait("approval", "wait", "appr-slow"); ExitCode(r.err) != 2 ||
		!strings.HasPrefix(r.out, "appr-slow still pending after 300ms (1 of 2 approvals)\n  ") || r.errOut != "" {
		t.Errorf("wait that timed out: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}

	// Live: bob approves while wait follows the stream.
	done := e.startWait("approval", "wait", "appr-slow")
	wantStillWaiting(t, done, 200*time.Millisecond, "the decision")
	e.ok("approval", "approve", "appr-slow", "--approver", "bob")
	if r := waitEnded(t, done, "the approval decided"); r.err != nil ||
		!strings.HasPrefix(r.out, "appr-slow approved by alice, bob\n") || strings.Count(r.out, "\n") != 3 {
		t.Errorf("live wait: %v %q %q", r.err, r.out, r.errOut)
	}

	e.fail([]string{"approval", "wait", "appr-ghost"}, "appr-ghost")
	e.fail([]string{"approval", "wait", "appr-slow", "--timeout", "-1s"}, "--timeout -1s: want a positive duration")
}

// The status line counts the approvals waiting for the agent's decision.
func TestStatusLineApprovalsEndToEnd(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1")
	e.requestApproval("--from", "lead", "--approver", "role:reviewer", "--title", "t", "--action", "2")
	e.wantApprovalsStatus()
}

// The hook's digest tells the agent the approvals waiting for it, even
// without mail, and each command it prints runs as printed.
func TestHookApprovalsEndToEnd(t *testing.T) {
	e := newHookEnv(t)
	e.ok("agents", "register", "bob", "--role", "reviewer")
	e.requestApproval("--from", "bob", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-a")
	e.requestApproval("--from", "bob", "--approver", "role:reviewer", "--title", "t", "--action", "2", "--id", "appr-r")
	// The requests are mail too: read them, so the approvals alone remain.
	e.ok("read-mark", "--agent", "alice", "--upto", "1000000")
	e.runHookApprovals("\n2 approvals wait for alice's decision: ")
	// Decided: nothing waits, and with no mail UserPromptSubmit is silent.
	if r := e.hook("claude-code", `{"hook_event_name":"UserPromptSubmit"}`); r.err != nil || r.out != "" {
		t.Errorf("nothing waits: err=%v out=%q", r.err, r.out)
	}
}

// A wait whose approval, decided on the stream, cannot be read again for
// its decisions says so on stderr and exits as the outcome says.
func TestApprovalWaitRereadFails(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	e.requestApproval("--from", "lead", "--approver", "alice", "--title", "t", "--action", "1", "--id", "appr-x")
	following := make(chan struct{})
	addr := e.through(failReadsOnceFollowing(following))
	done := make(chan runResult, 1)
	go func() { done <- runApp(addr, "", "approval", "wait", "appr-x", "--timeout", "20s") }()
	streamOpened(t, following)
	e.decideApproval("appr-x", "alice", api.DecisionApprove, "", nil)
	r := <-done
	if r.err != nil || r.out != "appr-x approved\n" ||
		!regexp.MustCompile(`^maosctl: appr-x is approved; its decisions could not be read: .*no leader.*\n$`).MatchString(r.errOut) {
		t.Errorf("wait: %v %q %q", r.err, r.out, r.errOut)
	}
}
