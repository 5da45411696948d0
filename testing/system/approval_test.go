package system

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/testing/harness"
)

// approvalWait bounds each wait of the approval tests: a decision to
// commit and reach another node, a process to see it, a short timeout to
// pass.
const approvalWait = 30 * time.Second

// ctlRun is a maosctl process the test started in the background.
type ctlRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// startCtl starts the built maosctl with args and stdin (bounded to a
// minute; killed at the end of the test if still running).
func startCtl(t *testing.T, stdin string, args ...string) *ctlRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r := &ctlRun{cmd: exec.CommandContext(ctx, maosctlBin, args...), done: make(chan struct{})}
	r.cmd.Stdin = strings.NewReader(stdin)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	r.cmd.WaitDelay = 5 * time.Second
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start maosctl %q: %v", args, err)
	}
	go func() { r.err = r.cmd.Wait(); cancel(); close(r.done) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// running fails the test if r has already exited.
func (r *ctlRun) running(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.done:
		t.Fatalf("%s: maosctl %q exited already (%v)\nstdout:\n%s\nstderr:\n%s", what, r.cmd.Args[1:], r.err, r.stdout.String(), r.stderr.String())
	default:
	}
}

// exit waits (bounded) for r to end and returns its exit code.
func (r *ctlRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(approvalWait):
		_ = r.cmd.Process.Kill() // its output is read only once it ended
		<-r.done
		t.Fatalf("maosctl %q still running after %v\nstdout:\n%s\nstderr:\n%s", r.cmd.Args[1:], approvalWait, r.stdout.String(), r.stderr.String())
	}
	var exitErr *exec.ExitError
	switch {
	case r.err == nil:
		return 0
	case errors.As(r.err, &exitErr):
		return exitErr.ExitCode()
	}
	t.Fatalf("maosctl %q: %v", r.cmd.Args[1:], r.err)
	return -1
}

// requestApproval opens cmd through cl and returns its answer.
func requestApproval(t *testing.T, cl *client.Client, cmd api.ApprovalRequestCommand) api.ApprovalResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	res, err := cl.RequestApproval(ctx, cmd)
	if err != nil {
		t.Fatalf("request approval %s: %v", cmd.ID, err)
	}
	if res.ID != cmd.ID || res.State != api.ApprovalPending {
		t.Fatalf("request approval %s: answered %+v", cmd.ID, res)
	}
	return res
}

// registerAgents registers ids (role agent) through cl: the agents a
// test addresses, which a send, task or approval may name only once
// someone answers to them.
func registerAgents(t *testing.T, cl *client.Client, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	for _, id := range ids {
		if _, err := cl.RegisterAgent(ctx, api.RegisterAgentCommand{ID: id, Role: api.DefaultRole}); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
}

// decide sends one decision through cl.
func decide(cl *client.Client, cmd api.ApprovalDecideCommand) (*api.Approval, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return cl.DecideApproval(ctx, cmd)
}

// readApproval reads approval id (with its decisions) through cl.
func readApproval(t *testing.T, cl *client.Client, id string) *api.Approval {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	a, err := cl.Approval(ctx, id)
	if err != nil {
		t.Fatalf("read approval %s: %v", id, err)
	}
	return a
}

// hashOf is the action hash of a JSON text.
func hashOf(t *testing.T, action string) string {
	t.Helper()
	h, err := api.ActionHash(json.RawMessage(action))
	harness.NoErr(t, err)
	return h
}

// A 2-of-3 approval across three nodes, decided with maosctl on one node
// and the API on others, while `maosctl approval wait` follows it on a
// third: one approval leaves it pending, the same approver again and a
// decision on a stale hash are refused (409), an agent not listed is
// refused (403), and the second distinct approver approves it; wait was
// blocked until then and exits 0 naming both approvers.
func TestApprovalTwoOfThreeAcrossNodes(t *testing.T) {
	c := clustertest.New(t, 3)
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	registerAgents(t, n0.Client, "alice", "bob", "carol")
	const action = `{"cmd":"deploy","env":"prod","version":"1.4.2"}`
	res := requestApproval(t, n0.Client, api.ApprovalRequestCommand{ID: "appr-deploy-142", From: "deployer",
		Approvers: []string{"alice", "bob", "carol"}, Quorum: 2, Title: "deploy 1.4.2 to prod",
		Action: json.RawMessage(action), Channel: "ops"})
	if res.ActionHash != hashOf(t, action) {
		t.Fatalf("action_hash %s, want %s", res.ActionHash, hashOf(t, action))
	}
	wait := startCtl(t, "", "--addr", n2.Addr, "approval", "wait", res.ID, "--timeout", "50s")

	out := runCtl(t, "--addr", n1.Addr, "approval", "approve", res.ID, "--approver", "alice", "--comment", "looks right")
	if !strings.Contains(out, res.ActionHash) {
		t.Errorf("approval approve printed %q, want the hash it approves (%s)", out, res.ActionHash)
	}
	a := readApproval(t, n2.Client, res.ID)
	if a.State != api.ApprovalPending || a.Approvals != 1 {
		t.Fatalf("after alice: %s with %d approvals, want pending with 1", a.State, a.Approvals)
	}
	wait.running(t, "after one approval of two")

	if _, err := decide(n2.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: "alice", Decision: api.DecisionApprove,
		ActionHash: res.ActionHash}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("alice approving again: %v, want a conflict", err)
	}
	stale := hashOf(t, `{"cmd":"deploy","env":"prod","version":"1.4.1"}`)
	if _, err := decide(n0.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: "bob", Decision: api.DecisionApprove,
		ActionHash: stale}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("bob approving a stale hash: %v, want a conflict", err)
	}
	if _, err := decide(n1.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: "mallory", Decision: api.DecisionApprove,
		ActionHash: res.ActionHash}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("mallory (not listed) approving: %v, want forbidden", err)
	}
	if a := readApproval(t, n1.Client, res.ID); a.State != api.ApprovalPending || a.Approvals != 1 || len(a.Decisions) != 1 {
		t.Fatalf("the refused decisions changed it: %s, %d approvals, decisions %+v", a.State, a.Approvals, a.Decisions)
	}
	wait.running(t, "after the refused decisions")

	a, err := decide(n0.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: "bob", Decision: api.DecisionApprove,
		ActionHash: res.ActionHash})
	harness.NoErr(t, err)
	if a.State != api.ApprovalApproved || a.Approvals != 2 {
		t.Fatalf("after bob: %s with %d approvals, want approved with 2", a.State, a.Approvals)
	}
	if code := wait.exit(t); code != 0 {
		t.Fatalf("approval wait exited %d, want 0\nstdout:\n%s\nstderr:\n%s", code, wait.stdout.String(), wait.stderr.String())
	}
	if got := wait.stdout.String(); !strings.Contains(got, "approved") || !strings.Contains(got, "alice") || !strings.Contains(got, "bob") {
		t.Errorf("approval wait printed %q, want approved by alice and bob", got)
	}
	// The approvers were told in their inboxes, and the decision is in the audit.
	ctx := clustertest.Context(t)
	inbox, err := n2.Client.Inbox(ctx, "carol", api.InboxQuery{Limit: 100}, api.Strong)
	harness.NoErr(t, err)
	if !slices.ContainsFunc(inbox.Messages, func(m api.InboxEntry) bool {
		return m.Type == "hitl_approval_request" && m.CorrelationID == res.ID
	}) {
		t.Errorf("carol's inbox has no hitl_approval_request for %s: %d messages", res.ID, len(inbox.Messages))
	}
}

// A modify replaces the action and voids the approvals given so far: the
// approval stays pending with none counted, a decision on the old hash is
// refused, and approvals of the new hash count from zero.
func TestApprovalModifyVoidsEarlierApprovals(t *testing.T) {
	c := clustertest.New(t, 3)
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	registerAgents(t, n0.Client, "alice", "bob", "carol")
	res := requestApproval(t, n0.Client, api.ApprovalRequestCommand{ID: "appr-migrate", From: "dba",
		Approvers: []string{"alice", "bob", "carol"}, Quorum: 2, Title: "migrate the orders table",
		Action: json.RawMessage(`{"sql":"ALTER TABLE orders DROP COLUMN legacy"}`)})
	_, err := decide(n1.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: "alice", Decision: api.DecisionApprove, ActionHash: res.ActionHash})
	harness.NoErr(t, err)

	modified := `{"sql":"ALTER TABLE orders RENAME COLUMN legacy TO legacy_old"}`
	out := runCtl(t, "--addr", n2.Addr, "approval", "modify", res.ID, "--approver", "carol", "--action", modified)
	if !strings.Contains(out, hashOf(t, modified)) {
		t.Errorf("approval modify printed %q, want the new hash %s", out, hashOf(t, modified))
	}
	a := readApproval(t, n0.Client, res.ID)
	if a.State != api.ApprovalPending || a.Approvals != 0 || a.ActionHash != hashOf(t, modified) {
		t.Fatalf("after the modify: %s, %d approvals, hash %s; want pending, 0, %s", a.State, a.Approvals, a.ActionHash, hashOf(t, modified))
	}
	if len(a.Decisions) != 2 || !a.Decisions[0].Voided || a.Decisions[0].Approver != "alice" || a.Decisions[1].Decision != api.DecisionModify {
		t.Fatalf("decisions %+v, want alice's approval voided, then carol's modify", a.Decisions)
	}
	if _, err := decide(n1.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: "bob", Decision: api.DecisionApprove,
		ActionHash: res.ActionHash}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("bob approving the action before the modify: %v, want a conflict", err)
	}
	for _, who := range []string{"alice", "bob"} {
		_, err := decide(n2.Client, api.ApprovalDecideCommand{ID: res.ID, Approver: who, Decision: api.DecisionApprove, ActionHash: a.ActionHash})
		harness.NoErr(t, err)
	}
	if a := readApproval(t, n1.Client, res.ID); a.State != api.ApprovalApproved || a.Approvals != 2 {
		t.Fatalf("after alice and bob approved the modified action: %s with %d, want approved with 2", a.State, a.Approvals)
	}
}

// An approval nobody decides expires at its timeout (wait exits 2); one
// with on_timeout escalate first alerts the escalation target, then
// expires one timeout later.
func TestApprovalTimeoutExpiresAndEscalates(t *testing.T) {
	c := clustertest.New(t, 3)
	n0, n1 := c.Nodes[0], c.Nodes[1]
	ctx := clustertest.Context(t)
	if _, err := n0.Client.SetConfig(ctx, "escalation_target", "sup"); err != nil {
		t.Fatal(err)
	}
	registerAgents(t, n0.Client, "alice")
	expires := requestApproval(t, n0.Client, api.ApprovalRequestCommand{ID: "appr-expires", From: "ops",
		Approvers: []string{"alice"}, Title: "rotate the keys", Action: json.RawMessage(`{"rotate":"keys"}`),
		Timeout: api.ApprovalTimeout(2 * time.Second)})
	escalates := requestApproval(t, n0.Client, api.ApprovalRequestCommand{ID: "appr-escalates", From: "ops",
		Approvers: []string{"alice"}, Title: "restart prod", Action: json.RawMessage(`{"restart":"prod"}`),
		Timeout: api.ApprovalTimeout(2 * time.Second), OnTimeout: api.OnTimeoutEscalate})

	wait := startCtl(t, "", "--addr", n1.Addr, "approval", "wait", expires.ID, "--timeout", "50s")
	if code := wait.exit(t); code != 2 {
		t.Fatalf("approval wait on an approval that expires exited %d, want 2\nstdout:\n%s\nstderr:\n%s", code, wait.stdout.String(), wait.stderr.String())
	}
	if a := readApproval(t, n1.Client, expires.ID); a.State != api.ApprovalExpired {
		t.Fatalf("%s is %s, want expired", expires.ID, a.State)
	}

	harness.NoErr(t, harness.WaitFor(approvalWait, "the escalation alert to sup", func() error {
		page, err := n1.Client.Inbox(ctx, "sup", api.InboxQuery{Limit: 100}, api.Strong)
		if err != nil {
			return err
		}
		for _, m := range page.Messages {
			if m.From == api.SystemSender && m.Type == "alert" && m.CorrelationID == escalates.ID {
				return nil
			}
		}
		return fmt.Errorf("%d messages, no alert for %s", len(page.Messages), escalates.ID)
	}))
	a := readApproval(t, n1.Client, escalates.ID)
	if !a.Escalated {
		t.Fatalf("%s alerted sup but is not escalated: %+v", escalates.ID, a)
	}
	wait = startCtl(t, "", "--addr", n0.Addr, "approval", "wait", escalates.ID, "--timeout", "50s")
	if code := wait.exit(t); code != 2 {
		t.Fatalf("approval wait on the escalated approval exited %d, want 2 once it expired\nstdout:\n%s\nstderr:\n%s", code, wait.stdout.String(), wait.stderr.String())
	}
	if a := readApproval(t, n0.Client, escalates.ID); a.State != api.ApprovalExpired || !a.Escalated {
		t.Fatalf("%s is %s (escalated %v), want expired after its escalation", escalates.ID, a.State, a.Escalated)
	}
}

// gatePolicyYAML gates git push (and deploys) behind alice's approval.
const gatePolicyYAML = `gates:
  - tool: Bash
    match: 'git push|deploy'
    approvers: [alice]
    quorum: 1
    timeout: 50s
`

// preToolUse is Claude Code's PreToolUse event for a Bash command.
func preToolUse(command, toolUseID string) string {
	b, _ := json.Marshal(map[string]any{"hook_event_name": "PreToolUse", "session_id": "sess-1", "cwd": "/src/app",
		"tool_name": "Bash", "tool_input": map[string]string{"command": command}, "tool_use_id": toolUseID})
	return string(b)
}

// hookDecision is the permission decision a hook printed, and its reason.
func hookDecision(t *testing.T, out string) (decision, reason string) {
	t.Helper()
	var v struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("hook printed %q, want a PreToolUse answer (%v)", out, err)
	}
	return v.HookSpecificOutput.PermissionDecision, v.HookSpecificOutput.PermissionDecisionReason
}

// gatedApproval waits until coder's gate filed a pending approval,
// reading through cl, and returns it.
func gatedApproval(t *testing.T, cl *client.Client, skip ...string) *api.Approval {
	t.Helper()
	var found *api.Approval
	harness.NoErr(t, harness.WaitFor(approvalWait, "the gate's approval", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		page, err := cl.Approvals(ctx, api.ApprovalQuery{From: "coder", State: api.ApprovalPending})
		if err != nil {
			return err
		}
		for _, a := range page.Approvals {
			if !slices.Contains(skip, a.ID) {
				found = a
				return nil
			}
		}
		return fmt.Errorf("%d pending approvals from coder", len(page.Approvals))
	}))
	return found
}

// The PreToolUse hook on one node blocks a gated command until an
// approval made through another node lets it through, and denies the
// next one when it is rejected; a command no gate matches prints nothing.
func TestGateHookBlocksUntilApprovedThroughAnotherNode(t *testing.T) {
	c := clustertest.New(t, 3)
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	registerAgents(t, n0.Client, "alice") // the gate's approver
	gate := filepath.Join(t.TempDir(), "gate.yaml")
	harness.NoErr(t, os.WriteFile(gate, []byte(gatePolicyYAML), 0o600))
	hook := func(event string) *ctlRun {
		return startCtl(t, event, "--addr", n0.Addr, "hook", "claude-code", "--agent", "coder", "--gate", gate)
	}

	if out := runCtlStdin(t, preToolUse("ls -la", "tu-0"), "--addr", n0.Addr, "hook", "claude-code", "--agent", "coder", "--gate", gate); out != "" {
		t.Errorf("an ungated command: the hook printed %q, want nothing", out)
	}

	push := hook(preToolUse("git push origin main", "tu-1"))
	a := gatedApproval(t, n1.Client)
	var action struct {
		ToolName  string          `json:"tool_name"`
		ToolInput json.RawMessage `json:"tool_input"`
		Agent     string          `json:"agent"`
	}
	harness.NoErr(t, json.Unmarshal(a.Action, &action))
	if action.ToolName != "Bash" || action.Agent != "coder" || !strings.Contains(string(action.ToolInput), "git push origin main") {
		t.Fatalf("the gate's approval is for %s, want coder's Bash git push", a.Action)
	}
	push.running(t, "before the approval")
	_, err := decide(n2.Client, api.ApprovalDecideCommand{ID: a.ID, Approver: "alice", Decision: api.DecisionApprove, ActionHash: a.ActionHash})
	harness.NoErr(t, err)
	if code := push.exit(t); code != 0 {
		t.Fatalf("hook exited %d, want 0\nstderr:\n%s", code, push.stderr.String())
	}
	if d, reason := hookDecision(t, push.stdout.String()); d != "allow" || !strings.Contains(reason, "alice") {
		t.Errorf("approved: the hook answered %s (%q), want allow naming alice", d, reason)
	}

	deploy := hook(preToolUse("./deploy.sh prod", "tu-2"))
	b := gatedApproval(t, n2.Client, a.ID)
	deploy.running(t, "before the rejection")
	_, err = decide(n1.Client, api.ApprovalDecideCommand{ID: b.ID, Approver: "alice", Decision: api.DecisionReject,
		ActionHash: b.ActionHash, Comment: "not on a Friday"})
	harness.NoErr(t, err)
	if code := deploy.exit(t); code != 0 {
		t.Fatalf("hook exited %d, want 0\nstderr:\n%s", code, deploy.stderr.String())
	}
	if d, reason := hookDecision(t, deploy.stdout.String()); d != "deny" || !strings.Contains(reason, "alice") {
		t.Errorf("rejected: the hook answered %s (%q), want deny naming alice", d, reason)
	}
}

// runCtlStdin is runCtl with stdin.
func runCtlStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := startCtl(t, stdin, args...)
	if code := r.exit(t); code != 0 {
		t.Fatalf("maosctl %q exited %d\nstdout:\n%s\nstderr:\n%s", args, code, r.stdout.String(), r.stderr.String())
	}
	return r.stdout.String()
}
