package maosctl

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/maos-project/maos/api"
)

// DigestMaxChars is the largest digest digest writes: Claude Code caps
// the additionalContext a hook may inject at 10,000 characters and drops
// the rest, so the digest must fit whole, footer included.
const DigestMaxChars = 10000

// digestTitleMax bounds one title (in runes) so that a single huge title
// cannot push every other message out of the digest.
const digestTitleMax = 160

// digestInput is what a digest summarises: the unread messages fetched
// (in any order) and how many unread messages the inbox holds in all
// (≥ len(Messages); the difference was not fetched and counts as left out).
type digestInput struct {
	Agent       string
	Ctl         string // how the commands it names start (ctlCommand); "" is "maosctl"
	Messages    []api.Message
	TotalUnread int
	// ToApprove counts the pending approvals the agent may decide and has
	// not decided (their requests are among the messages when unread).
	ToApprove int
}

// digest renders unread mail for a model's context, at most maxChars
// bytes (so at most maxChars characters):
//
//	A approvals wait for AGENT's decision: maosctl approval list …; approve: …; reject: …
//	N unread messages for AGENT (U urgent), urgent first, then newest first:
//	- ID from FROM [PRIORITY] TITLE
//	- ID from FROM [PRIORITY] TITLE (+K more unread in thread ROOT)
//	L left out. Read: maosctl inbox --agent AGENT --unread; ...
//
// Messages of one thread (thread_id, or the id of a root) fold into the
// line of the thread's first message in that order, with a count. Lines
// that do not fit are dropped from the end; the footer counts the messages
// they held plus those never fetched. The approvals line comes only when
// approvals wait; with no unread message the digest is that line alone,
// with neither it returns "".
// digestGroup is one thread of a digest: its first message in digest
// order and how many of the thread's messages it stands for.
type digestGroup struct {
	head  api.Message
	count int
}

// digestGroups orders msgs urgent first, then newest first (seq is the
// cluster's total order), groups them by thread in that order, and counts
// the urgent ones.
func digestGroups(in []api.Message) ([]*digestGroup, int) {
	msgs := slices.Clone(in)
	slices.SortStableFunc(msgs, func(a, b api.Message) int {
		if ua, ub := a.Priority == api.PriorityUrgent, b.Priority == api.PriorityUrgent; ua != ub {
			if ua {
				return -1
			}
			return 1
		}
		switch {
		case a.Seq > b.Seq:
			return -1
		case a.Seq < b.Seq:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	var groups []*digestGroup
	byThread := map[string]*digestGroup{}
	urgent := 0
	for _, m := range msgs {
		if m.Priority == api.PriorityUrgent {
			urgent++
		}
		key := m.ThreadID
		if key == "" {
			key = m.ID
		}
		if g, ok := byThread[key]; ok {
			g.count++
			continue
		}
		g := &digestGroup{head: m, count: 1}
		byThread[key] = g
		groups = append(groups, g)
	}
	return groups, urgent
}

func digest(in digestInput, maxChars int) string {
	ctl := or(in.Ctl, "maosctl")
	approvals := ""
	if in.ToApprove > 0 {
		approvals = fmt.Sprintf("%d %s for %s's decision: %s approval list --approver %s --state pending; "+
			"approve: %s approval approve ID --approver %s; reject: %s approval reject ID --approver %s "+
			"(each shows the action and its hash first)\n",
			in.ToApprove, plural(in.ToApprove, "approval waits", "approvals wait"), in.Agent, ctl, in.Agent, ctl, in.Agent, ctl, in.Agent)
	}
	total := max(in.TotalUnread, len(in.Messages))
	if total == 0 {
		return truncateUTF8(approvals, maxChars)
	}
	groups, urgent := digestGroups(in.Messages)
	header := approvals + fmt.Sprintf("%d unread %s for %s", total, plural(total, "message", "messages"), in.Agent)
	if urgent > 0 {
		header += fmt.Sprintf(" (%d urgent)", urgent)
	}
	header += ", urgent first, then newest first:\n"
	footer := func(left int) string {
		return fmt.Sprintf("%d left out. Read: %s inbox --agent %s --unread; one message: %s show ID; "+
			"a thread: %s thread ID; then: %s read-mark --agent %s ID\n", left, ctl, in.Agent, ctl, ctl, ctl, in.Agent)
	}
	var b strings.Builder
	b.WriteString(header)
	shown := 0
	for _, g := range groups {
		line := digestLine(g.head, g.count)
		if b.Len()+len(line)+len(footer(total-shown-g.count)) > maxChars {
			break
		}
		b.WriteString(line)
		shown += g.count
	}
	b.WriteString(footer(total - shown))
	if b.Len() > maxChars {
		// Only a cap smaller than header and footer gets here.
		return truncateUTF8(b.String(), maxChars)
	}
	return b.String()
}

// digestLine is one digest line: "- ID from FROM [PRIORITY] TITLE", with
// the fold count of its thread when count > 1.
func digestLine(m api.Message, count int) string {
	prio := m.Priority
	if prio == "" {
		prio = api.PriorityNormal
	}
	title := m.Title
	if title == "" {
		title = m.Content.Text
	}
	title = strings.Join(strings.Fields(title), " ")
	if utf8.RuneCountInString(title) > digestTitleMax {
		title = string([]rune(title)[:digestTitleMax-1]) + "…"
	}
	if title == "" {
		title = "(no title)"
	}
	line := fmt.Sprintf("- %s from %s [%s] %s", m.ID, m.From, prio, title)
	if count > 1 {
		root := m.ThreadID
		if root == "" {
			root = m.ID
		}
		line += fmt.Sprintf(" (+%d more unread in thread %s)", count-1, root)
	}
	return line + "\n"
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
