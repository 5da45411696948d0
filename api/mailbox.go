package api

import (
	"time"
)

// SendCommand is the body of OpSend: the message as the client sent it,
// normalized and validated by the proposer (seq zero; timestamp zero unless
// the client set one).
type SendCommand struct {
	Message Message `json:"message"`
	// Interrupt, when set, makes the message an interrupt's alert: apply
	// refuses it unless the sender may interrupt (checkInterrupt). Only
	// the API's interrupt endpoint sets it.
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	// AgentFence, when set, is the fence of the sender's agent lease
	// (agent_lease.go; a fork's is its parent's): apply refuses the send
	// with a *FenceError unless it is the current grant's, so a watcher
	// that lost the lease cannot answer. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
	// Moderator is true when the request's bearer token moderates (a
	// moderator's or an admin's), which may always interrupt: apply
	// stamps the stored message's MayInterrupt with it. The node that
	// authenticated the request sets it; without authentication no sender
	// is one.
	Moderator bool `json:"moderator,omitempty"`
	// ReadsAll is true when the sender reads every message and artifact:
	// a moderator's or an admin's token, or a node without --auth. Without
	// it a client's send may name only artifacts its sender reads, and a
	// reply to a message its sender may not read is stored as a reply to
	// an unknown id (nothing of the hidden message is copied onto it).
	ReadsAll bool `json:"reads_all,omitempty"`
	// KnownNames is set by the node that accepts a client's send
	// (Addressing): apply refuses a "to" naming an agent, role or
	// capability no one answers to, unless unknown_recipients is accept,
	// and records the sender (known.go). An entry without it (committed
	// by an older build) applies as it always did.
	KnownNames bool `json:"known_names,omitempty"`
}

// Normalize is the message's: the node that accepts a send fills what
// the client left out (Message.Normalize).
func (c *SendCommand) Normalize(now time.Time) { c.Message.Normalize(now) }

// Validate is the message's own check (Message.Validate).
func (c *SendCommand) Validate() error { return c.Message.Validate() }

// OpMarkRead marks inbox entries read (body: MarkReadCommand).
const OpMarkRead Op = "mark_read"

// MarkReadCommand is the body of OpMarkRead: mark one message (ID) or
// every unread message up to and including seq Upto read in Agent's inbox.
// Exactly one of ID and Upto is given.
type MarkReadCommand struct {
	Agent string `json:"agent"`
	ID    string `json:"id,omitempty"`
	Upto  uint64 `json:"upto,omitempty"`
}

// Validate checks the agent id and that exactly one of id and upto is set.
func (c *MarkReadCommand) Validate() error {
	if c.Agent == "" {
		return FieldErrorf("agent", "required")
	}
	if !ValidName(c.Agent) {
		return NameError("agent", c.Agent)
	}
	switch {
	case c.ID == "" && c.Upto == 0:
		return FieldErrorf("id", "give a message id, or upto: a seq (everything up to it is marked read)")
	case c.ID != "" && c.Upto != 0:
		return FieldErrorf("upto", "give either id or upto, not both")
	case c.ID != "" && !idRE.MatchString(c.ID):
		return FieldErrorf("id", "must be a message id matching %s", idRE)
	}
	return nil
}

// InboxQuery filters an inbox page. Unread and Priority are answered from
// the index (Unread reads only the unread range; Priority is in each index
// value); Type and From read each message of the range scanned, at most
// MaxInboxScan entries per query.
type InboxQuery struct {
	Unread   bool     `json:"unread,omitempty"`
	Priority Priority `json:"priority,omitempty"`
	Type     string   `json:"type,omitempty"`
	From     string   `json:"from,omitempty"`
	After    uint64   `json:"after,omitempty"` // seq, exclusive
	Limit    int      `json:"limit,omitempty"` // ≤ 0: DefaultPageLimit; capped at MaxPageLimit
	// Newest lists newest first, from Before (exclusive; 0: the newest
	// entry) down to After; the next page is the same query with
	// Before=NextBefore.
	Newest bool   `json:"newest,omitempty"`
	Before uint64 `json:"before,omitempty"`
}

// Validate checks the filters.
func (q *InboxQuery) Validate() error {
	if q.Priority != "" && !ValidPriority(q.Priority) {
		return FieldErrorf("priority", "must be one of %s", PriorityList())
	}
	if q.Type != "" && !ValidName(q.Type) {
		return NameError("type", q.Type)
	}
	if q.From != "" && !ValidName(q.From) {
		return NameError("from", q.From)
	}
	if q.Limit > MaxPageLimit {
		return FieldErrorf("limit", "%d, at most %d", q.Limit, MaxPageLimit)
	}
	if q.Before != 0 && !q.Newest {
		return FieldErrorf("before", "only with newest (oldest-first pages go on with after)")
	}
	if q.Before != 0 && q.Before <= q.After+1 {
		return FieldErrorf("before", "%d leaves nothing after %d", q.Before, q.After)
	}
	return nil
}

// InboxEntry is a message in an inbox with the agent's read flag.
type InboxEntry struct {
	Message
	Read bool `json:"read"`
}

// Receipt states, from the least to the furthest.
const (
	ReceiptBlocked   = "blocked"   // the rules kept it out of the inbox
	ReceiptDelivered = "delivered" // in the recipient's inbox
	ReceiptRead      = "read"      // the recipient marked it read
	ReceiptAnswered  = "answered"  // a reply from the recipient arrived
	// ReceiptNoSuchAgent: in the inbox of a name no agent answers to
	// (neither registered nor a sender nor a token's agent; known.go),
	// decided when the receipts are read: stored under
	// unknown_recipients accept, or before names were checked. It reads
	// delivered once such an agent exists.
	ReceiptNoSuchAgent = "no_such_agent"
)

// Receipt is one recipient's delivery state of a message. Times are entry
// times (UTC), left out when the state was not reached.
//
// State is, from the furthest: blocked; answered; read; then what the
// recipient's watcher reported (OpReceiptState): interrupted (typed into
// the agent's pane after interrupting it), delivered (typed into its pane
// or handed to its CLI), queued (held until the agent is idle); and
// delivered (in the inbox) when no watcher reported anything, or
// no_such_agent when no agent answers to the recipient's name. DeliveredAt
// is when it reached the inbox, TypedAt when the watcher delivered it.
type Receipt struct {
	Agent         string    `json:"agent"`
	State         string    `json:"state"` // blocked, no_such_agent, queued, delivered, interrupted, read or answered
	DeliveredAt   time.Time `json:"delivered_at,omitzero"`
	QueuedAt      time.Time `json:"queued_at,omitzero"`
	TypedAt       time.Time `json:"typed_at,omitzero"`
	InterruptedAt time.Time `json:"interrupted_at,omitzero"`
	ReadAt        time.Time `json:"read_at,omitzero"`
	AnsweredAt    time.Time `json:"answered_at,omitzero"`
	ReplyID       string    `json:"reply_id,omitempty"` // the answering message
	Blocked       string    `json:"blocked,omitempty"`  // the rule's reason
}

// Reached reports whether the receipt got to state (delivered, read or
// answered): an answered message counts as read, a read one as delivered.
// A message its watcher reported queued is delivered only once the
// watcher typed it. A blocked receipt reaches nothing, nor does one of
// no_such_agent.
func (r Receipt) Reached(state string) bool {
	if r.State == ReceiptNoSuchAgent {
		return false
	}
	switch state {
	case ReceiptDelivered:
		if !r.QueuedAt.IsZero() && r.TypedAt.IsZero() {
			return !r.ReadAt.IsZero() || !r.AnsweredAt.IsZero()
		}
		return !r.DeliveredAt.IsZero()
	case ReceiptRead:
		return !r.ReadAt.IsZero() || !r.AnsweredAt.IsZero()
	case ReceiptAnswered:
		return !r.AnsweredAt.IsZero()
	}
	return false
}

// OpReceiptState records what a recipient's watcher did with a message in
// its inbox (body: ReceiptStateCommand): holding it for an agent that is
// busy (queued), typing it into the agent's pane or handing it to the CLI
// (delivered), or typing it after interrupting the agent (interrupted).
const OpReceiptState Op = "receipt_state"

// The states a watcher reports (ReceiptStateCommand.State). delivered is
// ReceiptDelivered: once a watcher reported queued, the receipt says
// delivered only when the watcher says so.
const (
	ReceiptQueued      = "queued"      // held by the watcher until the agent is idle
	ReceiptInterrupted = "interrupted" // typed after the agent was interrupted
)

// ReceiptStateCommand reports State (queued, delivered or interrupted) of
// message ID for recipient Agent. The receipt only moves forward: queued
// or interrupted after a delivery changes nothing, a second delivered keeps
// the first time, and read and answered are never touched (a report is
// kept beside them).
type ReceiptStateCommand struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	State string `json:"state"`
}

// Validate checks the id, the agent id and the state.
func (c *ReceiptStateCommand) Validate() error {
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "must be a message id matching %s", idRE)
	}
	if !ValidName(c.Agent) {
		return NameError("agent", c.Agent)
	}
	switch c.State {
	case ReceiptQueued, ReceiptDelivered, ReceiptInterrupted:
		return nil
	}
	return FieldErrorf("state", "%q: want %s, %s or %s", c.State, ReceiptQueued, ReceiptDelivered, ReceiptInterrupted)
}

// OverviewEntry is one message as the supervisor's overview lists it: the
// headers without the content (the seed's "Master sees: Developer →
// Reviewer | Title: ..."). The whole message is one GET /v1/messages/{id}
// away.
type OverviewEntry struct {
	Seq       uint64    `json:"seq"`
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Channel   string    `json:"channel"`
	From      string    `json:"from"`
	// To is "to" as written; Recipients the agents it was delivered to.
	To         []string `json:"to"`
	Recipients []string `json:"recipients,omitempty"`
	Type       string   `json:"type,omitempty"`
	Priority   Priority `json:"priority,omitempty"`
	// Title is PrivateText for a private message read on a node without
	// authentication; a reader who may read the message sees its title.
	Title   string `json:"title,omitempty"`
	Private bool   `json:"private,omitempty"`
}

// Query limits for a page of any list (a channel, an inbox, the audit
// trail, agents, locks, threads).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// ChannelInfo summarizes a channel.
type ChannelInfo struct {
	Name     string `json:"name"`
	Count    uint64 `json:"count"`     // messages stored
	FirstSeq uint64 `json:"first_seq"` // seq of the oldest message
	LastSeq  uint64 `json:"last_seq"`  // seq of the newest message
}

// Interrupt marks a send as an interrupt's alert (SendCommand.Interrupt).
// POST /v1/agents/{id}/interrupt alone sets it: POST /v1/messages decodes
// a Message, which has no such field.
type Interrupt struct {
	// Moderator is true when the request's bearer token is a moderator's
	// (or an admin's), which may always interrupt. The node that
	// authenticated the request sets it; without authentication no
	// caller is one.
	Moderator bool `json:"moderator,omitempty"`
}

// UnknownRecipients is the value of the unknown_recipients setting.
type UnknownRecipients string

// The unknown_recipients values.
const (
	// UnknownRecipientsRefuse refuses a command addressing an agent that
	// is neither registered nor has ever sent, or a role or capability no
	// agent has (404 naming each, with the closest known names). The
	// default.
	UnknownRecipientsRefuse UnknownRecipients = "refuse"
	// UnknownRecipientsAccept stores them (the inbox of a name fills
	// before its agent exists; a queue waits for its first agent).
	UnknownRecipientsAccept UnknownRecipients = "accept"
)

// CheckNames flags the send: apply refuses unknown names in "to" and
// records the sender.
func (c *SendCommand) CheckNames() { c.KnownNames = true }

// CheckNames flags the create: apply refuses an unknown "to".
func (c *TaskCreateCommand) CheckNames() { c.KnownNames = true }

// CheckNames flags the handoff: apply refuses an unknown "to".
func (c *TaskHandoffCommand) CheckNames() { c.KnownNames = true }

// CheckNames flags the request: apply refuses unknown approvers.
func (c *ApprovalRequestCommand) CheckNames() { c.KnownNames = true }

// InboxCounts are an agent's inbox counters.
type InboxCounts struct {
	Agent  string `json:"agent"`
	Total  uint64 `json:"total"`
	Unread uint64 `json:"unread"`
	// UnreadByPriority has a key for every priority (urgent, high, normal,
	// low), zeros included.
	UnreadByPriority map[Priority]uint64 `json:"unread_by_priority"`
	// ReadUpto is the highest "read up to" mark given, 0 for none.
	ReadUpto uint64 `json:"read_upto"`
}

// MarkReadResult is what applying OpMarkRead returns: how many entries
// changed from unread to read (0 when they were read already) and the
// counts after.
type MarkReadResult struct {
	Agent  string      `json:"agent"`
	Marked int         `json:"marked"`
	Counts InboxCounts `json:"counts"`
}

// InboxPage is one page of an inbox, in seq order.
type InboxPage struct {
	Agent    string       `json:"agent"`
	Messages []InboxEntry `json:"messages"`
	// HasMore is true when entries after NextAfter may match: the next
	// page is the same query with after=NextAfter.
	HasMore bool `json:"has_more"`
	// NextAfter is the seq of the last entry read (matching or not), 0 if
	// none was; for a Newest query, NextBefore is.
	NextAfter  uint64 `json:"next_after"`
	NextBefore uint64 `json:"next_before,omitempty"`
}

// OverviewPage is one page of the overview in seq order.
type OverviewPage struct {
	Messages []OverviewEntry `json:"messages"`
	// HasMore is true when messages after the last one on the page exist.
	HasMore bool `json:"has_more"`
}

// Page is one page of a channel's log in seq order.
type Page struct {
	Messages []*Message `json:"messages"`
	// HasMore is true when messages after the last one on the page exist.
	HasMore bool `json:"has_more"`
}

// BlockedRecipient is a resolved recipient the rules kept a message from.
type BlockedRecipient struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Receipts is the delivery state of one message, per recipient by id.
type Receipts struct {
	ID       string    `json:"id"`
	Seq      uint64    `json:"seq"`
	From     string    `json:"from"`
	Receipts []Receipt `json:"receipts"`
}

// ThreadPage is one page of a thread in seq order.
type ThreadPage struct {
	ThreadID string     `json:"thread_id"`
	Messages []*Message `json:"messages"`
	HasMore  bool       `json:"has_more"`
}

// Addressing is a command that names agents, roles or capabilities to
// reach: a send (interrupts included), a task's create and handoff, an
// approval's request. CheckNames sets its known_names flag; the node that
// accepts the command from a client calls it before it proposes (every
// API write ends in transport's commit, which does).
type Addressing interface {
	CheckNames()
}
