package maosctl

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// nothingUnread is the exit status of 'inbox next' when the inbox holds
// no unread message, and of 'inbox wait' when none came in time: not an
// error (1), so a script can loop on it.
const nothingUnread = 2

func inboxNextCommand() *cli.Command {
	return &cli.Command{
		Name:  "next",
		Usage: "print the oldest unread message of an agent's inbox and mark it read",
		UsageText: `maosctl inbox next [--agent A] [--strong]

   maosctl inbox next --agent claude
   while maosctl --json inbox next --agent claude > msg.json; do handle msg.json; done   # exit 2: no more`,
		Description: `Takes the oldest unread message of agent A's inbox: marks it read (the
read mark 'maosctl read-mark' sets; the sender sees it in 'maosctl
receipts') and prints it whole, as 'maosctl show' does; with --json, the
message object.

When nothing is unread it prints "no unread mail for A" on stderr, nothing
on stdout, and exits 2, so 'while maosctl inbox next ...; do ...; done'
ends by itself while an error (exit 1) stays an error.

Two 'next' for one agent at once never take the same message: marking is
one Raft entry, and only the one whose mark changed the message from
unread to read prints it; the other goes on to the next unread message
(or exits 2 if none is left). The same holds against a watcher or
'read-mark' marking it first.`,
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` whose inbox to take from"),
			strongFlag(),
			jsonFlag(),
		},
		Action: inboxNext,
	}
}

func inboxNext(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	agent := strings.TrimSpace(c.String("agent"))
	client, cons := apiClient(c), consistency(c)
	q := api.InboxQuery{Unread: true, Limit: 1}
	for {
		ctx, cancel := call(c)
		page, err := client.Inbox(ctx, agent, q, cons)
		cancel()
		if err != nil {
			return apiError(c, err)
		}
		if len(page.Messages) == 0 {
			return &exitStatus{code: nothingUnread, msg: fmt.Sprintf("no unread mail for %s", agent)}
		}
		m := &page.Messages[0].Message
		ctx, cancel = call(c)
		res, err := client.MarkRead(ctx, agent, m.ID, 0)
		cancel()
		if err != nil {
			return apiError(c, err)
		}
		if res.Marked > 0 {
			if wantJSON(c) {
				return printJSON(c.App.Writer, m)
			}
			return printMessage(c.App.Writer, m)
		}
		// Someone marked it read between the read and the mark (another
		// 'next', a watcher): it is theirs. Seqs only grow, so after it.
		q.After = m.Seq
	}
}
