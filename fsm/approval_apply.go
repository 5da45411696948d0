package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// What the approval commands share with each other and with the tasks'
// (task_apply.go): an approval's transition is planned on the entry's
// taskOp beside the tasks' (approvalChange) and written by the same
// commit, so an entry that decides an approval and moves the task that
// opened it (and that task's dependents) checks everything first and
// writes nothing when anything refuses.

// AuditApproval is the audit kind of the lines approvals write:
// HITL_REQUEST, HITL_DECISION, HITL_ESCALATED, HITL_EXPIRED,
// HITL_CANCELLED.
const AuditApproval = "approval"

// approvalChange is one approval's transition in an entry: before is its
// moving keys before it (the zero value for a new one); a new approval
// also records its id with the request's sum.
type approvalChange struct {
	before approvalKeys
	ap     *api.Approval
	ev     api.ApprovalEvent
	isNew  bool
	sum    [32]byte
}

// approvalEvent is ap's event by actor in this entry, on its current hash.
func (a *taskOp) approvalEvent(ap *api.Approval, actor, event, comment string) api.ApprovalEvent {
	return api.ApprovalEvent{Seq: a.index, Time: a.now(), Actor: actor, Event: event, ActionHash: ap.ActionHash, Comment: comment}
}

// changeApproval plans ap's transition (before: approvalKeysOf, taken
// before the change) and its audit line.
func (a *taskOp) changeApproval(before approvalKeys, ap *api.Approval, ev api.ApprovalEvent, line api.AuditEvent) {
	a.approvals = append(a.approvals, approvalChange{before: before, ap: ap, ev: ev})
	a.approvalLine(ap, line)
}

// approvalLine plans an audit line about ap: kind approval, naming its
// request message.
func (a *taskOp) approvalLine(ap *api.Approval, line api.AuditEvent) {
	line.Kind, line.MessageID = AuditApproval, ap.MessageID
	a.lines = append(a.lines, line)
}

// openApproval opens the approval cmd (normalized and valid) asks for, in
// reply to inReplyTo ("" for none): its id must be new (a
// *ConflictError otherwise; the request's own retry is answered before);
// its hitl_approval_request message goes through send (the rules may
// refuse it, and with it the request); then the approval, its id and
// its HITL_REQUEST line are planned.
func (a *taskOp) openApproval(cmd *api.ApprovalRequestCommand, inReplyTo string) (*api.Approval, error) {
	if rec, ok := getApprovalID(a.tx, cmd.ID); ok {
		return nil, conflict("approval id %s is taken by another approval (requested at seq %d): request yours with a new id", cmd.ID, rec.seq)
	}
	action, err := api.CanonicalJSON(cmd.Action)
	if err != nil {
		return nil, api.FieldErrorf("action", "not one JSON value: %v", err)
	}
	hash, err := api.ActionHash(action)
	if err != nil {
		return nil, api.FieldErrorf("action", "not one JSON value: %v", err)
	}
	timeout := time.Duration(cmd.Timeout)
	ap := &api.Approval{
		ID: cmd.ID, Seq: a.index, From: cmd.From, Approvers: cmd.Approvers, Quorum: cmd.Quorum, Title: cmd.Title,
		ApprovalNeededFor: cmd.ApprovalNeededFor, Action: action, ActionHash: hash, Rationale: cmd.Rationale,
		Confidence: cmd.Confidence, Priority: cmd.Priority, TimeoutSeconds: int(timeout / time.Second), OnTimeout: cmd.OnTimeout,
		TaskID: cmd.TaskID, Channel: cmd.Channel, Options: cmd.Options, Context: cmd.Context,
		State: api.ApprovalPending, Deadline: *a.at(timeout), Created: a.now(),
	}
	m := requestMessage(ap, inReplyTo)
	ap.MessageID = m.ID
	if err := a.send(&m); err != nil {
		return nil, err
	}
	a.approvals = append(a.approvals, approvalChange{ap: ap, ev: a.approvalEvent(ap, ap.From, "requested", ""), isNew: true, sum: requestSum(cmd)})
	a.approvalLine(ap, api.AuditEvent{From: ap.From, To: ap.Approvers, Label: "HITL_REQUEST",
		Text: fmt.Sprintf("%s (%d of %d)", api.FirstLine(ap.Title, 200), ap.Quorum, len(ap.Approvers))})
	return ap, nil
}

// approvalResult is the command's answer for ap after the entry.
func (a *taskOp) approvalResult(ap *api.Approval) *api.ApprovalResult {
	return &api.ApprovalResult{ID: ap.ID, Seq: a.index, State: ap.State, ActionHash: ap.ActionHash, Approvals: ap.Approvals, Quorum: ap.Quorum}
}

// MayDecide reports whether agent (registered as a; nil when it is not)
// is a listed approver of ap: by its id, or by its registered role for a
// "role:NAME" entry. Decisions are held to it, and the stream's ?agent=
// filter carries the approvals an agent may decide by it.
func MayDecide(agent string, a *api.Agent, ap *api.Approval) bool {
	return slices.Contains(ap.Approvers, agent) || (a != nil && slices.Contains(ap.Approvers, api.RolePrefix+a.Role))
}

// mayDecide refuses (a *ForbiddenError naming the list) an agent that is
// not a listed approver of ap.
func mayDecide(tx *bbolt.Tx, ap *api.Approval, agent string) error {
	a, err := loadAgent(tx, agent)
	if err != nil {
		return err
	}
	if MayDecide(agent, a, ap) {
		return nil
	}
	role := "not a registered agent"
	if a != nil {
		role = "role " + a.Role
	}
	return &api.ForbiddenError{Reason: fmt.Sprintf("approval %s is decided by %s: %s (%s) is not one of them", ap.ID, strings.Join(ap.Approvers, ", "), agent, role)}
}

// linkedTask is the task that opened ap and awaits it, as the plan leaves
// it so far, or nil: an approval names its task_id, and the task names
// the approval it awaits (ApprovalID). A client's approval that names a
// task moves nothing.
func (a *taskOp) linkedTask(ap *api.Approval) (*api.Task, error) {
	if ap.TaskID == "" {
		return nil, nil
	}
	rec, ok := getTaskID(a.tx, ap.TaskID)
	if !ok {
		return nil, nil
	}
	t, err := a.load(rec.seq)
	if err != nil {
		return nil, err
	}
	if t.State != api.TaskAwaitingApproval || t.ApprovalID != ap.ID {
		return nil, nil
	}
	return t, nil
}

// settleTask plans what ap's outcome does to the task that opened it
// (linkedTask), by actor, through the tasks' one cascade: approved →
// succeeded (its dependents may become ready); rejected, expired,
// cancelled → failed with error_type approval_rejected, approval_expired,
// approval_cancelled, its completion reply from SystemSender queued to
// its creator, its dependents failed; modified (a task's approval its
// approver answers with another action) → running again for its
// claimant under a new fence (this entry's index) and lease, with the
// approved action.
func (a *taskOp) settleTask(ap *api.Approval, actor string, modified bool) error {
	t, err := a.linkedTask(ap)
	if t == nil || err != nil {
		return err
	}
	before := keysOf(t)
	if modified {
		t.State, t.Fence, t.Completion = api.TaskRunning, a.index, nil
		t.LeaseExpires = a.at(time.Duration(t.TimeoutSeconds) * time.Second)
		t.ApprovedAction = ap.Action
		a.change(before, t, a.event(actor, "modified", fmt.Sprintf("approval %s: %s changed the action (%s); back to %s, fence %d, lease until %s",
			ap.ID, actor, ap.ActionHash, t.ClaimedBy, t.Fence, stamp(*t.LeaseExpires))))
		return nil
	}
	if ap.State == api.ApprovalApproved {
		t.State = api.TaskSucceeded
		a.change(before, t, a.event(actor, "approved", "approval "+ap.ID))
		return a.cascade(t)
	}
	errType := map[api.ApprovalState]string{api.ApprovalRejected: api.TaskErrorApprovalRejected, api.ApprovalExpired: api.TaskErrorApprovalExpired,
		api.ApprovalCancelled: api.TaskErrorApprovalCancelled}[ap.State]
	why := fmt.Sprintf("approval %s of its completion was %s", ap.ID, ap.State)
	if ap.State != api.ApprovalExpired {
		why += " by " + actor
	}
	t.State = api.TaskFailed
	t.Completion = &api.TaskCompletion{Status: api.TaskStatusFailure, Result: why,
		Error: &api.TaskError{ErrorType: errType, ErrorMessage: why, SuggestedAction: "read the approval's decisions, then create the task again"}}
	a.change(before, t, a.event(actor, "failed", errType+": "+why), completionReply(t, api.SystemSender, a.ts))
	return a.cascade(t)
}

// approvalMeta is the metadata {"approval_id","action_hash","quorum"}
// (and "task_id", "state" when set), in key order.
func approvalMeta(ap *api.Approval, state api.ApprovalState) json.RawMessage {
	m := map[string]any{"approval_id": ap.ID, "action_hash": ap.ActionHash, "quorum": ap.Quorum}
	if ap.TaskID != "" {
		m[api.MetaTaskID] = ap.TaskID
	}
	if state != "" {
		m["state"] = state
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("fsm: approval %s: encode metadata: %v", ap.ID, err))
	}
	return b
}

// requestMessage is ap's hitl_approval_request from its requester to its
// approvers: the title, the rationale and the action with its hash as
// text, correlation_id the approval.
func requestMessage(ap *api.Approval, inReplyTo string) api.Message {
	text := textOr(ap.Rationale, ap.Title) + "\n\naction " + ap.ActionHash + ":\n" + string(ap.Action)
	return api.Message{
		ID:            api.DerivedID(ap.From, ap.Created, "approval:"+ap.ID),
		Channel:       ap.Channel,
		From:          ap.From,
		To:            api.Recipients(slices.Clone(ap.Approvers)),
		Type:          api.TypeHITLRequest,
		Title:         ap.Title,
		Priority:      ap.Priority,
		Content:       api.Content{Text: text},
		InReplyTo:     inReplyTo,
		CorrelationID: ap.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      approvalMeta(ap, ""),
	}
}

// decisionMessage is the hitl_decision about ap's outcome to its
// requester, from from (the deciding approver, or SystemSender) at ts, in
// reply to the request message; text says what happened.
func decisionMessage(ap *api.Approval, from string, ts int64, text string) api.Message {
	return api.Message{
		ID:            api.DerivedID(from, time.Unix(0, ts), "approval-decision:"+ap.ID),
		Channel:       ap.Channel,
		From:          from,
		To:            api.Recipients{ap.From},
		Type:          api.TypeHITLDecision,
		Title:         api.TruncateUTF8(string(ap.State)+": "+ap.Title, api.MaxTitleLen),
		Priority:      ap.Priority,
		Content:       api.Content{Text: text},
		InReplyTo:     ap.MessageID,
		CorrelationID: ap.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      approvalMeta(ap, ap.State),
	}
}

// escalationAlert is SystemSender's high-priority alert (type alert) to target about
// ap, whose deadline passed at ts and now waits until its new deadline.
func escalationAlert(ap *api.Approval, ts int64, target string) api.Message {
	return api.Message{
		ID:       api.DerivedID(api.SystemSender, time.Unix(0, ts), "approval-escalated:"+ap.ID),
		Channel:  ap.Channel,
		From:     api.SystemSender,
		To:       api.Recipients{target},
		Type:     InterruptType, // "alert"
		Title:    api.TruncateUTF8("approval overdue: "+ap.Title, api.MaxTitleLen),
		Priority: api.PriorityHigh,
		Content: api.Content{Text: fmt.Sprintf("Approval %s (%q, requested by %s from %s, %d of %d approvals) had no decision by its deadline; it waits until %s, then expires.",
			ap.ID, ap.Title, ap.From, strings.Join(ap.Approvers, ", "), ap.Approvals, ap.Quorum, stamp(ap.Deadline))},
		InReplyTo:     ap.MessageID,
		CorrelationID: ap.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      approvalMeta(ap, ""),
	}
}

// taskApprovalRequest is the request of the approval that t's
// requires_approval completion c by its claimant opens at ts: from the
// claimant to t's creator, quorum 1, the completion's proposed action
// (absent: {"task_id","result","outputs"}), DefaultTaskApprovalTimeout,
// its id derived from the task, its attempt and fence.
func taskApprovalRequest(t *api.Task, c *api.TaskCompletion, ts int64) (*api.ApprovalRequestCommand, error) {
	action := c.ProposedAction
	if len(action) == 0 {
		var err error
		if action, err = json.Marshal(map[string]any{"task_id": t.ID, "result": c.Result, "outputs": c.Outputs}); err != nil {
			return nil, fmt.Errorf("encode the action: %w", err)
		}
	}
	key := "task-approval:" + t.ID + ":" + strconv.Itoa(t.Attempt) + ":" + strconv.FormatUint(t.Fence, 10)
	cmd := &api.ApprovalRequestCommand{
		ID:   "appr" + strings.TrimPrefix(api.DerivedID(t.ClaimedBy, time.Unix(0, ts), key), "msg"),
		From: t.ClaimedBy, Approvers: []string{t.From}, Quorum: 1, Title: t.Title,
		ApprovalNeededFor: "the completion of task " + t.ID, Action: action, Rationale: c.Rationale,
		Confidence: c.ConfidenceScore, Priority: t.Priority, Timeout: api.ApprovalTimeout(api.DefaultTaskApprovalTimeout),
		OnTimeout: api.OnTimeoutReject, TaskID: t.ID, Channel: t.Channel,
	}
	cmd.Normalize(time.Unix(0, ts))
	if err := cmd.Validate(); err != nil {
		return nil, fmt.Errorf("the approval of its %s completion: %w", api.TaskStatusRequiresApproval, err)
	}
	return cmd, nil
}
