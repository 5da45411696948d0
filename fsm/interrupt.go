package fsm

// Interrupts in the state machine. An interrupt (seed 000: only the
// master interrupts) is an urgent "[INTERRUPT] reason" alert to one agent,
// followed by ESC in the agent's terminal pane. The alert is an ordinary
// send carrying Interrupt, which only the API's interrupt endpoint sets,
// and apply checks the sender's authority before anything is stored; the
// ESC follows only once the alert committed. Who may interrupt is package
// rules' Compiled.MayInterrupt.

import (
	"strings"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The shape of an interrupt's alert (NewInterrupt).
const (
	InterruptType   = "alert"
	InterruptPrefix = "[INTERRUPT] "
)

// NewInterrupt is from's alert to agent that it must stop, as the API's
// interrupt endpoint proposes it: in channel, type alert, priority urgent,
// text "[INTERRUPT] " and reason, titled the same with the reason on one
// line and cut to MaxTitleLen bytes (the audit trail shows titles, so it
// shows why). The ID is left empty: the caller sets one, fixed before the
// first attempt, or Normalize generates it.
func NewInterrupt(from, agent, channel, reason string) *api.Message {
	return &api.Message{
		Channel:  channel,
		From:     from,
		To:       api.Recipients{agent},
		Type:     InterruptType,
		Priority: api.PriorityUrgent,
		Title:    api.TruncateUTF8(InterruptPrefix+strings.Join(strings.Fields(reason), " "), api.MaxTitleLen),
		Content:  api.Content{Text: InterruptPrefix + reason},
	}
}

// checkInterrupt decides whether the sender of m, an interrupt's alert
// marked mark, may interrupt: a moderator always; anyone else by the rules
// document stored in tx (rules.Compiled.MayInterrupt, which without a
// document or an interrupt list admits the roles master, orchestrator and
// supervisor) with the sender's registered role (none when it is not
// registered). The alert must name one agent in "to" (a *FieldError). A
// refusal writes one BLOCKED audit line, and nothing else, and returns a
// *ForbiddenError in the rule's words.
func (f *FSM) checkInterrupt(tx *bbolt.Tx, index uint64, ts int64, m *api.Message, mark *api.Interrupt) error {
	if len(m.To) != 1 || api.AddressKindOf(m.To[0]) != api.AddressAgent {
		return api.FieldErrorf("to", "an interrupt names one agent, not %q", strings.Join(m.To, ","))
	}
	ok, reason, err := f.mayInterrupt(tx, m.From, mark.Moderator)
	if err != nil || ok {
		return err
	}
	audit(tx, index, ts, markPrivate(api.AuditEvent{Kind: AuditBlocked, From: m.From, To: m.To, Label: "BLOCKED", Text: reason, MessageID: m.ID}, m, nil))
	return &api.ForbiddenError{Reason: reason}
}

// mayInterrupt is the one interrupt rule, for an interrupt's alert
// (checkInterrupt) and for the authority every stored message carries
// (Message.MayInterrupt, which watchers go by): a moderator always; anyone
// else as the rules document stored in tx says (rules.Compiled.MayInterrupt)
// with from's registered role (none when it is not registered). reason is
// the rule's words when it refuses.
func (f *FSM) mayInterrupt(tx *bbolt.Tx, from string, moderator bool) (ok bool, reason string, err error) {
	if moderator {
		return true, "", nil
	}
	role, _ := rulesAgentRole(tx, from)
	r, err := f.rules.load(tx)
	if err != nil {
		return false, "", err
	}
	ok, reason = r.MayInterrupt(from, role)
	return ok, reason, nil
}
