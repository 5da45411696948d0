package maosctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
)

// fakeGateNode keeps approvals in memory, as the cluster would: requests
// idempotent by id, decisions by the tests (decide), waits woken by every
// change.
type fakeGateNode struct {
	mu        sync.Mutex
	approvals map[string]*fsm.Approval
	order     []string
	requests  []fsm.ApprovalRequestCommand
	changed   chan struct{} // closed and replaced on every change
	seq       uint64
	fail      error // every call fails with it when set
	waits     int   // WaitApproval calls
}

func newFakeGateNode() *fakeGateNode {
	return &fakeGateNode{approvals: map[string]*fsm.Approval{}, changed: make(chan struct{})}
}

func (f *fakeGateNode) bump() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeGateNode) RequestApproval(_ context.Context, cmd fsm.ApprovalRequestCommand) (fsm.ApprovalResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return fsm.ApprovalResult{}, f.fail
	}
	cmd.Normalize(time.Now())
	if err := cmd.Validate(); err != nil {
		return fsm.ApprovalResult{}, err
	}
	f.requests = append(f.requests, cmd)
	hash, _ := fsm.ActionHash(cmd.Action)
	a, ok := f.approvals[cmd.ID]
	if !ok {
		f.seq++
		now := time.Now()
		a = &fsm.Approval{ID: cmd.ID, Seq: f.seq, From: cmd.From, Approvers: cmd.Approvers, Quorum: cmd.Quorum, Title: cmd.Title,
			ApprovalNeededFor: cmd.ApprovalNeededFor, Action: cmd.Action, ActionHash: hash, Rationale: cmd.Rationale, Priority: cmd.Priority,
			TimeoutSeconds: int(time.Duration(cmd.Timeout) / time.Second), OnTimeout: cmd.OnTimeout, State: fsm.ApprovalPending,
			Deadline: now.Add(time.Duration(cmd.Timeout)), Created: now, Updated: now}
		f.approvals[cmd.ID] = a
		f.order = append(f.order, cmd.ID)
		f.bump()
	}
	return fsm.ApprovalResult{ID: a.ID, Seq: a.Seq, State: a.State, ActionHash: a.ActionHash, Approvals: a.Approvals, Quorum: a.Quorum}, nil
}

func (f *fakeGateNode) Approval(_ context.Context, id string) (*fsm.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	a, ok := f.approvals[id]
	if !ok {
		return nil, fmt.Errorf("approval %s: not found", id)
	}
	c := *a
	c.Decisions = slices.Clone(a.Decisions)
	return &c, nil
}

func (f *fakeGateNode) Approvals(_ context.Context, q fsm.ApprovalQuery) (fsm.ApprovalPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return fsm.ApprovalPage{}, f.fail
	}
	var page fsm.ApprovalPage
	for _, id := range f.order {
		a := f.approvals[id]
		if a.Seq <= q.After || (q.From != "" && a.From != q.From) || (q.State != "" && a.State != q.State) {
			continue
		}
		if len(page.Approvals) == q.Limit {
			page.HasMore = true
			break
		}
		c := *a
		c.Decisions = nil // lists leave them out
		page.Approvals = append(page.Approvals, &c)
	}
	return page, nil
}

func (f *fakeGateNode) WaitApproval(ctx context.Context, a *fsm.Approval) (*fsm.Approval, error) {
	f.mu.Lock()
	f.waits++
	f.mu.Unlock()
	for {
		f.mu.Lock()
		cur, ch := f.approvals[a.ID], f.changed
		c := *cur
		c.Decisions = slices.Clone(cur.Decisions)
		f.mu.Unlock()
		if c.State.Final() {
			return &c, nil
		}
		select {
		case <-ctx.Done():
			return &c, ctx.Err()
		case <-ch:
		}
	}
}

// decide records a decision as the cluster would (no checks beyond the
// state machine's outcome: quorum of approvals, one reject, modify voids).
func (f *fakeGateNode) decide(id, approver, decision, comment string, action json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.approvals[id]
	d := fsm.ApprovalDecision{Seq: f.seq + 1, Time: time.Now(), Approver: approver, Decision: decision, ActionHash: a.ActionHash, Comment: comment, Action: action}
	f.seq++
	switch decision {
	case fsm.DecisionApprove:
		a.Approvals++
		if a.Approvals >= a.Quorum {
			a.State = fsm.ApprovalApproved
		}
	case fsm.DecisionReject:
		a.State = fsm.ApprovalRejected
	case fsm.DecisionModify:
		for i := range a.Decisions {
			if a.Decisions[i].Decision == fsm.DecisionApprove {
				a.Decisions[i].Voided = true
			}
		}
		a.Action = action
		a.ActionHash, _ = fsm.ActionHash(action)
		a.Approvals = 0
	}
	a.Decisions = append(a.Decisions, d)
	f.bump()
}

// end moves a pending approval to a final state with no decision
// (expired, cancelled).
func (f *fakeGateNode) end(id string, state fsm.ApprovalState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.approvals[id].State = state
	f.bump()
}

// waiting blocks until n waits have started.
func (f *fakeGateNode) waiting(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		w := f.waits
		f.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waits started, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fakeGateNode) only(t *testing.T) *fsm.Approval {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.order) != 1 {
		t.Fatalf("%d approvals filed, want 1", len(f.order))
	}
	return f.approvals[f.order[0]]
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

// A gated call files one approval of exactly its action and waits: two
// distinct approvals (quorum 2) let it through, naming the approvers.
func TestGateApproved(t *testing.T) {
	node := newFakeGateNode()
	r := gateRun{node: node, ctl: "maosctl", maxTime: time.Second}
	g := testGate(t, "gates: [{tool: Bash, match: git push, approvers: [alice, bob, role:lead], quorum: 2, timeout: 1m}]")
	done := decideAsync(r, g, pushCall)
	node.waiting(t, 1)
	a := node.only(t)
	wantAction := `{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin main","description":"Push the branch"},"tool_name":"Bash"}`
	if string(a.Action) != wantAction {
		t.Errorf("action %s\nwant   %s", a.Action, wantAction)
	}
	if hash, _ := fsm.ActionHash(json.RawMessage(wantAction)); a.ActionHash != hash {
		t.Errorf("hash %s, want %s", a.ActionHash, hash)
	}
	req := node.requests[0]
	if !regexp.MustCompile(`^gate-claude-[0-9a-f]{16}$`).MatchString(req.ID) || req.From != "claude" ||
		!slices.Equal(req.Approvers, []string{"alice", "bob", "role:lead"}) || req.Quorum != 2 ||
		req.Title != "Bash: git push origin main" || req.Priority != fsm.PriorityHigh || time.Duration(req.Timeout) != time.Hour ||
		req.ApprovalNeededFor != "a Bash call by claude in /repo (maos gate 1 (tool Bash, match git push))" ||
		req.Rationale != "the agent says: Push the branch (session sess-1, tool use toolu_01)" {
		t.Errorf("request %+v", req)
	}
	node.decide(a.ID, "alice", fsm.DecisionApprove, "", nil)
	select {
	case v := <-done:
		t.Fatalf("one approval of two answered: %+v", v)
	case <-time.After(20 * time.Millisecond):
	}
	node.decide(a.ID, "bob", fsm.DecisionApprove, "ok", nil)
	v := <-done
	if want := (gateVerdict{Allow: true, Reason: "approved by alice, bob (approval " + a.ID + ")"}); !gateVerdictEqual(v, want) {
		t.Errorf("verdict %+v, want %+v", v, want)
	}
	// The hook run again for the same call files nothing new and answers
	// at once from the decided approval.
	v, err := r.decide(context.Background(), g, pushCall)
	if err != nil || !v.Allow || len(node.requests) != 2 || node.requests[1].ID != a.ID || len(node.order) != 1 {
		t.Errorf("retried hook: %+v %v, requests %d, approvals %d", v, err, len(node.requests), len(node.order))
	}
	// A later call of the same command is another call: a new approval.
	next := pushCall
	next.ToolUseID = "toolu_02"
	done = decideAsync(r, g, next)
	node.waiting(t, 2)
	if len(node.order) != 2 {
		t.Fatalf("a new call reused the approval of an earlier one")
	}
	node.decide(node.order[1], "carol", fsm.DecisionReject, "", nil)
	if v := <-done; v.Allow || v.Reason != "rejected by carol (approval "+node.order[1]+"). Do not retry this call; ask the approver or change the plan" {
		t.Errorf("rejected without comment: %+v", v)
	}
}

func gateVerdictEqual(a, b gateVerdict) bool {
	return a.Allow == b.Allow && a.Reason == b.Reason && string(a.UpdatedInput) == string(b.UpdatedInput)
}

// A reject denies with the rejecter's comment.
func TestGateRejected(t *testing.T) {
	node := newFakeGateNode()
	r := gateRun{node: node, ctl: "maosctl", maxTime: time.Second}
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice, carol]}]")
	done := decideAsync(r, g, pushCall)
	node.waiting(t, 1)
	id := node.only(t).ID
	node.decide(id, "carol", fsm.DecisionReject, "not on a Friday\nafternoon", nil)
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
	node := newFakeGateNode()
	r := gateRun{node: node, ctl: "maosctl --addr 10.0.0.1:7070", maxTime: time.Second}
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice, bob], quorum: 2, timeout: 50ms}]")
	start := time.Now()
	v, err := r.decide(context.Background(), g, pushCall)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("answered after %s, before the gate's timeout", el)
	}
	a := node.only(t)
	want := fmt.Sprintf("no decision on approval %s within 50ms (0 of 2 approvals). It stays pending until %s: "+
		"an approver can still approve it (maosctl --addr 10.0.0.1:7070 approval approve %s) or reject it. "+
		"Run this same call again to wait for it once more (the retry waits on %s, it files no second approval)",
		a.ID, a.Deadline.UTC().Format(time.RFC3339), a.ID, a.ID)
	if v.Allow || v.Reason != want {
		t.Errorf("timeout verdict %+v\nwant reason %q", v, want)
	}
	node.decide(a.ID, "alice", fsm.DecisionApprove, "", nil)

	// The model runs the same command again: a new tool use.
	retry := pushCall
	retry.ToolUseID = "toolu_09"
	g.Timeout = time.Minute
	done := decideAsync(r, g, retry)
	node.waiting(t, 2)
	if len(node.requests) != 1 || len(node.order) != 1 {
		t.Fatalf("the retry filed again: %d requests, %d approvals", len(node.requests), len(node.order))
	}
	node.decide(a.ID, "bob", fsm.DecisionApprove, "", nil)
	if v := <-done; !v.Allow || v.Reason != "approved by alice, bob (approval "+a.ID+")" {
		t.Errorf("retry: %+v", v)
	}
	// Once decided, the approval is not joined again: an approved one has
	// let a call through.
	again := pushCall
	again.ToolUseID = "toolu_10"
	done = decideAsync(r, g, again)
	node.waiting(t, 3)
	if len(node.order) != 2 {
		t.Fatalf("a call after the approved one did not file its own: %d approvals", len(node.order))
	}
	node.end(node.order[1], fsm.ApprovalExpired)
	if v := <-done; v.Allow || v.Reason != "approval "+node.order[1]+" expired with no decision (0 of 2 approvals). Run the call again to ask anew" {
		t.Errorf("expired: %+v", v)
	}
}

// A pending approval of another action, or by another agent, is not
// joined: only the same action (hash) from the same agent.
func TestGateJoinsOnlyTheSameAction(t *testing.T) {
	node := newFakeGateNode()
	r := gateRun{node: node, ctl: "maosctl", maxTime: time.Second}
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
	if len(node.order) != 3 {
		t.Errorf("%d approvals, want one per action", len(node.order))
	}
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
	if len(node.order) != 3 {
		t.Errorf("the same input, spaced otherwise, filed a new approval: %d", len(node.order))
	}
}

// An approver's modify that changes only the tool input lets the call run
// as changed (updatedInput); one that changes what runs where is another
// action and denies.
func TestGateModified(t *testing.T) {
	node := newFakeGateNode()
	r := gateRun{node: node, ctl: "maosctl", maxTime: time.Second}
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice, bob], quorum: 2, timeout: 1m}]")
	done := decideAsync(r, g, pushCall)
	node.waiting(t, 1)
	id := node.only(t).ID
	node.decide(id, "alice", fsm.DecisionApprove, "", nil)
	changed := json.RawMessage(`{"agent":"claude","cwd":"/repo","tool_input":{"command":"git push origin main --dry-run"},"tool_name":"Bash"}`)
	node.decide(id, "bob", fsm.DecisionModify, "dry run first", changed)
	node.decide(id, "alice", fsm.DecisionApprove, "", nil)
	select {
	case v := <-done:
		t.Fatalf("a modify voided alice's approval, yet: %+v", v)
	case <-time.After(20 * time.Millisecond):
	}
	node.decide(id, "bob", fsm.DecisionApprove, "", nil)
	want := gateVerdict{Allow: true, Reason: "approved by alice, bob with changes by bob: dry run first (approval " + id + ")",
		UpdatedInput: json.RawMessage(`{"command":"git push origin main --dry-run"}`)}
	if v := <-done; !gateVerdictEqual(v, want) {
		t.Errorf("modified: %+v, want %+v", v, want)
	}
	// The hook run again for the same call finds the approval under its
	// id, though its hash is now the modified action's, and answers the
	// same.
	if v, err := r.decide(context.Background(), g, pushCall); err != nil || !gateVerdictEqual(v, want) || len(node.order) != 1 {
		t.Errorf("retried hook after a modify: %+v %v, %d approvals", v, err, len(node.order))
	}

	next := pushCall
	next.ToolUseID = "toolu_03"
	done = decideAsync(r, g, next)
	node.waiting(t, 2)
	id = node.order[1]
	moved := json.RawMessage(`{"agent":"claude","cwd":"/srv/prod","tool_input":{"command":"git push"},"tool_name":"Bash"}`)
	node.decide(id, "bob", fsm.DecisionModify, "", moved)
	node.decide(id, "alice", fsm.DecisionApprove, "", nil)
	node.decide(id, "bob", fsm.DecisionApprove, "", nil)
	want = gateVerdict{Reason: "approval " + id + " was approved for another action than this call: " + string(moved) +
		". Run that instead if it is what you mean (it asks for approval again)"}
	if v := <-done; !gateVerdictEqual(v, want) {
		t.Errorf("moved: %+v, want %+v", v, want)
	}
}

func TestGateCancelled(t *testing.T) {
	node := newFakeGateNode()
	r := gateRun{node: node, ctl: "maosctl", maxTime: time.Second}
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice]}]")
	done := decideAsync(r, g, pushCall)
	node.waiting(t, 1)
	id := node.only(t).ID
	node.end(id, fsm.ApprovalCancelled)
	if v := <-done; v.Allow || v.Reason != "approval "+id+" was cancelled. Run the call again to ask anew" {
		t.Errorf("cancelled: %+v", v)
	}
}

// A node that fails is an error for the caller to deny with, at every step.
func TestGateNodeErrors(t *testing.T) {
	g := testGate(t, "gates: [{tool: Bash, approvers: [alice]}]")
	node := newFakeGateNode()
	node.fail = errors.New("connection refused")
	r := gateRun{node: node, ctl: "maosctl", maxTime: time.Second}
	if _, err := r.decide(context.Background(), g, pushCall); err == nil ||
		err.Error() != "list the pending approvals of claude: connection refused" {
		t.Errorf("listing: %v", err)
	}
	// The cluster refuses the request (a field of the call too large, a
	// secret in it): an error naming the approval.
	node = newFakeGateNode()
	r.node = node
	big := pushCall
	big.ToolInput = json.RawMessage(`{"content":"` + strings.Repeat("x", fsm.MaxActionBytes) + `"}`)
	if _, err := r.decide(context.Background(), g, big); err == nil ||
		!strings.Contains(err.Error(), "request approval gate-claude-") || !strings.Contains(err.Error(), "action: ") {
		t.Errorf("too large: %v", err)
	}
	// The wait fails for another reason than the gate's time.
	r.node = failingWait{node}
	if _, err := r.decide(context.Background(), g, pushCall); err == nil || !strings.HasPrefix(err.Error(), "wait for approval gate-claude-") ||
		!strings.HasSuffix(err.Error(), ": 403 forbidden") {
		t.Errorf("wait: %v", err)
	}
}

type failingWait struct{ *fakeGateNode }

func (failingWait) WaitApproval(context.Context, *fsm.Approval) (*fsm.Approval, error) {
	return nil, errors.New("403 forbidden")
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
	if id := gateApprovalID(long, "sha256:aa"); len(id) > fsm.MaxIDLen {
		t.Errorf("id of %d bytes", len(id))
	}
}

// The answer's JSON per dialect: Codex gets nothing for a plain allow (it
// refuses an allow that does not change the input).
func TestGateOutput(t *testing.T) {
	allow := gateVerdict{Allow: true, Reason: "approved by alice (approval x)"}
	deny := gateVerdict{Reason: "rejected by bob (approval x)"}
	changed := gateVerdict{Allow: true, Reason: "approved by alice with changes (approval x)", UpdatedInput: json.RawMessage(`{"command":"ls"}`)}
	for _, tc := range []struct {
		v       gateVerdict
		dialect string
		want    string
	}{
		{allow, "claude-code", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice (approval x)"}}`},
		{allow, "codex", `null`},
		{deny, "claude-code", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"maos gate: rejected by bob (approval x)"}}`},
		{deny, "codex", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"maos gate: rejected by bob (approval x)"}}`},
		{changed, "claude-code", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice with changes (approval x)","updatedInput":{"command":"ls"}}}`},
		{changed, "codex", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"maos gate: approved by alice with changes (approval x)","updatedInput":{"command":"ls"}}}`},
	} {
		got, err := json.Marshal(tc.v.output(tc.dialect))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s %+v:\n got %s\nwant %s", tc.dialect, tc.v, got, tc.want)
		}
	}
}
