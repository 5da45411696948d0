package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The task ops.
const (
	// OpTaskCreate creates a task and posts its task_delegation message
	// (body: TaskCreateCommand).
	OpTaskCreate Op = "task_create"
	// OpTaskClaim makes an agent of the task's queue its claimant
	// (body: TaskClaimCommand).
	OpTaskClaim Op = "task_claim"
	// OpTaskProgress records progress and renews the lease
	// (body: TaskProgressCommand).
	OpTaskProgress Op = "task_progress"
	// OpTaskComplete ends a running task with a completion and posts the
	// task_completion reply to its creator (body: TaskCompleteCommand).
	OpTaskComplete Op = "task_complete"
	// OpTaskHandoff hands a running task to another assignee: back to
	// ready, for the new one (body: TaskHandoffCommand).
	OpTaskHandoff Op = "task_handoff"
	// OpTaskCancel cancels a task that has not ended (body:
	// TaskCancelCommand).
	OpTaskCancel Op = "task_cancel"
)

// TaskState is where a task is in its lifecycle.
type TaskState string

// The task states. The last three are final.
const (
	TaskWaiting TaskState = "waiting" // a dependency has not succeeded yet
	TaskReady   TaskState = "ready"   // claimable (from ReadyAt on)
	TaskRunning TaskState = "running" // claimed, under a lease
	// TaskAwaitingApproval: completed with requires_approval; its
	// approval (ApprovalID) decides. No lease; dependents keep waiting.
	TaskAwaitingApproval TaskState = "awaiting_approval"
	TaskSucceeded        TaskState = "succeeded" // completed with success or partial_success
	TaskFailed           TaskState = "failed"    // completed with failure, timed out at max attempts, or a dependency failed
	TaskCancelled        TaskState = "cancelled" // cancelled by its creator
)

// TaskStates lists the states in lifecycle order.
var TaskStates = []TaskState{TaskWaiting, TaskReady, TaskRunning, TaskAwaitingApproval, TaskSucceeded, TaskFailed, TaskCancelled}

// Final reports whether no transition leaves s.
func (s TaskState) Final() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskCancelled
}

// Completion statuses (seed 004 task_completion "status").
const (
	TaskStatusSuccess          = "success"
	TaskStatusFailure          = "failure"
	TaskStatusPartialSuccess   = "partial_success"
	TaskStatusRequiresApproval = "requires_approval"
)

// TaskStatuses lists the completion statuses.
var TaskStatuses = []string{TaskStatusSuccess, TaskStatusFailure, TaskStatusPartialSuccess, TaskStatusRequiresApproval}

// Error types maos itself sets on a failed task (seed 004 error.error_type).
const (
	TaskErrorTimeout          = "timeout"           // the lease expired max_attempts times
	TaskErrorDependencyFailed = "dependency_failed" // a task it depends on failed or was cancelled
	// The approval of its requires_approval completion ended otherwise
	// than approved.
	TaskErrorApprovalRejected  = "approval_rejected"
	TaskErrorApprovalExpired   = "approval_expired"
	TaskErrorApprovalCancelled = "approval_cancelled"
)

// Task limits and defaults.
const (
	DefaultTaskTimeout     = 300 * time.Second // a claim's lease (timeout_seconds)
	MaxTaskTimeoutSeconds  = 7 * 24 * 3600
	DefaultTaskMaxAttempts = 5
	MaxTaskAttempts        = 100
	MaxTaskDependencies    = 64
	MaxTaskTextBytes       = 64 << 10 // description, result
	MaxTaskJSONBytes       = 64 << 10 // context, flags, metrics, outputs, each action
	MaxTaskActions         = 50       // actions_taken
	MaxTaskListEntries     = 256      // next_steps, outputs
	MaxTaskNoteRunes       = 1000     // rationale, reason, progress message, error fields
	// DefaultTaskApprovalTimeout is how long the approval a
	// requires_approval completion opens waits for the task's creator:
	// a person's answer, not a lease's, so a day whatever the task's
	// timeout_seconds.
	DefaultTaskApprovalTimeout = 24 * time.Hour
)

// Task is a task as the state holds it and the API returns it.
type Task struct {
	ID    string `json:"id"`
	Seq   uint64 `json:"seq"` // index of the entry that created it
	From  string `json:"from"`
	To    string `json:"to"` // agent, "role:NAME" or "capability:NAME"
	Title string `json:"title"`
	// Description is the work, in words (seed 004 task.description).
	Description    string          `json:"description,omitempty"`
	Priority       Priority        `json:"priority"`
	Context        json.RawMessage `json:"context,omitempty"`
	DependsOn      []string        `json:"depends_on,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	// MaxAttempts bounds the leases that may lapse (Expiries): the one
	// that lapses at it fails the task. A handoff uses no attempt.
	MaxAttempts  int    `json:"max_attempts"`
	RequiresHITL bool   `json:"requires_hitl,omitempty"`
	Channel      string `json:"channel"`
	// MessageID is the task_delegation message that announced it.
	MessageID string `json:"message_id"`

	State     TaskState `json:"state"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	// Attempt counts the claims so far (0 before the first).
	Attempt int `json:"attempt"`
	// Expiries counts the leases that lapsed; it picks the backoff.
	Expiries     int        `json:"expiries,omitempty"`
	Fence        uint64     `json:"fence,omitempty"`
	LeaseExpires *time.Time `json:"lease_expires,omitempty"`
	// ReadyAt is when a ready task may be claimed (after a backoff).
	ReadyAt *time.Time `json:"ready_at,omitempty"`
	// Progress is the claimant's last report, 0..1, and its words.
	Progress        *float64        `json:"progress,omitempty"`
	ProgressMessage string          `json:"progress_message,omitempty"`
	Completion      *TaskCompletion `json:"completion,omitempty"`
	// ApprovalID is the approval its last requires_approval completion
	// opened; ApprovedAction the action its approver wrote when it
	// modified it (the task then runs again to carry it out).
	ApprovalID     string          `json:"approval_id,omitempty"`
	ApprovedAction json.RawMessage `json:"approved_action,omitempty"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// History is every transition, oldest first; filled by the one-task
	// query (GET /v1/tasks/{id}), left out of lists.
	History []TaskEvent `json:"history,omitempty"`
}

// TaskEvent is one transition in a task's history.
type TaskEvent struct {
	Seq   uint64    `json:"seq"` // index of the entry
	Time  time.Time `json:"time"`
	Actor string    `json:"actor"` // the agent, or "maos" for expiry and cascades
	// Event is what happened: created, claimed, progress, completed,
	// handoff, cancelled, expired, ready (dependencies met), failed
	// (a dependency failed, or the last lease expired).
	Event string    `json:"event"`
	State TaskState `json:"state"` // the state after it
	// Detail is the event's words: a reason, a progress message, the
	// completion status, the new assignee.
	Detail string `json:"detail,omitempty"`
}

// TaskCompletion is seed 004's task_completion body.
type TaskCompletion struct {
	Status          string            `json:"status"`
	Result          string            `json:"result,omitempty"`
	ConfidenceScore *float64          `json:"confidence_score,omitempty"`
	ExecutionTimeMS int64             `json:"execution_time_ms,omitempty"`
	ActionsTaken    []json.RawMessage `json:"actions_taken,omitempty"`
	Rationale       string            `json:"rationale,omitempty"`
	NextSteps       []string          `json:"next_steps,omitempty"`
	Flags           json.RawMessage   `json:"flags,omitempty"`
	Metrics         json.RawMessage   `json:"metrics,omitempty"`
	Outputs         []string          `json:"outputs,omitempty"`
	Error           *TaskError        `json:"error,omitempty"`
	// ProposedAction is the action a requires_approval completion asks
	// its creator to approve (any JSON; absent: {"task_id","result",
	// "outputs"}). Only that status carries one.
	ProposedAction json.RawMessage `json:"proposed_action,omitempty"`
}

// TaskError is seed 004's task_completion "error".
type TaskError struct {
	ErrorType       string `json:"error_type"`
	ErrorMessage    string `json:"error_message,omitempty"`
	ErrorCode       string `json:"error_code,omitempty"`
	RetryCount      int    `json:"retry_count,omitempty"`
	IsRecoverable   bool   `json:"is_recoverable,omitempty"`
	SuggestedAction string `json:"suggested_action,omitempty"`
}

// TaskCreateCommand is the body of OpTaskCreate and of POST /v1/tasks.
// Normalize fills the defaults; ID is fixed by the client (or the
// accepting node) before the first try, so a retried create is stored once.
type TaskCreateCommand struct {
	ID             string          `json:"id"`
	From           string          `json:"from"`
	To             string          `json:"to"`
	Title          string          `json:"title"`
	Description    string          `json:"description,omitempty"`
	Priority       Priority        `json:"priority,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	DependsOn      []string        `json:"depends_on,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	RequiresHITL   bool            `json:"requires_hitl,omitempty"`
	Channel        string          `json:"channel,omitempty"`
	// KnownNames is set by the node that accepts the command (Addressing):
	// apply refuses a "to" no one answers to, unless unknown_recipients is
	// accept (known.go). A client's value is replaced.
	KnownNames bool `json:"known_names,omitempty" openapi:"-"`
}

// NewTaskID returns a task id: task-YYYYMMDD-HHMMSS-{from}-{8 hex digits},
// t in UTC.
func NewTaskID(from string, t time.Time) string {
	return "task" + strings.TrimPrefix(NewID(from, t), "msg")
}

// Normalize fills the defaults: an id (from now), priority normal, the
// default timeout and attempts, the default channel; compacts context.
func (c *TaskCreateCommand) Normalize(now time.Time) {
	if c.ID == "" && ValidName(c.From) {
		c.ID = NewTaskID(c.From, now)
	}
	if c.Priority == "" {
		c.Priority = DefaultPriority
	}
	if c.TimeoutSeconds == 0 {
		c.TimeoutSeconds = int(DefaultTaskTimeout / time.Second)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultTaskMaxAttempts
	}
	if c.Channel == "" {
		c.Channel = DefaultChannel
	}
	c.Context = compactRaw(c.Context)
}

// Validate checks a normalized create: each error is a *FieldError naming
// the field and the limit.
func (c *TaskCreateCommand) Validate() error {
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "%q: want 1..%d of A-Z a-z 0-9 . _ : - starting with a letter or digit", c.ID, MaxIDLen)
	}
	if err := CheckAgentField("from", c.From); err != nil {
		return err
	}
	if err := validTaskAssignee("to", c.To); err != nil {
		return err
	}
	if strings.TrimSpace(c.Title) == "" {
		return FieldErrorf("title", "required")
	}
	if len(c.Title) > MaxTitleLen {
		return FieldErrorf("title", "%d bytes, at most %d", len(c.Title), MaxTitleLen)
	}
	if len(c.Description) > MaxTaskTextBytes {
		return FieldErrorf("description", "%d bytes, at most %d", len(c.Description), MaxTaskTextBytes)
	}
	if !ValidPriority(c.Priority) {
		return FieldErrorf("priority", "%q: want one of %s", c.Priority, PriorityList())
	}
	if err := validTaskJSON("context", c.Context); err != nil {
		return err
	}
	if len(c.DependsOn) > MaxTaskDependencies {
		return FieldErrorf("depends_on", "%d tasks, at most %d", len(c.DependsOn), MaxTaskDependencies)
	}
	for i, d := range c.DependsOn {
		f := fmt.Sprintf("depends_on[%d]", i)
		switch {
		case !idRE.MatchString(d):
			return FieldErrorf(f, "%q is not a task id", d)
		case d == c.ID:
			return FieldErrorf(f, "a task cannot depend on itself")
		case slices.Contains(c.DependsOn[:i], d):
			return FieldErrorf(f, "%q is listed twice", d)
		}
	}
	if c.TimeoutSeconds < 1 || c.TimeoutSeconds > MaxTaskTimeoutSeconds {
		return FieldErrorf("timeout_seconds", "%d: want 1..%d", c.TimeoutSeconds, MaxTaskTimeoutSeconds)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxTaskAttempts {
		return FieldErrorf("max_attempts", "%d: want 1..%d", c.MaxAttempts, MaxTaskAttempts)
	}
	if !ValidName(c.Channel) {
		return NameError("channel", c.Channel)
	}
	return nil
}

// TaskClaimCommand is the body of OpTaskClaim (POST /v1/tasks/{id}/claim).
type TaskClaimCommand struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// AgentFence, when set, must be the agent's current lease fence
	// (agent_lease.go): a watcher that lost the agent's lease cannot
	// report the task. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
}

// Validate checks the claim's fields.
func (c *TaskClaimCommand) Validate() error {
	return cmp.Or(CheckTaskRef(c.ID), CheckAgentField("agent", c.Agent))
}

// TaskProgressCommand is the body of OpTaskProgress (POST
// /v1/tasks/{id}/progress): seed 002 §6 {"type":"status","message",
// "progress"}. It renews the lease from the entry's time.
type TaskProgressCommand struct {
	ID       string   `json:"id"`
	Agent    string   `json:"agent"`
	Fence    uint64   `json:"fence"`
	Message  string   `json:"message,omitempty"`
	Progress *float64 `json:"progress,omitempty"`
	// AgentFence, when set, must be the agent's current lease fence
	// (agent_lease.go): a watcher that lost the agent's lease cannot
	// report the task. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
}

// Validate checks the report's fields and limits.
func (c *TaskProgressCommand) Validate() error {
	return cmp.Or(validClaimant(c.ID, c.Agent, c.Fence), validNote("message", c.Message), validUnit("progress", c.Progress))
}

// TaskCompleteCommand is the body of OpTaskComplete (POST
// /v1/tasks/{id}/complete): the claimant's completion under its fence.
type TaskCompleteCommand struct {
	ID         string         `json:"id"`
	Agent      string         `json:"agent"`
	Fence      uint64         `json:"fence"`
	Completion TaskCompletion `json:"completion"`
	// AgentFence, when set, must be the agent's current lease fence
	// (agent_lease.go): a watcher that lost the agent's lease cannot
	// report the task. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
}

// Validate checks the claimant and every completion field.
func (c *TaskCompleteCommand) Validate() error {
	return cmp.Or(validClaimant(c.ID, c.Agent, c.Fence), c.Completion.Validate())
}

// Validate checks a completion against seed 004's fields and maos' limits.
func (tc *TaskCompletion) Validate() error {
	if !slices.Contains(TaskStatuses, tc.Status) {
		return FieldErrorf("status", "%q: want one of %s", tc.Status, strings.Join(TaskStatuses, ", "))
	}
	if len(tc.Result) > MaxTaskTextBytes {
		return FieldErrorf("result", "%d bytes, at most %d", len(tc.Result), MaxTaskTextBytes)
	}
	if err := validUnit("confidence_score", tc.ConfidenceScore); err != nil {
		return err
	}
	if tc.ExecutionTimeMS < 0 {
		return FieldErrorf("execution_time_ms", "%d: must not be negative", tc.ExecutionTimeMS)
	}
	if len(tc.ActionsTaken) > MaxTaskActions {
		return FieldErrorf("actions_taken", "%d actions, at most %d", len(tc.ActionsTaken), MaxTaskActions)
	}
	for i, a := range tc.ActionsTaken {
		if err := validTaskJSON(fmt.Sprintf("actions_taken[%d]", i), a); err != nil {
			return err
		}
	}
	if err := validNote("rationale", tc.Rationale); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"next_steps", tc.NextSteps}, {"outputs", tc.Outputs}} {
		if len(l.list) > MaxTaskListEntries {
			return FieldErrorf(l.name, "%d entries, at most %d", len(l.list), MaxTaskListEntries)
		}
		for i, s := range l.list {
			if err := validNote(fmt.Sprintf("%s[%d]", l.name, i), s); err != nil {
				return err
			}
		}
	}
	for _, j := range []struct {
		name string
		v    json.RawMessage
	}{{"flags", tc.Flags}, {"metrics", tc.Metrics}} {
		if err := validTaskJSON(j.name, j.v); err != nil {
			return err
		}
	}
	if len(tc.ProposedAction) > 0 {
		if tc.Status != TaskStatusRequiresApproval {
			return FieldErrorf("proposed_action", "only a %s completion proposes an action (status is %q)", TaskStatusRequiresApproval, tc.Status)
		}
		if err := validAction("proposed_action", tc.ProposedAction); err != nil {
			return err
		}
	}
	if e := tc.Error; e != nil {
		if strings.TrimSpace(e.ErrorType) == "" {
			return FieldErrorf("error.error_type", "required in an error")
		}
		for _, f := range []struct{ name, v string }{{"error.error_type", e.ErrorType}, {"error.error_message", e.ErrorMessage},
			{"error.error_code", e.ErrorCode}, {"error.suggested_action", e.SuggestedAction}} {
			if err := validNote(f.name, f.v); err != nil {
				return err
			}
		}
		if e.RetryCount < 0 {
			return FieldErrorf("error.retry_count", "%d: must not be negative", e.RetryCount)
		}
	}
	return nil
}

// TaskHandoffCommand is the body of OpTaskHandoff (POST
// /v1/tasks/{id}/handoff): the claimant gives the task to To, which gets it
// ready (seed 002 §3 Handoff).
type TaskHandoffCommand struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	Fence  uint64 `json:"fence"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
	// AgentFence, when set, must be the agent's current lease fence
	// (agent_lease.go): a watcher that lost the agent's lease cannot
	// report the task. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
	// KnownNames is set by the node that accepts the command (Addressing):
	// apply refuses a "to" no one answers to, unless unknown_recipients is
	// accept (known.go). A client's value is replaced.
	KnownNames bool `json:"known_names,omitempty" openapi:"-"`
}

// Validate checks the claimant, the new assignee and the reason.
func (c *TaskHandoffCommand) Validate() error {
	return cmp.Or(validClaimant(c.ID, c.Agent, c.Fence), validTaskAssignee("to", c.To), validNote("reason", c.Reason))
}

// TaskCancelCommand is the body of OpTaskCancel (POST
// /v1/tasks/{id}/cancel). Only the task's creator cancels it.
type TaskCancelCommand struct {
	ID     string `json:"id"`
	From   string `json:"from"`
	Reason string `json:"reason,omitempty"`
}

// Validate checks the cancel's fields.
func (c *TaskCancelCommand) Validate() error {
	return cmp.Or(CheckTaskRef(c.ID), CheckAgentField("from", c.From), validNote("reason", c.Reason))
}

// TaskResult is what every task command answers: the task's state after
// the entry, and for a claim the lease it holds.
type TaskResult struct {
	ID           string     `json:"id"`
	Seq          uint64     `json:"seq"` // index of the entry that made this state
	State        TaskState  `json:"state"`
	Attempt      int        `json:"attempt,omitempty"`
	Fence        uint64     `json:"fence,omitempty"`
	LeaseExpires *time.Time `json:"lease_expires,omitempty"`
}

// TaskQuery selects tasks for GET /v1/tasks; empty fields match all.
// Tasks come in creation order, after After (a task's Seq), at most Limit.
type TaskQuery struct {
	State     TaskState `json:"state,omitempty"`
	To        string    `json:"to,omitempty"`
	From      string    `json:"from,omitempty"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	After     uint64    `json:"after,omitempty"`
	Limit     int       `json:"limit,omitempty"`
}

// TaskPage is one page of a task list.
type TaskPage struct {
	Tasks   []*Task `json:"tasks"`
	HasMore bool    `json:"has_more"`
}

// Task assignee prefixes: a work queue that exactly one matching agent
// claims.
const (
	RolePrefix       = "role:"
	CapabilityPrefix = "capability:"
)

// validTaskAssignee checks an agent id (not SystemSender, not "all",
// which addresses everyone), role:NAME or capability:NAME.
func validTaskAssignee(field, to string) error {
	name, prefixed := strings.CutPrefix(to, RolePrefix)
	if !prefixed {
		name, prefixed = strings.CutPrefix(to, CapabilityPrefix)
	}
	if !ValidName(name) {
		if prefixed {
			return NameError(field, to)
		}
		return FieldErrorf(field, "%q: want an agent id, role:NAME or capability:NAME (%s)", to, NamePattern)
	}
	if to == SystemSender {
		return ReservedName(field)
	}
	if AddressKindOf(to) == AddressAll {
		return FieldErrorf(field, "%q addresses every agent; a task goes to one agent, role:NAME or capability:NAME", to)
	}
	return nil
}

// CheckAgentField checks an agent id acting on a task: a name, not
// SystemSender.
func CheckAgentField(field, id string) error {
	if !ValidName(id) {
		return NameError(field, id)
	}
	if id == SystemSender {
		return ReservedName(field)
	}
	return nil
}

// CheckTaskRef checks a task id a command refers to (ErrInvalid).
func CheckTaskRef(id string) error {
	if !idRE.MatchString(id) {
		return FieldErrorf("id", "%q is not a task id", id)
	}
	return nil
}

// validClaimant checks the task, agent and fence of a claimant's report.
func validClaimant(id, agent string, fence uint64) error {
	if err := cmp.Or(CheckTaskRef(id), CheckAgentField("agent", agent)); err != nil {
		return err
	}
	if fence == 0 {
		return FieldErrorf("fence", "required: the fence of your claim (from the claim's answer)")
	}
	return nil
}

func validNote(field, s string) error {
	if n := utf8.RuneCountInString(s); n > MaxTaskNoteRunes {
		return FieldErrorf(field, "%d characters, at most %d", n, MaxTaskNoteRunes)
	}
	if !utf8.ValidString(s) {
		return FieldErrorf(field, "not valid UTF-8")
	}
	return nil
}

func validUnit(field string, v *float64) error {
	if v != nil && !(*v >= 0 && *v <= 1) {
		return FieldErrorf(field, "%v: want 0..1", *v)
	}
	return nil
}

func validTaskJSON(field string, v json.RawMessage) error {
	if len(v) == 0 {
		return nil
	}
	if len(v) > MaxTaskJSONBytes {
		return FieldErrorf(field, "%d bytes, at most %d", len(v), MaxTaskJSONBytes)
	}
	if !json.Valid(v) {
		return FieldErrorf(field, "not valid JSON")
	}
	return nil
}

// compactRaw is v without insignificant space, nil for null or empty, so
// the same task sent twice hashes the same. Invalid JSON is returned as it
// is, for Validate to refuse.
func compactRaw(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(bytes.TrimSpace(v)) == "null" {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}

// FencedBy is the agent a task command acts as and the fence of that
// agent's lease it carries (0: none), for apply to check.
func (c *TaskClaimCommand) FencedBy() (agent string, fence uint64) { return c.Agent, c.AgentFence }

func (c *TaskProgressCommand) FencedBy() (agent string, fence uint64) { return c.Agent, c.AgentFence }

func (c *TaskCompleteCommand) FencedBy() (agent string, fence uint64) { return c.Agent, c.AgentFence }

func (c *TaskHandoffCommand) FencedBy() (agent string, fence uint64) { return c.Agent, c.AgentFence }

func (c *TaskClaimCommand) TaskID() string { return c.ID }

func (c *TaskProgressCommand) TaskID() string { return c.ID }

func (c *TaskCompleteCommand) TaskID() string { return c.ID }

func (c *TaskHandoffCommand) TaskID() string { return c.ID }

func (c *TaskCancelCommand) TaskID() string { return c.ID }

// DependencyMet reports whether a dependency d counts as done: succeeded
// with success or partial_success, or with requires_approval once its
// approval approved it (ApprovalID set; a task stored succeeded with that
// status before approvals existed has none and still waits). Apply holds
// depends_on to it, and a watcher the tasks its CLI says it waits for.
func DependencyMet(d *Task) bool {
	if d.State != TaskSucceeded || d.Completion == nil {
		return false
	}
	switch d.Completion.Status {
	case TaskStatusSuccess, TaskStatusPartialSuccess:
		return true
	case TaskStatusRequiresApproval:
		return d.ApprovalID != ""
	}
	return false
}

// DependencyBroken reports whether a dependency d can never be met.
func DependencyBroken(d *Task) bool { return d.State == TaskFailed || d.State == TaskCancelled }

// DependencyFailed is the completion of a task whose dependency d failed
// or was cancelled (DependencyBroken): error_type dependency_failed,
// naming d and how it ended.
func DependencyFailed(d *Task) *TaskCompletion {
	msg := fmt.Sprintf("task %s, which it depends on, %s", d.ID, brokenHow(d))
	return &TaskCompletion{Status: TaskStatusFailure, Result: msg,
		Error: &TaskError{ErrorType: TaskErrorDependencyFailed, ErrorMessage: msg, SuggestedAction: "fix or recreate " + d.ID + ", then create this task again"}}
}

// brokenHow words how a dependency ended: "failed", "failed (timeout)",
// "was cancelled".
func brokenHow(d *Task) string {
	if d.State == TaskCancelled {
		return "was cancelled"
	}
	if c := d.Completion; c != nil && c.Error != nil && c.Error.ErrorType != "" {
		return "failed (" + c.Error.ErrorType + ")"
	}
	return "failed"
}

// The message types of tasks.
const (
	TypeTaskDelegation = "task_delegation"
	TypeTaskCompletion = "task_completion"
	TypeTaskHandoff    = "handoff"
	TypeTaskIncident   = "incident"
)

// MetaTaskID is the metadata key naming the task of a delegation,
// handoff or incident message.
const MetaTaskID = "task_id"

// Validate checks the query's names (a *FieldError naming the field).
func (q *TaskQuery) Validate() error {
	if q.State != "" && !slices.Contains(TaskStates, q.State) {
		return FieldErrorf("state", "%q: want one of %s", q.State, joinStates(TaskStates))
	}
	if q.To != "" {
		if err := validTaskAssignee("to", q.To); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{{"from", q.From}, {"claimed_by", q.ClaimedBy}} {
		if f.v != "" && !ValidName(f.v) {
			return NameError(f.name, f.v)
		}
	}
	return nil
}

// joinStates is states as a list for an error: "waiting, ready, …".
func joinStates[S ~string](states []S) string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return strings.Join(out, ", ")
}

// TaskUpdate is one task event with the task as it stood right after the
// entry that made it (without history): the data of the stream's "task"
// events, {"event": …, "task": …}.
type TaskUpdate struct {
	Event TaskEvent `json:"event"`
	Task  *Task     `json:"task"`
}

// TaskUpdatePage is a page of task updates in entry order.
type TaskUpdatePage struct {
	Updates []TaskUpdate `json:"updates"`
	// HasMore is true when entries after the page's last made updates.
	HasMore bool `json:"has_more"`
}
