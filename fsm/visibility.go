package fsm

import (
	"encoding/json"
	"strings"

	"github.com/maos-project/maos/api"
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

// Seed 004's marks of a message for moderators only: its message type,
// and its privacy_level (kept under metadata by the dialect mapping).
const (
	TypeCoCViolationFlag = "coc_violation_flag"
	PrivacyModerators    = "PRIVATE_TO_MODERATORS"
)

// RedactEvent is e as a reader who may not read its private message sees
// it: the seq, index, time and kind stay, so the trail has no gap; the
// parties, the message id and the text do not. The line reads
// "[2025-10-20T14:30:45Z] MESSAGE: (private)". Events that are not
// Private are returned as they are.
func RedactEvent(e api.AuditEvent) api.AuditEvent {
	if !e.Private {
		return e
	}
	return api.AuditEvent{Seq: e.Seq, Index: e.Index, Time: e.Time, Kind: e.Kind,
		Label: strings.ToUpper(e.Kind), Text: PrivateText, Private: true}
}

// markPrivate marks ev, an audit event of sending m, when m is private
// or for moderators: Private, and Readers set to the agents other than
// the sender who may read m (delivered, then the agents "to" names by id,
// without repeats; a message for moderators is delivered to no one else).
// A public m leaves ev as it is, so the trail of public sends is byte for
// byte what it was before private messages were redacted per reader.
func markPrivate(ev api.AuditEvent, m *api.Message, delivered []recipient) api.AuditEvent {
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
		if api.AddressKindOf(r) == api.AddressAgent {
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
func settleVisibility(m, parent *api.Message) {
	switch {
	case forModerators(m), parent != nil && parent.Visibility == api.VisibilityModerators:
		m.Visibility = api.VisibilityModerators
	case parent != nil && parent.Visibility == api.VisibilityPrivate:
		m.Visibility = api.VisibilityPrivate
	}
}

// forModerators reports whether m is marked for moderators only: its
// visibility says so, it is a coc_violation_flag, or its metadata's
// privacy_level is PRIVATE_TO_MODERATORS.
func forModerators(m *api.Message) bool {
	if m.Visibility == api.VisibilityModerators || m.Type == TypeCoCViolationFlag {
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
func auditMessageID(m *api.Message) string {
	if !m.Public() {
		return ""
	}
	return m.ID
}
