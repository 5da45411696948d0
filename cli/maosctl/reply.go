package maosctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func replyCommand() *cli.Command {
	return &cli.Command{
		Name:      "reply",
		Usage:     "answer a message: to its sender, in its channel and thread",
		ArgsUsage: "ID",
		UsageText: `maosctl reply ID [--from A] --text T [--title T] [--type T] [--priority P] [--id ID]

   maosctl reply msg-20261121-103000-codex-9f3a61c2 --from claude --text "looks good, one nit in retry.go"
   go test ./... 2>&1 | maosctl reply msg-20261121-103000-codex-9f3a61c2 --from claude --type task_result --text -`,
		Description: `Sends a reply to message ID: to its sender, in its channel, with in_reply_to
set to ID and thread_id to the thread's root, so 'maosctl thread' shows the
conversation and the original sender's 'maosctl receipts' shows it answered.
Unless --title, --type or --priority say otherwise it is titled "Re: " and
the original's title, of type "response" ("task_result" for a task_assign),
priority normal: the reply every client builds (the MCP tool, a watcher).
A reply to a private message is private. --text - reads the text from
stdin. Prints the reply's id and seq; with --json, the API's answer.`,
		Flags: []cli.Flag{
			agentFlag("from", "replying agent `ID`"),
			&cli.StringFlag{Name: "text", Usage: "reply `TEXT`; - reads it from stdin (required)"},
			&cli.StringFlag{Name: "title", Usage: "one-line `TITLE` (default \"Re: \" and the original's)"},
			&cli.StringFlag{Name: "type", Usage: "message `TYPE` (default response, task_result for a task_assign)"},
			priorityFlag(),
			&cli.StringFlag{Name: "id", Usage: "reply `ID` to use instead of a generated one (makes retries safe)"},
			&cli.BoolFlag{Name: "private", Usage: "visibility private (see send --help); a reply to a private message is private whatever this says"},
			jsonFlag(),
		},
		Action: reply,
	}
}

func reply(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	if err := require(c, "from", "text"); err != nil {
		return err
	}
	text, err := textFlag(c, "text")
	if err != nil {
		return err
	}
	client := apiClient(c)
	ctx, cancel := call(c)
	defer cancel()
	// Strong: the message may have been acknowledged by another node a
	// moment ago.
	orig, err := client.Message(ctx, args[0], api.Strong)
	if err != nil {
		return apiError(c, err)
	}
	from := strings.TrimSpace(c.String("from"))
	// The one reply builder every client uses; the flags given override it.
	m := api.NewReply(orig, from, text)
	m.ID = strings.TrimSpace(c.String("id"))
	if c.IsSet("title") {
		m.Title = c.String("title")
	}
	if typ := strings.TrimSpace(c.String("type")); typ != "" {
		m.Type = typ
	}
	if p := flagPriority(c); p != "" {
		m.Priority = p
	}
	if c.Bool("private") {
		m.Visibility = api.VisibilityPrivate
	}
	if m.ID == "" && api.ValidName(from) {
		m.ID = api.NewID(from, time.Now())
	}
	res, err := client.Send(ctx, m)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	return printSent(c, res)
}

func threadCommand() *cli.Command {
	return &cli.Command{
		Name:      "thread",
		Usage:     "show a conversation: a message and every reply, in order",
		ArgsUsage: "ID",
		UsageText: `maosctl thread ID [--strong]

   maosctl thread msg-20261121-103000-codex-9f3a61c2
   maosctl --json thread msg-20261121-103000-codex-9f3a61c2 | jq -r '.[].from'`,
		Description: `Prints every message of the thread ID belongs to (ID may be the root or any
reply), in log order, one line each as 'maosctl read' does. With --json, an
array of messages.`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: thread,
	}
}

func thread(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	client := apiClient(c)
	id := args[0]
	var after uint64
	out := []*api.Message{}
	for {
		ctx, cancel := call(c)
		page, err := client.Thread(ctx, id, after, api.MaxPageLimit, consistency(c))
		cancel()
		if err != nil {
			return apiError(c, err)
		}
		out = append(out, page.Messages...)
		if !page.HasMore || len(page.Messages) == 0 {
			break
		}
		id, after = page.ThreadID, page.Messages[len(page.Messages)-1].Seq
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, out)
	}
	for _, m := range out {
		if _, err := fmt.Fprintln(c.App.Writer, messageLine(m)); err != nil {
			return err
		}
	}
	return nil
}

func receiptsCommand() *cli.Command {
	return &cli.Command{
		Name:      "receipts",
		Usage:     "show, per recipient, whether a message was delivered, read, answered",
		ArgsUsage: "ID",
		UsageText: `maosctl receipts ID [--strong]

   maosctl receipts msg-20261121-103000-codex-9f3a61c2
   maosctl --json receipts msg-20261121-103000-codex-9f3a61c2 | jq -r '.receipts[] | select(.state=="delivered") | .agent'`,
		Description: `"Sent" is not "delivered": for each recipient the message was resolved to,
prints its state and when it got there (DELIVERED: into its inbox; TYPED:
into a tmux agent's pane): delivered (in its inbox, or, for a tmux
agent, typed into its pane), queued (its watcher holds it
until the agent is idle), interrupted (typed after interrupting the
agent), read (marked read), answered (a reply with in_reply_to arrived
from it), or blocked (the communication rules kept it out, with the
rule's reason).
With --json, {"id","seq","from","receipts":[...]}.

To wait until every recipient read or answered, send with
'maosctl send --wait read|answered'.`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: receipts,
	}
}

func receipts(c *cli.Context) error {
	rc, err := readByID(c, apiClient(c).Receipts)
	if err != nil {
		return err
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, rc)
	}
	return printReceipts(c, rc.Receipts)
}

func printReceipts(c *cli.Context, receipts []api.Receipt) error {
	if len(receipts) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "no recipients")
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tDELIVERED\tTYPED\tREAD\tANSWERED\tNOTE")
	for _, r := range receipts {
		note := r.ReplyID
		if r.Blocked != "" {
			note = r.Blocked
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Agent, r.State, formatTime(r.DeliveredAt, false),
			formatTime(r.TypedAt, false), formatTime(r.ReadAt, false), formatTime(r.AnsweredAt, false), or(note, "-"))
	}
	return tw.Flush()
}

// rootContext is the context of the app's own flags (the global ones) above
// c, or c if there is none: a command with a flag named like a global one
// (send's --timeout) reads the global value through it.
func rootContext(c *cli.Context) *cli.Context {
	for _, x := range c.Lineage()[1:] {
		if x.Command == nil {
			continue
		}
		for _, f := range x.Command.Flags {
			if slices.Contains(f.Names(), "timeout") {
				return x
			}
		}
	}
	return c
}

// waitStates are the states 'send --wait' accepts.
var waitStates = []string{api.ReceiptRead, api.ReceiptAnswered}

// sendWait is the outcome of 'send --wait' for --json.
type sendWait struct {
	api.SendResponse
	Wait struct {
		State    string        `json:"state"`
		Pending  []string      `json:"pending"` // recipients that did not get there in time
		Receipts []api.Receipt `json:"receipts"`
	} `json:"wait"`
}

// waitReceipts polls the receipts of id (strong reads) until every
// recipient that was not blocked reached state, or timeout passes. It
// returns the last receipts and the recipients still pending. Each poll is
// bounded by the global --timeout.
func waitReceipts(c *cli.Context, id, state string, timeout time.Duration) ([]api.Receipt, []string, error) {
	root := rootContext(c)
	client := apiClient(c)
	ctx, cancel := context.WithTimeout(commandContext(c), timeout)
	defer cancel()
	delay := 100 * time.Millisecond
	var last []api.Receipt
	var pending []string
	for {
		call, callCancel := callWith(root, ctx)
		rc, err := client.Receipts(call, id, api.Strong)
		callCancel()
		switch {
		case err == nil:
			last, pending = rc.Receipts, nil
			for _, r := range rc.Receipts {
				if r.State != api.ReceiptBlocked && !r.Reached(state) {
					pending = append(pending, r.Agent)
				}
			}
			if len(pending) == 0 {
				return last, nil, nil
			}
		case ctx.Err() != nil:
		case errors.Is(err, api.ErrNotFound):
			// Not applied on the node yet: keep polling.
		default:
			return last, pending, apiError(root, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if last == nil {
				return nil, nil, fmt.Errorf("waited %s for message %s to be %s: could not read its receipts", timeout, id, state)
			}
			return last, pending, nil
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}
