package fsm

import (
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

// VisibilityPrivate is the Visibility of a message only its parties and
// moderators may read.
const VisibilityPrivate = "private"

// Viewer is who reads: the agent of an authenticated request, and whether
// it moderates (may read every private message). A nil *Viewer is a read
// on a node without authentication: unrestricted.
type Viewer struct {
	Agent     string
	Moderator bool
}

// CanRead reports whether v may read m: always for a public message, a
// nil viewer or a moderator; for a private message only when v.Agent is
// its sender, one of its Recipients or an agent its "to" names by id.
// An identity with no agent (Agent "") reads no private message.
func (v *Viewer) CanRead(m *Message) bool {
	if v == nil || v.Moderator || m.Visibility != VisibilityPrivate {
		return true
	}
	if v.Agent == "" {
		return false
	}
	return v.Agent == m.From || slices.Contains(m.Recipients, v.Agent) || namesAgent(m.To, v.Agent)
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

// namesAgent reports whether a "to" list names agent by its id (not
// through "all", a role or a glob).
func namesAgent(to []string, agent string) bool {
	for _, r := range to {
		if r == agent && recipientKind(r) == kindAgent {
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

// markPrivate marks ev, an audit event of sending m, when m is private:
// Private, and Readers set to the agents other than the sender who may
// read m (delivered, then the agents "to" names by id, without repeats).
// A public m leaves ev as it is, so the trail of public sends is byte for
// byte what it was before private messages were redacted per reader.
func markPrivate(ev AuditEvent, m *Message, delivered []recipient) AuditEvent {
	if m.Visibility != VisibilityPrivate {
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
		if recipientKind(r) == kindAgent {
			add(r)
		}
	}
	return ev
}

// inheritPrivacy makes m private when it answers a private message
// (parent, nil for none): an answer usually quotes what only the parties
// may read, so no client, whatever it sets, stores one readable by all.
// The reply's own parties (its sender and recipients) read it; the
// original's other parties do not, unless the reply names them.
func inheritPrivacy(m, parent *Message) {
	if parent != nil && parent.Visibility == VisibilityPrivate {
		m.Visibility = VisibilityPrivate
	}
}

// auditMessageID is the message id an audit event that is not itself
// about m's content (the sender's registration by its first send) may
// name: none for a private m, whose id alone would tell a reader of the
// trail that it exists.
func auditMessageID(m *Message) string {
	if m.Visibility == VisibilityPrivate {
		return ""
	}
	return m.ID
}
