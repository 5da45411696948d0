package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The approval ops.
const (
	// OpApprovalRequest opens an approval and posts its
	// hitl_approval_request message to the approvers (body:
	// ApprovalRequestCommand).
	OpApprovalRequest Op = "approval_request"
	// OpApprovalDecide records one approver's decision (body:
	// ApprovalDecideCommand).
	OpApprovalDecide Op = "approval_decide"
	// OpApprovalCancel cancels a pending approval, by its requester (body:
	// ApprovalCancelCommand).
	OpApprovalCancel Op = "approval_cancel"
)

// ApprovalState is where an approval is.
type ApprovalState string

// The approval states; all but pending are final.
const (
	ApprovalPending   ApprovalState = "pending"
	ApprovalApproved  ApprovalState = "approved"
	ApprovalRejected  ApprovalState = "rejected"
	ApprovalExpired   ApprovalState = "expired"
	ApprovalCancelled ApprovalState = "cancelled"
)

// ApprovalStates lists the states, pending first.
var ApprovalStates = []ApprovalState{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalCancelled}

// Final reports whether no decision changes s any more.
func (s ApprovalState) Final() bool { return s != ApprovalPending && s != "" }

// The decisions (seed 004 human_decision_options).
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionModify  = "modify"
)

// Decisions lists the decisions.
var Decisions = []string{DecisionApprove, DecisionReject, DecisionModify}

// What a pending approval does at its deadline.
const (
	OnTimeoutReject   = "reject"   // expire it (the default)
	OnTimeoutEscalate = "escalate" // notify the escalation target, wait one more timeout, then expire
)

// Approval limits and defaults.
const (
	DefaultApprovalTimeout = time.Hour
	MinApprovalTimeout     = time.Second
	MaxApprovalTimeout     = 30 * 24 * time.Hour
	MaxApprovers           = 64
	MaxActionBytes         = 64 << 10 // the action's canonical JSON
)

// Approval is an approval as the state holds it and the API returns it.
type Approval struct {
	ID   string `json:"id"`
	Seq  uint64 `json:"seq"` // index of the entry that opened it
	From string `json:"from"`
	// Approvers are agent ids and "role:NAME" entries; Quorum of them
	// (distinct agents) must approve.
	Approvers         []string        `json:"approvers"`
	Quorum            int             `json:"quorum"`
	Title             string          `json:"title"`
	ApprovalNeededFor string          `json:"approval_needed_for,omitempty"`
	Action            json.RawMessage `json:"action"` // canonical JSON
	ActionHash        string          `json:"action_hash"`
	Rationale         string          `json:"rationale,omitempty"`
	Confidence        *float64        `json:"confidence,omitempty"`
	Priority          Priority        `json:"priority"`
	TimeoutSeconds    int             `json:"timeout_seconds"`
	OnTimeout         string          `json:"on_timeout"`
	TaskID            string          `json:"task_id,omitempty"`
	Channel           string          `json:"channel"`
	// Options are the decisions it takes (seed 004's
	// human_decision_options); empty: all of Decisions.
	Options []string `json:"options,omitempty"`
	// Context is what the request said besides (a JSON object), for the
	// approvers to read; not part of the action, so not of its hash.
	Context json.RawMessage `json:"context,omitempty"`
	// MessageID is the hitl_approval_request message sent to the approvers.
	MessageID string `json:"message_id"`

	State ApprovalState `json:"state"`
	// Approvals counts the distinct approvals on the current hash.
	Approvals int `json:"approvals"`
	// Deadline is when the tick expires (or escalates) it.
	Deadline  time.Time `json:"deadline"`
	Escalated bool      `json:"escalated,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	// Decisions are every decision in order, those a modify voided
	// included (Voided); filled by the one-approval query, left out of
	// lists.
	Decisions []ApprovalDecision `json:"decisions,omitempty"`
}

// ApprovalDecision is one decision as the state keeps it.
type ApprovalDecision struct {
	Seq        uint64          `json:"seq"` // index of the entry
	Time       time.Time       `json:"time"`
	Approver   string          `json:"approver"`
	Decision   string          `json:"decision"`
	ActionHash string          `json:"action_hash"` // the hash it was made on
	Comment    string          `json:"comment,omitempty"`
	Action     json.RawMessage `json:"action,omitempty"` // a modify's new action
	// Voided is true for an approval a later modify made void.
	Voided bool `json:"voided,omitempty"`
}

// ApprovalRequestCommand is the body of OpApprovalRequest and of POST
// /v1/approvals. Normalize fills the defaults; ID is fixed before the
// first try (same idempotency as a message: the same id and content
// answer the original result, other content is 409).
type ApprovalRequestCommand struct {
	ID                string          `json:"id"`
	From              string          `json:"from"`
	Approvers         []string        `json:"approvers"`
	Quorum            int             `json:"quorum,omitempty"`
	Title             string          `json:"title"`
	ApprovalNeededFor string          `json:"approval_needed_for,omitempty"`
	Action            json.RawMessage `json:"action"`
	Rationale         string          `json:"rationale,omitempty"`
	Confidence        *float64        `json:"confidence,omitempty"`
	Priority          Priority        `json:"priority,omitempty"`
	// Timeout is a duration ("10m", or seconds); TimeoutHours is seed
	// 004's form. At most one of them; neither means DefaultApprovalTimeout.
	Timeout      ApprovalTimeout `json:"timeout,omitempty"`
	TimeoutHours float64         `json:"timeout_hours,omitempty"`
	OnTimeout    string          `json:"on_timeout,omitempty"`
	TaskID       string          `json:"task_id,omitempty"`
	Channel      string          `json:"channel,omitempty"`
	// Options are the decisions the approval takes (seed 004's
	// human_decision_options): a subset of Decisions that holds approve;
	// empty means all of them. A decision outside them is refused.
	Options []string `json:"options,omitempty"`
	// Context is what the request says besides, a JSON object (seed 004's
	// other fields), kept with the approval for its approvers to read; it
	// is not the action, so not in its hash. Canonicalized by Normalize.
	Context json.RawMessage `json:"context,omitempty"`
	// KnownNames is set by the node that accepts the command (Addressing):
	// apply refuses approvers no one answers to, unless unknown_recipients is
	// accept (known.go). A client's value is replaced.
	KnownNames bool `json:"known_names,omitempty" openapi:"-"`
}

// ApprovalTimeout is a duration in JSON: a Go duration string ("10m",
// "1h30m") or a number of seconds.
type ApprovalTimeout time.Duration

// MarshalJSON writes the duration as a string such as "10m0s".
func (d ApprovalTimeout) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "10m" or a number of seconds.
func (d *ApprovalTimeout) UnmarshalJSON(b []byte) error {
	if v, ok, err := durationString(b, "timeout", `"10m" or "1h"`); ok {
		if err == nil {
			*d = ApprovalTimeout(v)
		}
		return err
	}
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return fmt.Errorf("timeout: %s is not a duration like \"10m\" or a number of seconds", b)
	}
	ns := secs * 1e9
	if ns >= math.MaxInt64 || ns <= math.MinInt64 {
		ns = math.MaxInt64 // out of range; Validate names the limit
	}
	*d = ApprovalTimeout(time.Duration(ns))
	return nil
}

// NewApprovalID returns an approval id: appr-YYYYMMDD-HHMMSS-{from}-{8 hex
// digits}, t in UTC.
func NewApprovalID(from string, t time.Time) string {
	return "appr" + strings.TrimPrefix(NewID(from, t), "msg")
}

// Normalize fills the defaults: an id (from now), quorum 1, priority
// normal, on_timeout reject, the default channel; the timeout from
// timeout_hours when that is the form given; the action in canonical form
// (left as sent if it is not JSON, for Validate to refuse).
func (c *ApprovalRequestCommand) Normalize(now time.Time) {
	if c.ID == "" && ValidName(c.From) {
		c.ID = NewApprovalID(c.From, now)
	}
	if c.Quorum == 0 {
		c.Quorum = 1
	}
	if c.Priority == "" {
		c.Priority = DefaultPriority
	}
	if c.OnTimeout == "" {
		c.OnTimeout = OnTimeoutReject
	}
	if c.Channel == "" {
		c.Channel = DefaultChannel
	}
	if c.Timeout == 0 && c.TimeoutHours > 0 && c.TimeoutHours*float64(time.Hour) < math.MaxInt64 {
		c.Timeout, c.TimeoutHours = ApprovalTimeout(time.Duration(c.TimeoutHours*float64(time.Hour))), 0
	}
	if c.Timeout == 0 && c.TimeoutHours == 0 {
		c.Timeout = ApprovalTimeout(DefaultApprovalTimeout)
	}
	if canon, err := CanonicalJSON(c.Action); err == nil {
		c.Action = canon
	}
	if canon, err := CanonicalJSON(c.Context); err == nil && len(c.Context) > 0 {
		c.Context = canon
	}
}

// Validate checks a normalized request: each error is a *FieldError naming
// the field and the limit.
func (c *ApprovalRequestCommand) Validate() error {
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "%q: want 1..%d of A-Z a-z 0-9 . _ : - starting with a letter or digit", c.ID, MaxIDLen)
	}
	if !ValidName(c.From) {
		return NameError("from", c.From)
	}
	if c.From == SystemSender {
		return ReservedName("from")
	}
	if err := validApprovers(c.Approvers); err != nil {
		return err
	}
	if c.Quorum < 1 || c.Quorum > MaxApprovers {
		return FieldErrorf("quorum", "%d: want 1..%d", c.Quorum, MaxApprovers)
	}
	if c.Quorum > len(c.Approvers) && !slices.ContainsFunc(c.Approvers, func(a string) bool { return strings.HasPrefix(a, RolePrefix) }) {
		return FieldErrorf("quorum", "%d of %d listed agents can never be reached: want at most %d, or list a role", c.Quorum, len(c.Approvers), len(c.Approvers))
	}
	if strings.TrimSpace(c.Title) == "" {
		return FieldErrorf("title", "required")
	}
	if len(c.Title) > MaxTitleLen {
		return FieldErrorf("title", "%d bytes, at most %d", len(c.Title), MaxTitleLen)
	}
	if err := validNote("approval_needed_for", c.ApprovalNeededFor); err != nil {
		return err
	}
	if err := validAction("action", c.Action); err != nil {
		return err
	}
	if err := validNote("rationale", c.Rationale); err != nil {
		return err
	}
	if err := validUnit("confidence", c.Confidence); err != nil {
		return err
	}
	if !ValidPriority(c.Priority) {
		return FieldErrorf("priority", "%q: want one of %s", c.Priority, PriorityList())
	}
	if c.TimeoutHours != 0 {
		return FieldErrorf("timeout_hours", "%v: give timeout or timeout_hours, one of them, as a positive number of hours at most %v", c.TimeoutHours, MaxApprovalTimeout.Hours())
	}
	if d := time.Duration(c.Timeout); d < MinApprovalTimeout || d > MaxApprovalTimeout {
		return FieldErrorf("timeout", "%v: want %v..%v", d, MinApprovalTimeout, MaxApprovalTimeout)
	}
	if c.OnTimeout != OnTimeoutReject && c.OnTimeout != OnTimeoutEscalate {
		return FieldErrorf("on_timeout", "%q: want %q or %q", c.OnTimeout, OnTimeoutReject, OnTimeoutEscalate)
	}
	if c.TaskID != "" && !idRE.MatchString(c.TaskID) {
		return FieldErrorf("task_id", "%q is not a task id", c.TaskID)
	}
	if !ValidName(c.Channel) {
		return NameError("channel", c.Channel)
	}
	if err := validOptions(c.Options); err != nil {
		return err
	}
	return validContext(c.Context)
}

// ApprovalDecideCommand is the body of OpApprovalDecide (POST
// /v1/approvals/{id}/decide).
type ApprovalDecideCommand struct {
	ID       string `json:"id"`
	Approver string `json:"approver"`
	Decision string `json:"decision"`
	// ActionHash is the hash of the action the approver saw.
	ActionHash string `json:"action_hash"`
	Comment    string `json:"comment,omitempty"`
	// Action is a modify's new action (required with modify, refused
	// otherwise); canonicalized by Normalize.
	Action json.RawMessage `json:"action,omitempty"`
}

// Normalize puts a modify's action in canonical form.
func (c *ApprovalDecideCommand) Normalize() {
	if canon, err := CanonicalJSON(c.Action); err == nil && len(c.Action) > 0 {
		c.Action = canon
	}
}

// Validate checks the decision's fields.
func (c *ApprovalDecideCommand) Validate() error {
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "%q is not an approval id", c.ID)
	}
	if !ValidName(c.Approver) {
		return NameError("approver", c.Approver)
	}
	if !slices.Contains(Decisions, c.Decision) {
		return FieldErrorf("decision", "%q: want one of %s", c.Decision, strings.Join(Decisions, ", "))
	}
	if !ValidActionHash(c.ActionHash) {
		return FieldErrorf("action_hash", "%q: want the sha256:<64 hex digits> of the action you decided on (GET /v1/approvals/{id})", c.ActionHash)
	}
	if err := validNote("comment", c.Comment); err != nil {
		return err
	}
	switch {
	case c.Decision == DecisionModify:
		return validAction("action", c.Action)
	case len(c.Action) > 0:
		return FieldErrorf("action", "only a modify carries an action")
	}
	return nil
}

// ApprovalCancelCommand is the body of OpApprovalCancel (POST
// /v1/approvals/{id}/cancel). Only the requester cancels.
type ApprovalCancelCommand struct {
	ID     string `json:"id"`
	From   string `json:"from"`
	Reason string `json:"reason,omitempty"`
}

// Validate checks the cancel's fields.
func (c *ApprovalCancelCommand) Validate() error {
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "%q is not an approval id", c.ID)
	}
	if !ValidName(c.From) {
		return NameError("from", c.From)
	}
	return validNote("reason", c.Reason)
}

// ApprovalResult is what every approval command answers.
type ApprovalResult struct {
	ID         string        `json:"id"`
	Seq        uint64        `json:"seq"` // index of the entry that made this state
	State      ApprovalState `json:"state"`
	ActionHash string        `json:"action_hash"`
	Approvals  int           `json:"approvals"`
	Quorum     int           `json:"quorum"`
}

// ApprovalQuery selects approvals for GET /v1/approvals; empty fields
// match all. Approver matches approvals that list the agent by id or by
// its registered role. Creation order, after After, at most Limit.
type ApprovalQuery struct {
	State    ApprovalState `json:"state,omitempty"`
	Approver string        `json:"approver,omitempty"`
	From     string        `json:"from,omitempty"`
	After    uint64        `json:"after,omitempty"`
	Limit    int           `json:"limit,omitempty"`
}

// CanonicalJSON is v's canonical form, the bytes an action hash is taken
// over: object keys sorted, no insignificant space, numbers as written
// (never rounded through float64), strings in encoding/json's escaping.
// Two documents that decode to the same value have the same canonical
// form. An error means v is not one JSON value.
func CanonicalJSON(v json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ActionHash is "sha256:" and the hex SHA-256 of the canonical JSON of
// action; an error if action is not one JSON value.
func ActionHash(action json.RawMessage) (string, error) {
	canon, err := CanonicalJSON(action)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ValidActionHash reports whether h is "sha256:" and 64 lowercase hex
// digits.
func ValidActionHash(h string) bool {
	hexPart, ok := strings.CutPrefix(h, "sha256:")
	return ok && ValidHash(hexPart)
}

func validApprovers(list []string) error {
	if len(list) == 0 {
		return FieldErrorf("approvers", "required: agent ids or role:NAME entries")
	}
	if len(list) > MaxApprovers {
		return FieldErrorf("approvers", "%d entries, at most %d", len(list), MaxApprovers)
	}
	for i, a := range list {
		f := fmt.Sprintf("approvers[%d]", i)
		name, isRole := strings.CutPrefix(a, RolePrefix)
		switch {
		case !ValidName(name):
			return FieldErrorf(f, "%q: want an agent id or role:NAME (%s)", a, NamePattern)
		case !isRole && (a == SystemSender || AddressKindOf(a) != AddressAgent):
			return FieldErrorf(f, "%q: want an agent id or role:NAME", a)
		case slices.Contains(list[:i], a):
			return FieldErrorf(f, "%q is listed twice", a)
		}
	}
	return nil
}

func validOptions(list []string) error {
	for i, o := range list {
		f := fmt.Sprintf("options[%d]", i)
		switch {
		case !slices.Contains(Decisions, o):
			return FieldErrorf(f, "%q: want one of %s", o, strings.Join(Decisions, ", "))
		case slices.Contains(list[:i], o):
			return FieldErrorf(f, "%q is listed twice", o)
		}
	}
	if len(list) > 0 && !slices.Contains(list, DecisionApprove) {
		return FieldErrorf("options", "%s: an approval that cannot be approved; list %s (or leave options out for all)",
			strings.Join(list, ", "), DecisionApprove)
	}
	return nil
}

func validContext(v json.RawMessage) error {
	if len(v) == 0 {
		return nil
	}
	canon, err := CanonicalJSON(v)
	switch {
	case err != nil || canon[0] != '{':
		return FieldErrorf("context", "want a JSON object")
	case len(canon) > MaxActionBytes:
		return FieldErrorf("context", "%d bytes in canonical form, at most %d", len(canon), MaxActionBytes)
	}
	return nil
}

func validAction(field string, v json.RawMessage) error {
	if len(bytes.TrimSpace(v)) == 0 {
		return FieldErrorf(field, "required: the proposed action, any JSON value")
	}
	canon, err := CanonicalJSON(v)
	if err != nil {
		return FieldErrorf(field, "not one JSON value: %v", err)
	}
	if len(canon) > MaxActionBytes {
		return FieldErrorf(field, "%d bytes in canonical form, at most %d", len(canon), MaxActionBytes)
	}
	return nil
}

// The message types of approvals.
const (
	TypeHITLRequest  = "hitl_approval_request"
	TypeHITLDecision = "hitl_decision"
)

// Validate checks the query's names (a *FieldError naming the field).
func (q *ApprovalQuery) Validate() error {
	if q.State != "" && !slices.Contains(ApprovalStates, q.State) {
		return FieldErrorf("state", "%q: want one of %s", q.State, joinStates(ApprovalStates))
	}
	for _, f := range []struct{ name, v string }{{"approver", q.Approver}, {"from", q.From}} {
		if f.v != "" && !ValidName(f.v) {
			return NameError(f.name, f.v)
		}
	}
	return nil
}

// ApprovalPage is one page of an approval list.
type ApprovalPage struct {
	Approvals []*Approval `json:"approvals"`
	HasMore   bool        `json:"has_more"`
}

// ApprovalEvent is one event in an approval's history: its request, each
// decision, an escalation, its expiry or cancel. The decisions of
// Approval.Decisions are read from it.
type ApprovalEvent struct {
	Seq   uint64    `json:"seq"` // index of the entry
	Time  time.Time `json:"time"`
	Actor string    `json:"actor"` // the requester, an approver, or "maos" for the tick
	// Event is requested, approve, reject, modify, escalated, expired or
	// cancelled.
	Event string        `json:"event"`
	State ApprovalState `json:"state"` // the state after it
	// ActionHash is the hash of the action the event was made on (a
	// modify: the one it replaced).
	ActionHash string `json:"action_hash"`
	// Comment is a decision's comment or a cancel's reason.
	Comment string `json:"comment,omitempty"`
	// Action is a modify's new action.
	Action json.RawMessage `json:"action,omitempty"`
}

// ApprovalUpdate is one approval event with the approval as it stood right
// after the entry that made it (without decisions): the data of the
// stream's "approval" events, {"event": …, "approval": …}.
type ApprovalUpdate struct {
	Event    ApprovalEvent `json:"event"`
	Approval *Approval     `json:"approval"`
}

// ApprovalUpdatePage is a page of approval updates in entry order.
type ApprovalUpdatePage struct {
	Updates []ApprovalUpdate `json:"updates"`
	// HasMore is true when entries after the page's last made updates.
	HasMore bool `json:"has_more"`
}
