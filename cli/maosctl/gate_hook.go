package maosctl

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// The gate's answer to a PreToolUse event: a call a gate matches files an
// approval (or waits on a pending one for the same action), waits for the
// decision within the gate's timeout, and is let through or denied.

// hookToolCall answers a tool-call event (PreToolUse, Gemini CLI's
// BeforeTool) in dialect d: nothing when no gate policy
// is set or no gate matches the call, else the gate's verdict. It never
// fails the agent's turn, and nothing it cannot check runs unreviewed:
// a policy it cannot read denies every call the hook sees, and a matching
// call is denied when there is no --agent, the address is malformed, or
// the node does not answer or refuses the request. Each of these is also
// one line on stderr.
func hookToolCall(c *cli.Context, d hookDialect, in hookInput, note func(string, error) error) error {
	deny := func(err error) error {
		note(in.HookEventName, err)
		return writeHookAnswer(c, in.HookEventName, d.gate(gateVerdict{Reason: err.Error()}, in.ToolInput), note)
	}
	path := strings.TrimSpace(c.String("gate"))
	if path == "" {
		return nil
	}
	policy, err := loadGatePolicy(path)
	if err != nil {
		return deny(fmt.Errorf("%w; until it is fixed every call this hook sees is denied, so that nothing gated runs unreviewed", err))
	}
	g := policy.match(in.ToolName, in.ToolInput)
	if g == nil {
		return nil
	}
	refused := func(err error) error {
		return deny(fmt.Errorf("this %s call needs an approval (%s), which could not be requested: %w", in.ToolName, g.describe(), err))
	}
	if err := require(c, "agent"); err != nil {
		return refused(err)
	}
	if err := checkAddr("--addr (or $"+envAddr+")", nodeAddr(c)); err != nil {
		return refused(err)
	}
	call := gateCall{
		Agent: strings.TrimSpace(c.String("agent")), ToolName: in.ToolName, ToolInput: in.ToolInput,
		Cwd: in.Cwd, SessionID: in.SessionID, ToolUseID: in.ToolUseID,
	}
	r := gateRun{client: apiClient(c), ctl: ctlCommand(c), maxTime: c.Duration("max-time"),
		readFailed: func(a *api.Approval, err error) {
			note(in.HookEventName, fmt.Errorf("approval %s is %s; its decisions could not be read: %w", a.ID, a.State, err))
		}}
	v, err := r.decide(commandContext(c), g, call)
	if err != nil {
		return refused(apiError(c, err))
	}
	return writeHookAnswer(c, in.HookEventName, d.gate(v, in.ToolInput), note)
}

// gateCall is the tool call of a PreToolUse event.
type gateCall struct {
	Agent     string
	ToolName  string
	ToolInput json.RawMessage
	Cwd       string
	SessionID string
	ToolUseID string
}

// gateAction is the action an approval of a call holds: exactly what the
// call would do, so the approvers decide on it and its hash.
type gateAction struct {
	Agent     string          `json:"agent"`
	Cwd       string          `json:"cwd"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolName  string          `json:"tool_name"`
}

// action is the call's action in canonical JSON and its hash.
func (c gateCall) action() (json.RawMessage, string, error) {
	input := c.ToolInput
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	raw, err := json.Marshal(gateAction{Agent: c.Agent, Cwd: c.Cwd, ToolInput: input, ToolName: c.ToolName})
	if err != nil {
		return nil, "", fmt.Errorf("the call's action: %w", err)
	}
	canon, err := api.CanonicalJSON(raw)
	if err != nil {
		return nil, "", fmt.Errorf("the call's action: %w", err)
	}
	hash, err := api.ActionHash(canon)
	if err != nil {
		return nil, "", fmt.Errorf("the call's action: %w", err)
	}
	return canon, hash, nil
}

// gateApprovalID is the id of the approval a call files:
// gate-{agent}-{16 hex digits} derived from the agent, the action's hash,
// the session and the tool use, so a hook run again for the same call
// files once. A call without a tool-use id gets a random one: an approval
// is for one call, never for the next call that looks the same.
func gateApprovalID(c gateCall, hash string) string {
	use := c.ToolUseID
	if use == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
		use = "random:" + hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{c.Agent, hash, c.SessionID, use}, "\x00")))
	return "gate-" + c.Agent + "-" + hex.EncodeToString(sum[:8])
}

// gateVerdict is the gate's answer to one call.
type gateVerdict struct {
	Allow  bool
	Reason string
	// UpdatedInput is the tool input an approver's modify put in place of
	// the call's, for an allow.
	UpdatedInput json.RawMessage
}

// gateRun decides calls against one node.
type gateRun struct {
	client *client.Client
	// ctl starts every command a reason prints (ctlCommand).
	ctl string
	// maxTime bounds each request; the wait is bounded by the gate.
	maxTime time.Duration
	// readFailed is told when the approval, final or out of time, could
	// not be read again for its decisions (the verdict then names no
	// approvers).
	readFailed func(*api.Approval, error)
}

// decide files (or joins) the approval call needs under g, waits for its
// decision within g.Timeout of filing it, and says what the hook
// answers. An error means the node could not be asked (unreachable, the
// request refused): the caller denies the call saying so.
func (r gateRun) decide(ctx context.Context, g *gate, call gateCall) (gateVerdict, error) {
	action, hash, err := call.action()
	if err != nil {
		return gateVerdict{}, err
	}
	// Finding or filing the approval is bounded per request (maxTime), the
	// wait for its decision by the gate's timeout: a short gate timeout
	// means "no decision in time", never a request that could not be made.
	a, err := r.pending(ctx, call.Agent, hash)
	if err != nil {
		return gateVerdict{}, err
	}
	if a == nil {
		if a, err = r.file(ctx, g, call, action, hash); err != nil {
			return gateVerdict{}, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	if !a.State.Final() {
		reread := func() (context.Context, context.CancelFunc) { return within(ctx, r.maxTime) }
		// The gate's time up (wctx ended, ctx did not) is an answer: no
		// decision in time; anything else that ends the wait is an error.
		if a, err = awaitApproval(wctx, r.client, a, reread, r.readFailed); err != nil && (wctx.Err() == nil || ctx.Err() != nil) {
			return gateVerdict{}, fmt.Errorf("wait for approval %s: %w", a.ID, err)
		}
	}
	return r.verdict(g, call, hash, a), nil
}

// pending is the oldest pending approval agent requested for the action
// with hash, or nil: a call retried after the hook gave up waits on it
// rather than filing another. A pending approval has let nothing through,
// so waiting on it never reuses a decision.
func (r gateRun) pending(ctx context.Context, agent, hash string) (*api.Approval, error) {
	q := api.ApprovalQuery{From: agent, State: api.ApprovalPending, Limit: hookPageLimit}
	for range hookMaxPages {
		rctx, cancel := within(ctx, r.maxTime)
		page, err := r.client.Approvals(rctx, q)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list the pending approvals of %s: %w", agent, err)
		}
		for _, a := range page.Approvals {
			if a.ActionHash == hash {
				rctx, cancel := within(ctx, r.maxTime)
				full, err := r.client.Approval(rctx, a.ID)
				cancel()
				if err != nil {
					return nil, fmt.Errorf("read approval %s: %w", a.ID, err)
				}
				return full, nil
			}
		}
		if !page.HasMore || len(page.Approvals) == 0 {
			return nil, nil
		}
		q.After = page.Approvals[len(page.Approvals)-1].Seq
	}
	return nil, nil
}

// file requests the approval of call and reads it back.
func (r gateRun) file(ctx context.Context, g *gate, call gateCall, action json.RawMessage, hash string) (*api.Approval, error) {
	cmd := api.ApprovalRequestCommand{
		ID:                gateApprovalID(call, hash),
		From:              call.Agent,
		Approvers:         g.Approvers,
		Quorum:            g.Quorum,
		Title:             gateTitle(call),
		ApprovalNeededFor: fmt.Sprintf("a %s call by %s in %s (maos %s)", call.ToolName, call.Agent, call.Cwd, g.describe()),
		Action:            action,
		Rationale:         gateRationale(call),
		Priority:          api.PriorityHigh,
		Timeout:           api.ApprovalTimeout(g.Expires),
	}
	rctx, cancel := within(ctx, r.maxTime)
	res, err := r.client.RequestApproval(rctx, cmd)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("request approval %s: %w", cmd.ID, err)
	}
	rctx, cancel = within(ctx, r.maxTime)
	a, err := r.client.Approval(rctx, res.ID)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("read approval %s: %w", res.ID, err)
	}
	return a, nil
}

// verdict is the answer approval a gives call (whose action hash is hash).
func (r gateRun) verdict(g *gate, call gateCall, hash string, a *api.Approval) gateVerdict {
	ref := "approval " + a.ID
	switch a.State {
	case api.ApprovalApproved:
		by := ""
		if who := approvers(a, api.DecisionApprove); len(who) > 0 {
			by = " by " + strings.Join(who, ", ")
		}
		if a.ActionHash == hash {
			return gateVerdict{Allow: true, Reason: fmt.Sprintf("approved%s (%s)", by, ref)}
		}
		// Approved after a modify: the call may run as changed when only
		// its input changed; anything else is another action.
		mod := gateLastDecision(a, api.DecisionModify)
		var changed gateAction
		if err := json.Unmarshal(a.Action, &changed); err == nil && len(changed.ToolInput) > 0 &&
			changed.Agent == call.Agent && changed.Cwd == call.Cwd && changed.ToolName == call.ToolName {
			reason := fmt.Sprintf("approved%s with changes", by)
			if mod != nil {
				reason += " by " + mod.Approver + gateComment(mod)
			}
			return gateVerdict{Allow: true, Reason: reason + " (" + ref + ")", UpdatedInput: changed.ToolInput}
		}
		return gateVerdict{Reason: fmt.Sprintf("%s was approved for another action than this call: %s. Run that instead if it is what you mean (it asks for approval again)",
			ref, oneLine(string(a.Action)))}
	case api.ApprovalRejected:
		reason := "rejected"
		if d := gateLastDecision(a, api.DecisionReject); d != nil {
			reason += " by " + d.Approver + gateComment(d)
		}
		return gateVerdict{Reason: fmt.Sprintf("%s (%s). Do not retry this call; ask the approver or change the plan", reason, ref)}
	case api.ApprovalExpired:
		return gateVerdict{Reason: fmt.Sprintf("%s expired with no decision (%d of %d approvals). Run the call again to ask anew", ref, a.Approvals, a.Quorum)}
	case api.ApprovalCancelled:
		return gateVerdict{Reason: fmt.Sprintf("%s was cancelled. Run the call again to ask anew", ref)}
	}
	return gateVerdict{Reason: fmt.Sprintf("no decision on %s within %s (%d of %d approvals). It stays pending until %s: "+
		"an approver can still approve it (%s approval approve %s) or reject it. Run this same call again to wait for it once more "+
		"(the retry waits on %s, it files no second approval)",
		ref, g.Timeout, a.Approvals, a.Quorum, a.Deadline.UTC().Format(time.RFC3339), r.ctl, a.ID, a.ID)}
}

// gateLastDecision is a's last decision of the kind, or nil.
func gateLastDecision(a *api.Approval, decision string) *api.ApprovalDecision {
	for i := len(a.Decisions) - 1; i >= 0; i-- {
		if a.Decisions[i].Decision == decision {
			return &a.Decisions[i]
		}
	}
	return nil
}

// gateComment is ": comment" on one line, or "" for none.
func gateComment(d *api.ApprovalDecision) string {
	if c := oneLine(d.Comment); c != "" {
		return ": " + c
	}
	return ""
}

// gateTitle names the call for the approvers: the tool and its command
// (Bash), file (Edit, Write) or input, on one line.
func gateTitle(c gateCall) string {
	var in map[string]any
	_ = json.Unmarshal(c.ToolInput, &in)
	for _, k := range []string{"command", "file_path", "path", "url"} {
		if s, ok := in[k].(string); ok && strings.TrimSpace(s) != "" {
			return oneLine(c.ToolName + ": " + s)
		}
	}
	return oneLine(c.ToolName + ": " + gateInputText(c.ToolInput))
}

// gateRationale is what the call says of itself (Claude Code's Bash
// description) and where it comes from.
func gateRationale(c gateCall) string {
	var in struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(c.ToolInput, &in)
	s := fmt.Sprintf("session %s, tool use %s", c.SessionID, c.ToolUseID)
	if d := oneLine(in.Description); d != "" {
		s = "the agent says: " + d + " (" + s + ")"
	}
	return s
}

// hookPermissionOutput is the answer to PreToolUse, in the shape Claude
// Code and Codex both read (permissionAnswer).
type hookPermissionOutput struct {
	HookSpecificOutput hookPermission `json:"hookSpecificOutput"`
}

type hookPermission struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
}
