package watcher

import (
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/maos-project/maos/api"
)

// Reasons ForUs gives for a decision; the dry run prints them.
const (
	ReasonAddressed = "addressed"       // the resolved recipients hold the agent
	ReasonMention   = "mention"         // "@id" in the text or title
	ReasonLeading   = "leading-id"      // the text starts with the agent id
	ReasonOwn       = "own message"     // sent by the agent itself
	ReasonOwnFork   = "own fork's note" // a command agent's fork telling it what it did (fork.go)
	ReasonNotForUs  = "not addressed"   // none of the above
	ReasonChannel   = "other channel"   // outside the agent's channels
	ReasonType      = "type filtered"   // match.types
	ReasonPriority  = "priority filtered"
	ReasonFrom      = "sender filtered"
	// ReasonTask: a task_delegation or handoff, which the task loop claims
	// (or not) by the agent's queues; the dry run names the task after it.
	ReasonTask = "task"
)

// ForUs decides whether m is meant for the agent, in order: never its own
// messages, nor (for a command agent) its forks' (their notes are for its
// record, not for its CLI; a tmux agent's session reads them); then addressed to it (the resolved recipients list, which the
// state machine fills from ids, "role:R", "all"/"*" and globs at apply
// time), an "@id" mention, or a text that starts with the agent id; then
// the agent's channels and the optional match filters (types, priorities,
// sender globs). It returns the decision and the reason.
func (a *AgentConfig) ForUs(m *api.Message) (bool, string) {
	if m.From == a.ID {
		return false, ReasonOwn
	}
	if a.Delivery != DeliveryTmux && api.IsForkOf(m.From, a.ID) {
		return false, ReasonOwnFork
	}
	reason := ""
	switch {
	case slices.Contains(m.Recipients, a.ID):
		reason = ReasonAddressed
	case mentions(m.Content.Text, a.ID) || mentions(m.Title, a.ID):
		reason = ReasonMention
	case startsWithID(m.Content.Text, a.ID):
		reason = ReasonLeading
	default:
		return false, ReasonNotForUs
	}
	if len(a.Channels) > 0 && !slices.Contains(a.Channels, m.Channel) {
		return false, ReasonChannel
	}
	if len(a.Match.Types) > 0 && !slices.Contains(a.Match.Types, m.Type) {
		return false, ReasonType
	}
	if len(a.Match.Priorities) > 0 && !slices.Contains(a.Match.Priorities, m.Priority) {
		return false, ReasonPriority
	}
	if len(a.Match.From) > 0 && !slices.ContainsFunc(a.Match.From, func(g string) bool {
		ok, _ := path.Match(g, m.From)
		return ok
	}) {
		return false, ReasonFrom
	}
	if a.Skip != nil {
		if r := a.Skip(m); r != "" {
			return false, r
		}
	}
	return true, reason
}

// isIDRune reports whether r can continue an agent id, so "@bob" does not
// match inside "@bobby".
func isIDRune(r rune) bool {
	return r == '.' || r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9')
}

// mentions reports whether text holds "@id" not followed by an id rune.
func mentions(text, id string) bool {
	needle := "@" + id
	for i := 0; ; {
		j := strings.Index(text[i:], needle)
		if j < 0 {
			return false
		}
		end := i + j + len(needle)
		r, _ := utf8.DecodeRuneInString(text[end:])
		// A trailing '.' ends a sentence ("thanks @bob."), so it counts as
		// a boundary when nothing id-like follows it.
		if end == len(text) || !isIDRune(r) || (r == '.' && !followedByID(text[end+1:])) {
			return true
		}
		i = end
	}
}

func followedByID(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isIDRune(r) && r != '.'
}

// startsWithID reports whether text starts with the agent id as a word
// ("bob: please", "bob, ...").
func startsWithID(text, id string) bool {
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if !strings.HasPrefix(text, id) {
		return false
	}
	rest := text[len(id):]
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !isIDRune(r)
}
