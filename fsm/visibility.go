package fsm

import (
	"encoding/json"
	"slices"
	"strings"
)

// Private messages.
//
// A message sent with visibility "private" is readable only by its
// parties and by moderators. Its parties are the sender, the agents it
// was delivered to (Recipients: "to" resolved, @mentions included) and
// the agents its "to" names by id (a recipient the rules blocked
// included). The state stores private messages like any other, the same
// on every node; each read path decides per reader with a Viewer, so
// nothing about a reader ever reaches the log. The audit events of a
// private send carry Private and the message's readers (stored at apply
// time), so the trail can be redacted per reader without reading the
// message.
//
// A message for moderators only (VisibilityModerators: seed 004's
// code-of-conduct flags) is narrower: its sender, the agents its "to"
// names by id, and moderators; "all", a role, a glob or an @mention
// delivers it to nobody else. The state machine makes a message so at
// apply whatever its sender set (settleVisibility), so import, the API
// and every client store it the same way.

// VisibilityPrivate is the Visibility of a message only its parties and
// moderators may read.
const VisibilityPrivate = "private"

// VisibilityModerators is the Visibility of a message only moderators,
// its sender and the agents its "to" names by id may read.
const VisibilityModerators = "moderators"

// Seed 004's marks of a message for moderators only: its message type,
// and its privacy_level (kept under metadata by the dialect mapping).
const (
	TypeCoCViolationFlag = "coc_violation_flag"
	PrivacyModerators    = "PRIVATE_TO_MODERATORS"
)

// Restricted reports whether a message of visibility vis is not for
// everyone: private or for moderators ("" is public, as stored before
// visibility was normalized).
func Restricted(vis string) bool { return vis != "" && vis != VisibilityPublic }

// Public reports whether everyone may read m: it is neither private nor
// for moderators only.
func (m *Message) Public() bool { return !Restricted(m.Visibility) }

// Viewer is who reads: the agent of an authenticated request, and whether
// it moderates (may read every private message). A nil *Viewer is a read
// on a node without authentication: unrestricted.
type Viewer struct {
	Agent     string
	Moderator bool
}

// CanRead reports whether v may read m: always for a public message, a
// nil viewer or a moderator; for a private message only when v.Agent is
// its sender, one of its Recipients or an agent its "to" names by id; for
// a message for moderators only when v.Agent is its sender or an agent
// its "to" names by id. An identity with no agent (Agent "") reads
// neither.
func (v *Viewer) CanRead(m *Message) bool {
	if v == nil || v.Moderator || m.Public() {
		return true
	}
	if v.Agent == "" {
		return false
	}
	if v.Agent == m.From || NamesAgent(m.To, v.Agent) {
		return true
	}
	return m.Visibility == VisibilityPrivate && slices.Contains(m.Recipients, v.Agent)
}

// CanReadEvent reports whether v may see audit event e whole: always for
// an event that is not Private, a nil viewer or a moderator; otherwise
// only when v.Agent is its From, in its To or in its Readers. (An event
// stored before Readers existed is judged on From and To alone.)
func (v *Viewer) CanReadEvent(e *AuditEvent) bool {
	if v == nil || v.Moderator || !e.Private {
		return true
	}
	if v.Agent == "" {
		return false
	}
	return v.Agent == e.From || slices.Contains(e.To, v.Agent) || slices.Contains(e.Readers, v.Agent)
}

// NamesAgent reports whether a "to" list names agent by its id (not
// through "all", a role or a glob).
func NamesAgent(to []string, agent string) bool {
	for _, r := range to {
		if r == agent && AddressKindOf(r) == AddressAgent {
			return true
		}
	}
	return false
}

// RedactEvent is e as a reader who may not read its private message sees
// it: the seq, index, time and kind stay, so the trail has no gap; the
// parties, the message id and the text do not. The line reads
// "[2025-10-20T14:30:45Z] MESSAGE: (private)". Events that are not
// Private are returned as they are.
func RedactEvent(e AuditEvent) AuditEvent {
	if !e.Private {
		return e
	}
	return AuditEvent{Seq: e.Seq, Index: e.Index, Time: e.Time, Kind: e.Kind,
		Label: strings.ToUpper(e.Kind), Text: PrivateText, Private: true}
}

// markPrivate marks ev, an audit event of sending m, when m is private
// or for moderators: Private, and Readers set to the agents other than
// the sender who may read m (delivered, then the agents "to" names by id,
// without repeats; a message for moderators is delivered to no one else).
// A public m leaves ev as it is, so the trail of public sends is byte for
// byte what it was before private messages were redacted per reader.
func markPrivate(ev AuditEvent, m *Message, delivered []recipient) AuditEvent {
	if m.Public() {
		return ev
	}
	ev.Private = true
	ev.Readers = nil
	seen := map[string]bool{m.From: true}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ev.Readers = append(ev.Readers, id)
		}
	}
	for _, r := range delivered {
		add(r.id)
	}
	for _, r := range m.To {
		if AddressKindOf(r) == AddressAgent {
			add(r)
		}
	}
	return ev
}

// settleVisibility fixes m's visibility at apply, whatever its sender set:
//
//   - seed 004's code-of-conduct flag (type coc_violation_flag, or
//     metadata.privacy_level PRIVATE_TO_MODERATORS, in any case) is for
//     moderators only, and so is an answer to a message for moderators;
//   - an answer to a private message (parent, nil for none) is private:
//     an answer usually quotes what only the parties may read, so no
//     client stores one readable by all. The reply's own parties (its
//     sender and recipients) read it; the original's other parties do
//     not, unless the reply names them.
func settleVisibility(m, parent *Message) {
	switch {
	case forModerators(m), parent != nil && parent.Visibility == VisibilityModerators:
		m.Visibility = VisibilityModerators
	case parent != nil && parent.Visibility == VisibilityPrivate:
		m.Visibility = VisibilityPrivate
	}
}

// forModerators reports whether m is marked for moderators only: its
// visibility says so, it is a coc_violation_flag, or its metadata's
// privacy_level is PRIVATE_TO_MODERATORS.
func forModerators(m *Message) bool {
	if m.Visibility == VisibilityModerators || m.Type == TypeCoCViolationFlag {
		return true
	}
	if len(m.Metadata) == 0 {
		return false
	}
	var md struct {
		PrivacyLevel string `json:"privacy_level"`
	}
	return json.Unmarshal(m.Metadata, &md) == nil && strings.EqualFold(md.PrivacyLevel, PrivacyModerators)
}

// auditMessageID is the message id an audit event that is not itself
// about m's content (the sender's registration by its first send) may
// name: none for a private m, whose id alone would tell a reader of the
// trail that it exists.
func auditMessageID(m *Message) string {
	if !m.Public() {
		return ""
	}
	return m.ID
}
