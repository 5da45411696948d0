package fsm

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// SendResult is what applying a send returns: where the message is stored.
// Duplicate is true when the id was already stored with the same content and
// this entry stored nothing. Blocked lists the resolved recipients the rules
// kept the message from (the others got it); a retry answers the same list.
type SendResult struct {
	ID        string                 `json:"id"`
	Seq       uint64                 `json:"seq"`
	Timestamp time.Time              `json:"timestamp"`
	Blocked   []api.BlockedRecipient `json:"blocked,omitempty"`
	Duplicate bool                   `json:"-"`
}

// contentHash is the SHA-256 of the message as sent (seq zero, timestamp as
// the client gave it), so a retry of the same send matches and a reuse of
// the id for something else does not. An interrupt's alert hashes with a
// suffix, so an ordinary message cannot pass for a stored interrupt (and
// be answered as its retry) or the other way round.
func contentHash(m *api.Message, interrupt bool) ([32]byte, error) {
	c := *m
	c.Seq = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return [32]byte{}, err
	}
	if interrupt {
		b = append(b, "\x00interrupt"...)
	}
	return sha256.Sum256(b), nil
}

// applySend stores a message and delivers it. In order, before anything is
// written:
//
//   - an interrupt's alert (cmd.Interrupt) is refused unless its sender may
//     interrupt (checkInterrupt), whether or not its id is stored;
//   - an id stored before answers its original place (same content) or is a
//     conflict (other content);
//   - with known_names (set by the node that accepted a client's send),
//     a "to" naming an agent, role or capability no one answers to is a
//     *NotFoundError naming each, unless unknown_recipients is accept
//     (checkKnown);
//   - an artifact id in content.artifacts that is not stored is a
//     *FieldError on that entry (UnknownArtifactError);
//   - a reply gets its thread (fillThread); a reply to a private message
//     is made private, a code-of-conduct flag or a reply to one for
//     moderators only, whatever the client set (settleVisibility);
//   - the recipients are resolved against the registry (resolveRecipients;
//     a role, capability or glob that matches nobody is a *FieldError);
//   - a sender that is not registered is refused with ErrForbidden when
//     strict_senders is on, otherwise registered on the spot (role "agent");
//   - the rules, if any, decide per recipient; a recipient they block gets
//     no copy, which goes to the document's reroute_blocked_to instead if
//     it names an agent (reroute); if they block every one and nothing is
//     rerouted, the send fails with ErrForbidden and the reasons.
//
// Refusals by interrupt authority, strict_senders and the rules leave one
// BLOCKED audit line per refused recipient (the deliberate trace of an
// attempt) and nothing else.
// A stored message gets its resolved Recipients, a thread_id if it is a reply
// sent without one, an inbox entry and a "delivered" receipt per delivered
// recipient, a "blocked" receipt per blocked one, its thread entry, the
// "answered" receipt on its parent, a MESSAGE audit line, its BLOCKED
// lines and, if it was rerouted, a REROUTED line; with known_names, its
// sender is recorded as one (recordSender). Each distinct artifact
// it names counts it once in its Refs. The audit lines of a
// private message carry its readers (markPrivate).
//
// A message from SystemSender is refused here: only apply makes those
// (send, for a task).
func (f *FSM) applySend(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.SendCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply send: decode: %w", err)
	}
	if cmd.Message.From == api.SystemSender {
		return nil, fmt.Errorf("fsm: apply send: %w", api.ReservedName("from"))
	}
	if err := checkAgentFence(tx, leaseAgent(cmd.Message.From), cmd.AgentFence); err != nil {
		return nil, fmt.Errorf("fsm: apply send: %w", err)
	}
	res, err := f.send(tx, index, ts, &cmd, false)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// send is applySend's work, and the one way apply stores a message: a
// client's (applySend) or one a task or approval command (or the tick)
// makes (forTask). Such a message may go to a queue or role no agent
// serves yet (resolveRecipients' emptyOK); one from SystemSender is the
// system's own: never registered, never refused by strict_senders or the
// rules.
func (f *FSM) send(tx *bbolt.Tx, index uint64, ts int64, cmd *api.SendCommand, forTask bool) (*SendResult, error) {
	m := cmd.Message
	// Interrupt authority is apply's to decide, below: a client's claim
	// is not kept, nor hashed.
	m.MayInterrupt = false
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: apply send: %w", err)
	}
	if cmd.Interrupt != nil {
		if err := f.checkInterrupt(tx, index, ts, &m, cmd.Interrupt); err != nil {
			return nil, fmt.Errorf("fsm: apply send: %w", err)
		}
	}
	sum, err := contentHash(&m, cmd.Interrupt != nil)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply send: hash: %w", err)
	}
	if prev, ok := getID(tx, m.ID); ok {
		return resend(tx, &m, prev, sum)
	}
	p, err := f.checkSend(tx, index, ts, &m, cmd, forTask)
	if err != nil {
		return nil, err
	}
	f.writeSend(tx, index, ts, &m, cmd, sum, p)
	return &SendResult{ID: m.ID, Seq: index, Timestamp: m.Timestamp, Blocked: p.blocked}, nil
}

// sendPlan is what checkSend found a send may do: the artifacts it
// names, its sender (nil when not registered), who it is delivered to,
// who the rules block and where it was rerouted.
type sendPlan struct {
	arts      []*api.Artifact
	sender    *api.Agent
	delivered []recipient
	blocked   []api.BlockedRecipient
	via       *rerouted
}

// checkSend checks m, a new message, against the state and decides its
// delivery: the names it sends to (known_names), what its sender may
// read, its thread and visibility (set on m), its recipients and the
// rules, and whether its sender may interrupt (set on m). It writes
// nothing but the audit of a block.
func (f *FSM) checkSend(tx *bbolt.Tx, index uint64, ts int64, m *api.Message, cmd *api.SendCommand, forTask bool) (sendPlan, error) {
	var p sendPlan
	var err error
	// A client's send that carries known_names names only agents, roles
	// and capabilities someone answers to (known.go); a task's or an
	// approval's message was checked by its command.
	if cmd.KnownNames && !forTask {
		if err := checkKnown(tx, "to", m.From, m.To); err != nil {
			return p, fmt.Errorf("fsm: apply send: %w", err)
		}
	}
	// What the sender may read: a client's send names only artifacts and
	// threads it reads, as its token reads them: a fork's token is its
	// parent's (Principal), so a fork answers its parent's mail. What apply
	// sends for a command (forTask) was authorized by that command.
	var reader *api.Viewer
	if !forTask && !cmd.ReadsAll {
		reader = &api.Viewer{Agent: Principal(m.From)}
	}
	p.arts, err = checkArtifactRefs(tx, m, reader)
	if err != nil {
		return p, fmt.Errorf("fsm: apply send: %w", err)
	}
	parent, err := parentOf(tx, m, reader)
	if err != nil {
		return p, fmt.Errorf("fsm: apply send: in_reply_to: %w", err)
	}
	fillThread(m, parent)
	settleVisibility(m, parent)

	if err := f.applyRouting(tx, index, ts, m, forTask, &p); err != nil {
		return p, err
	}
	// Whether its sender may interrupt its recipients, decided once, here,
	// by the interrupt rule, and carried on the message: what a watcher
	// goes by before it presses a pane's interrupt key or preempts a run.
	if m.From != api.SystemSender {
		moderator := cmd.Moderator || (cmd.Interrupt != nil && cmd.Interrupt.Moderator)
		if m.MayInterrupt, _, err = f.mayInterrupt(tx, m.From, moderator); err != nil {
			return p, fmt.Errorf("fsm: apply send: %w", err)
		}
	}
	return p, nil
}

// applyRouting resolves m's recipients, its sender's role (refusing an
// unregistered sender under strict_senders) and what the rules deliver,
// block and reroute; a send the rules block entirely is refused.
func (f *FSM) applyRouting(tx *bbolt.Tx, index uint64, ts int64, m *api.Message, forTask bool, p *sendPlan) error {
	rcpts, err := resolveRecipients(tx, m, forTask)
	if err != nil {
		return fmt.Errorf("fsm: apply send: %w", err)
	}
	sender, err := loadAgent(tx, m.From)
	if err != nil {
		return fmt.Errorf("fsm: apply send: %w", err)
	}
	fromRole := api.DefaultRole
	if sender != nil {
		fromRole = sender.Role
	} else if m.From != api.SystemSender && readConfig(tx).StrictSenders {
		reason := fmt.Sprintf("sender %s is not a registered agent and strict_senders is on: register it first (maosctl agents register %s --role ROLE)", m.From, m.From)
		audit(tx, index, ts, markPrivate(api.AuditEvent{Kind: AuditBlocked, From: m.From, To: m.To, Label: "BLOCKED", Text: reason, MessageID: m.ID}, m, nil))
		return fmt.Errorf("fsm: apply send: %w", &api.ForbiddenError{Reason: reason})
	}
	delivered, blocked, err := f.applyRules(tx, m, fromRole, rcpts)
	if err != nil {
		return fmt.Errorf("fsm: apply send: rules: %w", err)
	}
	var via *rerouted
	if len(blocked) > 0 {
		if delivered, via, err = f.reroute(tx, m, delivered, blocked); err != nil {
			return fmt.Errorf("fsm: apply send: rules: %w", err)
		}
	}
	if len(rcpts) > 0 && len(delivered) == 0 {
		auditBlocked(tx, index, ts, m, delivered, blocked)
		reasons := make([]string, len(blocked))
		for i, b := range blocked {
			reasons[i] = b.ID + ": " + b.Reason
		}
		return fmt.Errorf("fsm: apply send: %w", &api.ForbiddenError{Reason: "the rules block every recipient: " + strings.Join(reasons, "; ")})
	}
	p.sender, p.delivered, p.blocked, p.via = sender, delivered, blocked, via
	return nil
}

// writeSend stores m, checked by checkSend, with sum: the sender's
// registration by send, the message, its deliveries and receipts, the
// answer it is, and its audit lines.
func (f *FSM) writeSend(tx *bbolt.Tx, index uint64, ts int64, m *api.Message, cmd *api.SendCommand, sum [32]byte, p sendPlan) {
	sender, delivered, blocked, via, arts := p.sender, p.delivered, p.blocked, p.via, p.arts
	if sender == nil && m.From != api.SystemSender {
		registerBySend(tx, index, ts, m)
	}
	if cmd.KnownNames {
		recordSender(tx, m.From, index)
	}
	m.Seq = index
	if m.Timestamp.IsZero() {
		m.Timestamp = time.Unix(0, ts).UTC()
	}
	m.Recipients = nil
	for _, r := range delivered {
		m.Recipients = append(m.Recipients, r.id)
	}
	storeMessage(tx, m, sum)
	refArtifacts(tx, arts, index)
	prio := priorityByte(m.Priority)
	for _, r := range delivered {
		deliver(tx, r.id, index, prio)
		putReceipt(tx, index, r.id, receiptRec{DeliveredAt: ts})
	}
	for _, b := range blocked {
		putReceipt(tx, index, b.ID, receiptRec{Blocked: b.Reason})
	}
	recordAnswer(tx, m, ts)
	text := m.Title
	if text == "" {
		text = api.FirstLine(m.Content.Text, 120)
	}
	audit(tx, index, ts, markPrivate(api.AuditEvent{Kind: AuditMessage, From: m.From, To: m.Recipients, Label: strings.ToUpper(m.Type),
		Text: text, MessageID: m.ID}, m, delivered))
	auditBlocked(tx, index, ts, m, delivered, blocked)
	via.audit(tx, index, ts, m, delivered)
}

// resend answers a send of an id stored before (prev): the original place
// when sum matches the stored hash (a retry), else ErrConflict. A message
// trimmed by retention keeps its id, so a late retry still answers the
// original seq instead of storing it again.
func resend(tx *bbolt.Tx, m *api.Message, prev idRecord, sum [32]byte) (*SendResult, error) {
	if prev.sum != sum {
		return nil, fmt.Errorf("fsm: apply send: %w", conflict("id %s is already stored with other content: a retry must send the same message; new content needs a new id", m.ID))
	}
	res := &SendResult{ID: m.ID, Seq: prev.seq, Blocked: blockedOf(tx, prev.seq), Duplicate: true}
	if stored, err := getMessage(tx, prev.seq); err == nil {
		res.Timestamp = stored.Timestamp
	} else if !errors.Is(err, api.ErrNotFound) {
		return nil, fmt.Errorf("fsm: apply send: %w", err)
	}
	return res, nil
}

// applyRules splits the resolved recipients of m, sent by an agent of
// fromRole, into those the rules document (if any) lets it reach and those
// it blocks, with the rule's reason. The rules do not speak to
// SystemSender's messages.
func (f *FSM) applyRules(tx *bbolt.Tx, m *api.Message, fromRole string, rcpts []recipient) ([]recipient, []api.BlockedRecipient, error) {
	if m.From == api.SystemSender {
		return rcpts, nil, nil
	}
	rules, err := f.rules.load(tx)
	if err != nil || rules == nil {
		return rcpts, nil, err
	}
	var delivered []recipient
	var blocked []api.BlockedRecipient
	for _, r := range rcpts {
		if ok, reason := rules.Allows(m.From, fromRole, r.id, r.role); ok {
			delivered = append(delivered, r)
		} else {
			blocked = append(blocked, api.BlockedRecipient{ID: r.id, Reason: reason})
		}
	}
	return delivered, blocked, nil
}

// auditBlocked writes one BLOCKED line per recipient the rules kept m from.
func auditBlocked(tx *bbolt.Tx, index uint64, ts int64, m *api.Message, delivered []recipient, blocked []api.BlockedRecipient) {
	for _, b := range blocked {
		audit(tx, index, ts, markPrivate(api.AuditEvent{Kind: AuditBlocked, From: m.From, To: []string{b.ID}, Label: "BLOCKED", Text: b.Reason, MessageID: m.ID}, m, delivered))
	}
}

// registerBySend registers the sender of m, unknown so far, with the
// default role: the first send of an agent registers it.
func registerBySend(tx *bbolt.Tx, index uint64, ts int64, m *api.Message) {
	now := time.Unix(0, ts).UTC()
	a := api.Agent{ID: m.From, Role: api.DefaultRole, Auto: true, RegisteredAt: now, UpdatedAt: now, Index: index}
	putAgent(tx, nil, &a)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditAgent, From: a.ID, Label: "REGISTER",
		Text: "role " + a.Role + " (registered by its first send)", MessageID: auditMessageID(m)})
}
