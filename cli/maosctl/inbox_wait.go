package maosctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func inboxWaitCommand() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "wait until an agent has unread mail and list it; exit 2 on timeout",
		UsageText: `maosctl inbox wait [--agent A] [--timeout D]

   maosctl inbox wait --agent claude --timeout 10m && maosctl inbox next --agent claude
   maosctl inbox wait --agent claude --timeout 30s; case $? in 0) echo mail;; 2) echo none yet;; *) echo error;; esac`,
		Description: `Returns as soon as agent A has unread mail: at once when some is unread
already, else when a message reaches A's inbox. Lists every unread message
as 'maosctl inbox --unread --all' does (one line each, "*" first; with
--json, an array of messages, each with "read") and exits 0. It marks
nothing read: take the messages with 'maosctl inbox next' or 'read-mark'.

Exits 2 when --timeout (default: none) passed first, printing "no unread
mail for A within D" on stderr and nothing on stdout; 1 on an error.

It reads the inbox once and then follows A's messages on the node's stream
(GET /v1/stream?agent=A; no polling); a stream the node closes, or a node
that cannot be reached for a while, is resumed where it stopped.`,
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` whose inbox to wait on"),
			&cli.DurationFlag{Name: "timeout", Usage: "give up after `DURATION` and exit 2 (the global --timeout still bounds each read)"},
			strongFlag(),
			jsonFlag(),
		},
		Action: inboxWait,
	}
}

func inboxWait(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	timeout := c.Duration("timeout")
	if c.IsSet("timeout") && timeout <= 0 {
		return usagef(c, "--timeout %s: want a positive duration such as 90s or 10m", timeout)
	}
	agent := strings.TrimSpace(c.String("agent"))
	root := rootContext(c)
	ctx, cancel := within(commandContext(c), timeout)
	defer cancel()
	client := apiClient(c)

	// The stream starts after the newest entry, read before the unread
	// check: mail that lands between the two is in the stream's backlog.
	readCtx, cancelRead := callWith(root, ctx)
	newest, err := client.Inbox(readCtx, agent, api.InboxQuery{Newest: true, Limit: 1}, consistency(c))
	cancelRead()
	if err != nil {
		return waitOutcome(c, ctx, agent, timeout, apiError(root, err))
	}
	var after uint64
	if len(newest.Messages) > 0 {
		after = newest.Messages[0].Seq
	}
	unread, err := unreadMail(c, ctx, agent)
	if err != nil {
		return waitOutcome(c, ctx, agent, timeout, err)
	}
	if len(unread) == 0 {
		q := api.StreamQuery{Agent: agent, After: after, Tasks: api.StreamTasksNone}
		var readErr error // the callback's, already apiError's
		err = followStream(ctx, client, q, func(ev api.StreamEvent) error {
			if ev.Message == nil {
				return nil
			}
			// Read the inbox rather than print the event: another reader
			// may have taken it already.
			switch unread, readErr = unreadMail(c, ctx, agent); {
			case readErr != nil:
				return readErr
			case len(unread) > 0:
				return errStreamDone
			}
			return nil
		})
		switch {
		case readErr != nil:
			return waitOutcome(c, ctx, agent, timeout, readErr)
		case err != nil:
			return waitOutcome(c, ctx, agent, timeout, apiError(root, err))
		}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, unread)
	}
	return printInboxLines(c.App.Writer, unread)
}

// unreadMail reads every unread message of agent's inbox, oldest first;
// errors are apiError's.
func unreadMail(c *cli.Context, ctx context.Context, agent string) ([]api.InboxEntry, error) {
	out := []api.InboxEntry{}
	_, err := inboxPages(c, ctx, agent, api.InboxQuery{Unread: true}, listLimit{},
		func(page []api.InboxEntry) error {
			out = append(out, page...)
			return nil
		})
	return out, err
}

// waitOutcome is what 'inbox wait' returns for err, a failure while it
// waited: exit 2 when its --timeout (ctx) ended first, else err.
func waitOutcome(c *cli.Context, ctx context.Context, agent string, timeout time.Duration, err error) error {
	if ctx.Err() != nil && commandContext(c).Err() == nil {
		return &exitStatus{code: nothingUnread, msg: fmt.Sprintf("no unread mail for %s within %s", agent, timeout)}
	}
	return err
}
