package maosctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func inboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "inbox",
		Usage: "list an agent's inbox, or its counts; take its next message, or wait for one",
		UsageText: `maosctl inbox [--agent A] [--unread] [--priority P] [--type T] [--from F] [--after SEQ] [--limit N | --all] [--page-size N] [--counts]
   maosctl inbox next [--agent A]
   maosctl inbox wait [--agent A] [--timeout D]

   maosctl inbox --agent claude --unread
   maosctl inbox --agent claude --priority urgent --counts
   maosctl --json inbox --agent claude --unread --all | jq -r '.[].id'`,
		Description: fmt.Sprintf(`Lists the messages delivered to agent A, oldest first, one line each:
"* #SEQ TIME FROM → TO [TYPE/PRIORITY] TITLE: first line", where "*" marks
an unread message. Reading never deletes: use 'maosctl read-mark' to mark
messages read. --counts prints the counters instead (total, unread, unread
by priority).

It prints at most --limit messages (default %d), asking for as many pages
as that takes (--page-size a request, at most %d); when more follow, a
hint on stderr gives the --after to go on, and --all prints every one.
--unread and --priority are answered from the inbox index; --type and
--from read each message of the range, so on a large inbox a page may
hold fewer than it asked for (the next page is asked for then).
With --json, an array of messages, each with "read".

For an agent without a watcher: 'inbox next' takes the oldest unread
message (prints it whole and marks it read), 'inbox wait' blocks until
there is unread mail and lists it.`, api.DefaultPageLimit, api.MaxPageLimit),
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` whose inbox to read"),
			&cli.BoolFlag{Name: "unread", Usage: "only unread messages"},
			&cli.StringFlag{Name: "priority", Usage: "only messages of `PRIORITY` (" + api.PriorityList() + ")"},
			&cli.StringFlag{Name: "type", Usage: "only messages of `TYPE`"},
			&cli.StringFlag{Name: "from", Usage: "only messages from agent `ID`"},
			&cli.Uint64Flag{Name: "after", Usage: "only messages after `SEQ`"},
			limitFlag("messages", api.DefaultPageLimit),
			pageSizeFlag(),
			allFlag("message"),
			&cli.BoolFlag{Name: "counts", Usage: "print the inbox counters instead of messages"},
			strongFlag(),
			jsonFlag(),
		},
		Subcommands: []*cli.Command{inboxNextCommand(), inboxWaitCommand()},
		Action:      inbox,
	}
}

func inbox(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	agent := strings.TrimSpace(c.String("agent"))
	client := apiClient(c)
	if c.Bool("counts") {
		ctx, cancel := call(c)
		defer cancel()
		counts, err := client.InboxCounts(ctx, agent, consistency(c))
		if err != nil {
			return apiError(c, err)
		}
		if wantJSON(c) {
			return printJSON(c.App.Writer, counts)
		}
		var by []string
		for _, p := range api.Priorities {
			by = append(by, fmt.Sprintf("%s %d", p, counts.UnreadByPriority[p]))
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s: %d messages, %d unread (%s)\n", counts.Agent, counts.Total, counts.Unread, strings.Join(by, ", "))
		return err
	}
	l, err := limitFlags(c)
	if err != nil {
		return err
	}
	q := api.InboxQuery{
		Unread:   c.Bool("unread"),
		Priority: flagPriority(c),
		Type:     strings.TrimSpace(c.String("type")),
		From:     strings.TrimSpace(c.String("from")),
		After:    c.Uint64("after"),
	}
	asJSON := wantJSON(c)
	out := []api.InboxEntry{}
	next, err := inboxPages(c, commandContext(c), agent, q, l, func(page []api.InboxEntry) error {
		if asJSON {
			out = append(out, page...)
			return nil
		}
		return printInboxLines(c.App.Writer, page)
	})
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.App.Writer, out)
	}
	if next != 0 {
		fmt.Fprintf(c.App.ErrWriter, "(more after #%d: add --after %d, or --all)\n", next, next)
	}
	return nil
}

// inboxPages reads agent's inbox by q from q.After, oldest first, at the
// consistency c's --strong asks for, and calls fn with each page, until
// the end or l.max entries (eachPage). It returns the seq to go on after
// when it stopped with entries left (0 when it read to the end). Each read
// is bounded by the global --timeout under parent; errors are apiError's.
func inboxPages(c *cli.Context, parent context.Context, agent string, q api.InboxQuery, l listLimit, fn func([]api.InboxEntry) error) (uint64, error) {
	root := rootContext(c)
	client, cons := apiClient(c), consistency(c)
	more, err := eachPage(root, parent, l, func(ctx context.Context, size int) ([]api.InboxEntry, bool, error) {
		q.Limit = size
		page, err := client.Inbox(ctx, agent, q, cons)
		if err != nil {
			return nil, false, apiError(root, err)
		}
		if page.HasMore {
			if page.NextAfter <= q.After {
				return nil, false, fmt.Errorf("inbox %s: the node said more entries follow #%d but did not move on", agent, q.After)
			}
			q.After = page.NextAfter
		}
		return page.Messages, page.HasMore, nil
	}, fn)
	if err != nil || !more {
		return 0, err
	}
	return q.After, nil
}

// printInboxLines writes one line per entry, "* " before an unread one
// and "  " before a read one, then messageLine.
func printInboxLines(w io.Writer, entries []api.InboxEntry) error {
	for i := range entries {
		e := &entries[i]
		mark := " "
		if !e.Read {
			mark = "*"
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", mark, messageLine(&e.Message)); err != nil {
			return err
		}
	}
	return nil
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one message, whole, with whom it was delivered to",
		ArgsUsage: "ID",
		UsageText: `maosctl show ID [--strong]

   maosctl show msg-20261121-103000-codex-9f3a61c2
   maosctl --json show msg-20261121-103000-codex-9f3a61c2 | jq .recipients`,
		Description: `Prints the whole message as 'maosctl get' does; when "to" named a role, a
glob, "all" or the text @mentioned agents, the "to" line also shows the
agents it was delivered to ("role:reviewer → alice, bob"). With --json, the
message object, whose "recipients" holds that list.`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: get,
	}
}

func readMarkCommand() *cli.Command {
	return &cli.Command{
		Name:      "read-mark",
		Usage:     "mark one message, or everything up to a seq, read in an agent's inbox",
		ArgsUsage: "[ID]",
		UsageText: `maosctl read-mark [--agent A] ID | --upto SEQ

   maosctl read-mark --agent claude msg-20261121-103000-codex-9f3a61c2
   maosctl read-mark --agent claude --upto 1042`,
		Description: `Marks message ID read in agent A's inbox, or with --upto every message up
to and including seq SEQ. Read state is per agent; marking never deletes,
and marking a read message again changes nothing. The sender sees the read
time in 'maosctl receipts'. Prints how many messages changed and the unread
count left; with --json, {"agent","marked","counts"}.`,
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` whose inbox it is"),
			&cli.StringFlag{Name: "upto", Usage: "mark everything up to and including `SEQ` read"},
			jsonFlag(),
		},
		Action: readMark,
	}
}

func readMark(c *cli.Context) error {
	pos, err := trailingFlags(c)
	if err != nil {
		return err
	}
	if err := require(c, "agent"); err != nil {
		return err
	}
	var id string
	var upto uint64
	uptoFlag := strings.TrimSpace(c.String("upto"))
	switch {
	case len(pos) > 1:
		return usagef(c, "unexpected argument %q", pos[1])
	case len(pos) == 1 && uptoFlag != "":
		return usagef(c, "give a message ID or --upto SEQ, not both")
	case len(pos) == 1:
		id = pos[0]
	case uptoFlag != "":
		if upto, err = strconv.ParseUint(uptoFlag, 10, 64); err != nil || upto == 0 {
			return usagef(c, "--upto %q: want a seq, a whole number from 1", uptoFlag)
		}
	default:
		return usagef(c, "missing ID (or --upto SEQ)")
	}
	agent := strings.TrimSpace(c.String("agent"))
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).MarkRead(ctx, agent, id, upto)
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, res, "marked %d read; %s has %d unread\n", res.Marked, res.Agent, res.Counts.Unread)
}
