package maosctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// The gate runs against a node with a real state machine behind a
// loopback server (newTestEnv): it files through the API, follows the
// node's stream, and every decision a test makes is a real one, checked
// as the cluster checks it (listed approvers, hashes, quorum).

// newGateEnv is that node, alice and bob registered as reviewers and
// carol as lead, and the gate's run against it, which fails the test if
// it cannot read an approval again for its decisions.
func newGateEnv(t *testing.T) (*testEnv, gateRun) {
	t.Helper()
	e := newTestEnv(t)
	e.reviewers()
	e.ok("agents", "register", "carol", "--role", "lead")
	return e, gateRun{client: client.NewClient("http://"+e.addr, nil), ctl: "maosctl", maxTime: 5 * time.Second,
		readFailed: func(a *api.Approval, err error) { t.Errorf("approval %s could not be read again: %v", a.ID, err) }}
}

// approvalsFiled waits until n approvals are stored and returns them in
// creation order; more than n fails the test.
func (e *testEnv) approvalsFiled(n int) []*api.Approval {
	e.t.Helper()
	deadline := testenv.Deadline(e.t)
	for {
		page, err := e.svc.State().Approvals(api.ApprovalQuery{})
		if err != nil {
			e.t.Fatal(err)
		}
		switch {
		case len(page.Approvals) > n:
			e.t.Fatalf("%d approvals filed, want %d", len(page.Approvals), n)
		case len(page.Approvals) == n:
			return page.Approvals
		case time.Now().After(deadline):
			e.t.Fatalf("%d approvals filed, want %d", len(page.Approvals), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// decideApproval decides approval id as approver on its current action,
// as the API would be asked to.
func (e *testEnv) decideApproval(id, approver, decision, comment string, action json.RawMessage) {
	e.t.Helper()
	a, err := e.svc.State().Approval(id)
	if err != nil {
		e.t.Fatal(err)
	}
	e.apply(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: id, Approver: approver, Decision: decision,
		ActionHash: a.ActionHash, Comment: comment, Action: action})
}

// expireApprovals applies the leader's tick two hours from now: every
// pending approval of the test is past its deadline.
func (e *testEnv) expireApprovals() {
	e.t.Helper()
	entry, err := fsm.Encode(api.OpTick, time.Now().Add(2*time.Hour).UnixNano(), api.TickCommand{})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.svc.ApplyEntry(context.Background(), entry); err != nil {
		e.t.Fatal(err)
	}
}

func testGate(t *testing.T, doc string) *gate {
	t.Helper()
	p, err := parseGatePolicy([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p.Gates[0]
}

var pushCall = gateCall{
	Agent: "claude", ToolName: "Bash", Cwd: "/repo", SessionID: "sess-1", ToolUseID: "toolu_01",
	ToolInput: json.RawMessage(`{"command": "git push origin main", "description": "Push the branch"}`),
}

// decideAsync runs the gate on call in the background.
func decideAsync(r gateRun, g *gate, call gateCall) <-chan gateVerdict {
	ch := make(chan gateVerdict, 1)
	go func() {
		v, err := r.decide(context.Background(), g, call)
		if err != nil {
			v = gateVerdict{Reason: "error: " + err.Error()}
		}
		ch <- v
	}()
	return ch
}

// notAnswered fails the test if the gate answers within 100 ms.
func notAnswered(t *testing.T, done <-chan gateVerdict, after string) {
	t.Helper()
	select {
	case v := <-done:
		t.Fatalf("answered after %s: %+v", after, v)
	case <-time.After(100 * time.Millisecond):
	}
}

// A gated call files one approval of exactly its action and waits on the
// stream: two distinct approvals (quorum 2) let it through, naming the
// approvers.
func TestGateApproved(t *testing.T) {
	e, r := newGateEnv(t)
	g := testGate(t, "gates: [{tool: Bash, match: git push, approvers: [alice, bob, role:lead], quorum: 2, timeout: 1m}]")
	done := decideAsync(r, g, pushCall)
	a := e.approvalsFiled(1)[0]
	wantAction := `{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin main","description":"Push the branch"},"tool_name":"Bash"}`
	if string(a.Action) != wantAction {
		t.Errorf("action %s\nwant   %s", a.Action, wantAction)
	}
	if hash, _ := api.ActionHash(json.RawMessage(wantAction)); a.ActionHash != hash {
		t.Errorf("hash %s, want %s", a.ActionHash, hash)
	}
	if !regexp.MustCompile(`^gate-claude-[0-9a-f]{16}$`).MatchString(a.ID) || a.From != "claude" ||
		!slices.Equal(a.Approvers, []string{"alice", "bob", "role:lead"}) || a.Quorum != 2 ||
		a.Title != "Bash: git push origin main" || a.Priority != api.PriorityHigh || a.TimeoutSeconds != 3600 ||
		a.ApprovalNeededFor != "a Bash call by claude in /repo (maos gate 1 (tool Bash, match git push))" ||
		a.Rationale != "the agent says: Push the branch (session sess-1, tool use toolu_01)" {
		t.Errorf("approval filed %+v", a)
	}
	e.decideApproval(a.ID, "alice", api.DecisionApprove, "", nil)
	notAnswered(t, done, "one approval of two")
	e.decideApproval(a.ID, "bob", api.DecisionApprove, "ok", nil)
	v := <-done
	if want := (gateVerdict{Allow: true, Reason: "approved by alice, bob (approval " + a.ID + ")"}); !gateVerdictEqual(v, want) {
		t.Errorf("verdict %+v, want %+v", v, want)
	}
	// The hook run again for the same call files nothing new (the same
	// id, the same request) and answers at once from the decided approval.
	requests := func() int { _, n := proposedApproval[api.ApprovalRequestCommand](e, api.OpApprovalRequest); return n }
	v, err := r.decide(context.Background(), g, pushCall)
	if err != nil || !v.Allow || requests() != 2 {
		t.Errorf("retried hook: %+v %v, %d requests", v, err, requests())
	}
	e.approvalsFiled(1)
	// A later call of the same command is another call: a new approval.
	next := pushCall
	next.ToolUseID = "toolu_02"
	done = decideAsync(r, g, next)
	id := e.approvalsFiled(2)[1].ID
	e.decideApproval(id, "carol", api.DecisionReject, "", nil)
	if v := <-done; v.Allow || v.Reason != "rejected by carol (approval "+id+"). Do not retry this call; ask the approver or change the plan" {
		t.Errorf("rejected without comment: %+v", v)
	}
}

func gateVerdictEqual(a, b gateVerdict) bool {
	return a.Allow == b.Allow && a.Reason == b.Reason && string(a.UpdatedInput) == string(b.UpdatedInput)
}

// A reject denies with the rejecter's comment.
func TestGateRejected(t *testing.T) {
	e, r := newGateEnv(t)
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice, carol]}]")
	done := decideAsync(r, g, pushCall)
	id := e.approvalsFiled(1)[0].ID
	e.decideApproval(id, "carol", api.DecisionReject, "not on a Friday\nafternoon", nil)
	want := "rejected by carol: not on a Friday afternoon (approval " + id + "). Do not retry this call; ask the approver or change the plan"
	if v := <-done; v.Allow || v.Reason != want {
		t.Errorf("verdict %+v, want reason %q", v, want)
	}
}

// No decision within the gate's timeout denies, saying the approval stays
// pending, how an approver decides it and how to retry; the retried call
// waits on the same approval (no second one) and is let through when it
// is approved.
func TestGateTimeoutAndRetry(t *testing.T) {
	e, r := newGateEnv(t)
	r.ctl = "maosctl --addr 10.0.0.1:7070"
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice, bob], quorum: 2, timeout: 50ms}]")
	start := time.Now()
	v, err := r.decide(context.Background(), g, pushCall)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("answered after %s, before the gate's timeout", el)
	}
	a := e.approvalsFiled(1)[0]
	want := fmt.Sprintf("no decision on approval %s within 50ms (0 of 2 approvals). It stays pending until %s: "+
		"an approver can still approve it (maosctl --addr 10.0.0.1:7070 approval approve %s) or reject it. "+
		"Run this same call again to wait for it once more (the retry waits on %s, it files no second approval)",
		a.ID, a.Deadline.UTC().Format(time.RFC3339), a.ID, a.ID)
	if v.Allow || v.Reason != want {
		t.Errorf("timeout verdict %+v\nwant reason %q", v, want)
	}
	e.decideApproval(a.ID, "alice", api.DecisionApprove, "", nil)

	// The model runs the same command again: a new tool use.
	retry := pushCall
	retry.ToolUseID = "toolu_09"
	g.Timeout = time.Minute
	done := decideAsync(r, g, retry)
	notAnswered(t, done, "one approval of two, on the retry")
	if _, n := proposedApproval[api.ApprovalRequestCommand](e, api.OpApprovalRequest); n != 1 {
		t.Fatalf("the retry filed again: %d requests", n)
	}
	e.decideApproval(a.ID, "bob", api.DecisionApprove, "", nil)
	if v := <-done; !v.Allow || v.Reason != "approved by alice, bob (approval "+a.ID+")" {
		t.Errorf("retry: %+v", v)
	}
	// Once decided, the approval is not joined again: an approved one has
	// let a call through.
	again := pushCall
	again.ToolUseID = "toolu_10"
	done = decideAsync(r, g, again)
	id := e.approvalsFiled(2)[1].ID
	e.expireApprovals()
	if v := <-done; v.Allow || v.Reason != "approval "+id+" expired with no decision (0 of 2 approvals). Run the call again to ask anew" {
		t.Errorf("expired: %+v", v)
	}
}

// A pending approval of another action, or by another agent, is not
// joined: only the same action (hash) from the same agent.
func TestGateJoinsOnlyTheSameAction(t *testing.T) {
	e, r := newGateEnv(t)
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice], timeout: 20ms}]")
	other := pushCall
	other.ToolInput = json.RawMessage(`{"command":"git push origin dev"}`)
	if _, err := r.decide(context.Background(), g, other); err != nil {
		t.Fatal(err)
	}
	elsewhere := pushCall
	elsewhere.Cwd = "/other"
	if _, err := r.decide(context.Background(), g, elsewhere); err != nil {
		t.Fatal(err)
	}
	if _, err := r.decide(context.Background(), g, pushCall); err != nil {
		t.Fatal(err)
	}
	e.approvalsFiled(3)
	// The same input spaced otherwise is the same action, and the pending
	// approval is found past the first page.
	limit := hookPageLimit
	hookPageLimit = 1
	t.Cleanup(func() { hookPageLimit = limit })
	spaced := pushCall
	spaced.ToolUseID = "toolu_77"
	spaced.ToolInput = json.RawMessage("{\n \"description\": \"Push the branch\", \"command\": \"git push origin main\"}")
	if _, err := r.decide(context.Background(), g, spaced); err != nil {
		t.Fatal(err)
	}
	e.approvalsFiled(3)
}

// An approver's modify that changes only the tool input lets the call run
// as changed (updatedInput); one that changes what runs where is another
// action and denies.
func TestGateModified(t *testing.T) {
	e, r := newGateEnv(t)
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice, bob], quorum: 2, timeout: 1m}]")
	done := decideAsync(r, g, pushCall)
	id := e.approvalsFiled(1)[0].ID
	e.decideApproval(id, "alice", api.DecisionApprove, "", nil)
	changed := json.RawMessage(`{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin main --dry-run"},"tool_name":"Bash"}`)
	e.decideApproval(id, "bob", api.DecisionModify, "dry run first", changed)
	e.decideApproval(id, "alice", api.DecisionApprove, "", nil)
	notAnswered(t, done, "a modify voided alice's first approval")
	e.decideApproval(id, "bob", api.DecisionApprove, "", nil)
	want := gateVerdict{Allow: true, Reason: "approved by alice, bob with changes by bob: dry run first (approval " + id + ")",
		UpdatedInput: json.RawMessage(`{"command":"git push origin main --dry-run"}`)}
	if v := <-done; !gateVerdictEqual(v, want) {
		t.Errorf("modified: %+v, want %+v", v, want)
	}
	// The hook run again for the same call finds the approval under its
	// id, though its hash is now the modified action's, and answers the
	// same.
	if v, err := r.decide(context.Background(), g, pushCall); err != nil || !gateVerdictEqual(v, want) {
		t.Errorf("retried hook after a modify: %+v %v", v, err)
	}
	e.approvalsFiled(1)

	next := pushCall
	next.ToolUseID = "toolu_03"
	done = decideAsync(r, g, next)
	id = e.approvalsFiled(2)[1].ID
	moved := json.RawMessage(`{"agent":"claude","cwd":"/srv/prod","tool_input":{"command":"git push"},"tool_name":"Bash"}`)
	e.decideApproval(id, "bob", api.DecisionModify, "", moved)
	e.decideApproval(id, "alice", api.DecisionApprove, "", nil)
	e.decideApproval(id, "bob", api.DecisionApprove, "", nil)
	want = gateVerdict{Reason: "approval " + id + " was approved for another action than this call: " + string(moved) +
		". Run that instead if it is what you mean (it asks for approval again)"}
	if v := <-done; !gateVerdictEqual(v, want) {
		t.Errorf("moved: %+v, want %+v", v, want)
	}
}

func TestGateCancelled(t *testing.T) {
	e, r := newGateEnv(t)
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice]}]")
	done := decideAsync(r, g, pushCall)
	id := e.approvalsFiled(1)[0].ID
	e.apply(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: id, From: "claude", Reason: "not needed"})
	if v := <-done; v.Allow || v.Reason != "approval "+id+" was cancelled. Run the call again to ask anew" {
		t.Errorf("cancelled: %+v", v)
	}
}

// through serves e's node anew through wrap and returns the address.
func (e *testEnv) through(wrap func(w http.ResponseWriter, r *http.Request, next http.Handler)) string {
	e.t.Helper()
	apiServer := transport.NewServer(e.svc, transport.ServerOptions{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wrap(w, r, apiServer) }))
	e.t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// gateBehind is a client of e's node served through wrap.
func (e *testEnv) gateBehind(wrap func(w http.ResponseWriter, r *http.Request, next http.Handler)) *client.Client {
	return client.NewClient("http://"+e.through(wrap), nil)
}

// failReadsOnceFollowing is a wrap for through: once a stream is opened
// (closing following), every read of an approval is a 503.
func failReadsOnceFollowing(following chan struct{}) func(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var once sync.Once
	return func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		select {
		case <-following:
			if strings.HasPrefix(req.URL.Path, "/v1/approvals/") {
				refuse(w, http.StatusServiceUnavailable, "unavailable", "no leader")
				return
			}
		default:
		}
		if req.URL.Path == "/v1/stream" {
			once.Do(func() { close(following) })
		}
		next.ServeHTTP(w, req)
	}
}

// streamOpened waits until following is closed.
func streamOpened(t *testing.T, following chan struct{}) {
	t.Helper()
	select {
	case <-following:
	case <-time.After(time.Until(testenv.Deadline(t))):
		t.Fatal("no stream was opened")
	}
}

// refuse answers an API error.
func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// A node that fails is an error for the caller to deny with, at every
// step: no node, a refused request, a refused stream.
func TestGateNodeErrors(t *testing.T) {
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice]}]")
	e, r := newGateEnv(t)
	r.client = client.NewClient("http://"+closedAddr(t), nil)
	_, err := r.decide(context.Background(), g, pushCall)
	var away *client.UnreachableError
	if !errors.As(err, &away) || !strings.HasPrefix(err.Error(), "list the pending approvals of claude: ") {
		t.Errorf("no node: %v", err)
	}
	// The cluster refuses the request (a field of the call too large, a
	// secret in it): an error naming the approval.
	r.client = client.NewClient("http://"+e.addr, nil)
	big := pushCall
	big.ToolInput = json.RawMessage(`{"content":"` + strings.Repeat("x", api.MaxActionBytes) + `"}`)
	if _, err := r.decide(context.Background(), g, big); err == nil ||
		!strings.Contains(err.Error(), "request approval gate-claude-") || !strings.Contains(err.Error(), "action") {
		t.Errorf("too large: %v", err)
	}
	// The node refuses the stream (a 4xx reconnecting will not mend).
	r.client = e.gateBehind(func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path == "/v1/stream" {
			refuse(w, http.StatusForbidden, "forbidden", "no stream for you")
			return
		}
		next.ServeHTTP(w, req)
	})
	var apiErr *api.APIError
	if _, err := r.decide(context.Background(), g, pushCall); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden ||
		!strings.HasPrefix(err.Error(), "wait for approval gate-claude-") || !strings.Contains(err.Error(), "no stream for you") {
		t.Errorf("stream refused: %v", err)
	}
}

// A stream the node closes is followed again where it stopped; an
// approval decided while the stream was away is seen on the next one.
func TestGateFollowsAcrossReconnects(t *testing.T) {
	e, r := newGateEnv(t)
	var streams atomic.Int32
	r.client = e.gateBehind(func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.URL.Path == "/v1/stream" && streams.Add(1) <= 2 {
			refuse(w, http.StatusServiceUnavailable, "unavailable", "no leader")
			return
		}
		next.ServeHTTP(w, req)
	})
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice]}]")
	done := decideAsync(r, g, pushCall)
	id := e.approvalsFiled(1)[0].ID
	for deadline := testenv.Deadline(t); streams.Load() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams opened, want the two refused and one more", streams.Load())
		}
	}
	notAnswered(t, done, "two refused streams")
	e.decideApproval(id, "alice", api.DecisionApprove, "", nil)
	if v := <-done; !v.Allow || v.Reason != "approved by alice (approval "+id+")" {
		t.Errorf("verdict %+v", v)
	}
}

// When the approval, final on the stream, cannot be read again for its
// decisions, the verdict is its state's (naming nobody) and the failure
// is told.
func TestGateRereadFails(t *testing.T) {
	e, r := newGateEnv(t)
	// Once the gate follows the stream, reads of an approval fail.
	following := make(chan struct{})
	r.client = e.gateBehind(failReadsOnceFollowing(following))
	var told []string
	r.readFailed = func(a *api.Approval, err error) { told = append(told, a.ID+" "+string(a.State)+": "+err.Error()) }
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice]}]")
	done := decideAsync(r, g, pushCall)
	id := e.approvalsFiled(1)[0].ID
	streamOpened(t, following)
	e.decideApproval(id, "alice", api.DecisionApprove, "", nil)
	if v := <-done; !v.Allow || v.Reason != "approved (approval "+id+")" {
		t.Errorf("verdict %+v", v)
	}
	if len(told) != 1 || !strings.HasPrefix(told[0], id+" approved: ") || !strings.Contains(told[0], "no leader") {
		t.Errorf("told %q", told)
	}
}

func TestGateApprovalID(t *testing.T) {
	id := gateApprovalID(pushCall, "sha256:aa")
	if id != gateApprovalID(pushCall, "sha256:aa") {
		t.Errorf("not derived: %s", id)
	}
	for _, c := range []gateCall{
		{Agent: "claude", SessionID: "sess-2", ToolUseID: "toolu_01"},
		{Agent: "claude", SessionID: "sess-1", ToolUseID: "toolu_02"},
		{Agent: "codex", SessionID: "sess-1", ToolUseID: "toolu_01"},
	} {
		if other := gateApprovalID(c, "sha256:aa"); other == id || !strings.HasPrefix(other, "gate-"+c.Agent+"-") {
			t.Errorf("%+v: %s (first %s)", c, other, id)
		}
	}
	if gateApprovalID(pushCall, "sha256:bb") == id {
		t.Errorf("another action, same id")
	}
	// No tool-use id: never the same approval twice.
	anon := gateCall{Agent: "claude", SessionID: "s"}
	if gateApprovalID(anon, "sha256:aa") == gateApprovalID(anon, "sha256:aa") {
		t.Errorf("a call without a tool-use id got a derived id")
	}
	long := gateCall{Agent: strings.Repeat("a", 64), ToolUseID: "x"}
	if id := gateApprovalID(long, "sha256:aa"); len(id) > api.MaxIDLen {
		t.Errorf("id of %d bytes", len(id))
	}
}

// The answer's JSON per dialect: Codex gets nothing for a plain allow (it
// refuses an allow that does not change the input); Gemini CLI reads
// decision and reason, and a modify as tool_input, which it merges into
// the call's arguments, so a modify that drops one is denied.
func TestGateOutput(t *testing.T) {
	allow := gateVerdict{Allow: true, Reason: "approved by alice (approval x)"}
	deny := gateVerdict{Reason: "rejected by bob (approval x)"}
	changed := gateVerdict{Allow: true, Reason: "approved by alice with changes (approval x)", UpdatedInput: json.RawMessage(`{"command":"ls"}`)}
	input := json.RawMessage(`{"command":"rm -rf build"}`)
	for _, tc := range []struct {
		v       gateVerdict
		dialect string
		want    string
	}{
		{allow, "gemini", `{"decision":"allow","reason":"maos gate: approved by alice (approval x)"}`},
		{deny, "gemini", `{"decision":"deny","reason":"maos gate: rejected by bob (approval x)"}`},
		{changed, "gemini", `{"decision":"allow","reason":"maos gate: approved by alice with changes (approval x)","hookSpecificOutput":{"hookEventName":"BeforeTool","tool_input":{"command":"ls"}}}`},
		{allow, "claude-code", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice (approval x)"}}`},
		{allow, "codex", `null`},
		{deny, "claude-code", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"maos gate: rejected by bob (approval x)"}}`},
		{deny, "codex", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"maos gate: rejected by bob (approval x)"}}`},
		{changed, "claude-code", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice with changes (approval x)","updatedInput":{"command":"ls"}}}`},
		{changed, "codex", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice with changes (approval x)","updatedInput":{"command":"ls"}}}`},
	} {
		got, err := json.Marshal(hookDialects[tc.dialect].gate(tc.v, input))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s %+v:\n got %s\nwant %s", tc.dialect, tc.v, got, tc.want)
		}
	}
	dropped := gateVerdict{Allow: true, Reason: "approved by alice with changes (approval x)", UpdatedInput: json.RawMessage(`{"command":"ls"}`)}
	got, _ := json.Marshal(hookDialects["gemini"].gate(dropped, json.RawMessage(`{"command":"rm -rf build","dir_path":"/"}`)))
	if want := `{"decision":"deny","reason":"maos gate: approved by alice with changes (approval x), but the change removes [dir_path], which Gemini CLI cannot take out of a call (it merges the approved input into the model's); run the call as approved instead"}`; string(got) != want {
		t.Errorf("gemini modify that drops an argument:\n got %s\nwant %s", got, want)
	}
}
