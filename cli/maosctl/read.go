package maosctl

import (
	"fmt"
	"strings"

	"github.com/maos-project/maos/fsm"
	"github.com/urfave/cli/v2"
)

func readCommand() *cli.Command {
	return &cli.Command{
		Name:  "read",
		Usage: "list a channel's messages in log order",
		UsageText: `maosctl read --channel CH [--after SEQ] [--limit N] [--strong] [--all]

   maosctl read --channel review                 # the first page (100 messages)
   maosctl read --channel review --after 1042    # what came after #1042
   maosctl --json read --channel review --all    # everything, as one JSON array`,
		Description: fmt.Sprintf(`Prints one line per message, oldest first:

   #SEQ TIME FROM → TO [TYPE/PRIORITY] TITLE: first line of the text

Use 'maosctl get ID' for the whole message. A page holds --limit messages
(default %d, at most %d); when more follow, a hint on stderr gives the
--after to continue from, and --all fetches page after page until the end.
With --json, a JSON array of message objects ([] when there are none).`,
			fsm.DefaultPageLimit, fsm.MaxPageLimit),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` (required)", EnvVars: []string{envChannel}},
			&cli.Uint64Flag{Name: "after", Usage: "only messages with a seq above `SEQ`"},
			&cli.IntFlag{Name: "limit", Usage: fmt.Sprintf("at most `N` messages per page (1-%d)", fsm.MaxPageLimit), Value: fsm.DefaultPageLimit},
			&cli.BoolFlag{Name: "all", Usage: "follow pages until the end of the channel"},
			strongFlag(),
			jsonFlag(),
		},
		Action: read,
	}
}

func read(c *cli.Context) error {
	if err := noArgs(c, "channel"); err != nil {
		return err
	}
	limit := c.Int("limit")
	if limit < 0 || limit > fsm.MaxPageLimit {
		return usagef(c, "--limit %d: must be 1..%d (0 for the default %d)", limit, fsm.MaxPageLimit, fsm.DefaultPageLimit)
	}
	channel := strings.TrimSpace(c.String("channel"))
	after := c.Uint64("after")
	asJSON := wantJSON(c)
	all := c.Bool("all")
	client := apiClient(c)
	cons := consistency(c)

	out := []*fsm.Message{}
	for {
		ctx, cancel := call(c)
		page, err := client.ChannelPage(ctx, channel, after, limit, cons)
		cancel()
		if err != nil {
			return apiError(c, err)
		}
		for _, m := range page.Messages {
			if m.Seq <= after {
				return fmt.Errorf("channel %s: the node returned #%d in a page after #%d", channel, m.Seq, after)
			}
			after = m.Seq
		}
		if asJSON {
			out = append(out, page.Messages...)
		} else {
			for _, m := range page.Messages {
				if _, err := fmt.Fprintln(c.App.Writer, messageLine(m)); err != nil {
					return err
				}
			}
		}
		if !page.HasMore {
			break
		}
		if !all {
			if !asJSON {
				fmt.Fprintf(c.App.ErrWriter, "(more after #%d: maosctl read --channel %s --after %d, or --all)\n",
					after, channel, after)
			}
			break
		}
		if len(page.Messages) == 0 {
			return fmt.Errorf("channel %s: the node said more messages follow #%d but sent none", channel, after)
		}
	}
	if asJSON {
		return printJSON(c.App.Writer, out)
	}
	return nil
}

// messageLine is the one-line form of m:
// "#SEQ TIME FROM → TO [TYPE/PRIORITY] TITLE: first line of the text".
func messageLine(m *fsm.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s → %s [%s/%s] ", m.Seq, formatTime(m.Timestamp, false),
		m.From, strings.Join(m.To, ","), m.Type, m.Priority)
	if m.Title != "" {
		b.WriteString(m.Title)
		b.WriteString(": ")
	}
	text := strings.TrimLeft(m.Content.Text, "\r\n")
	if i := strings.IndexAny(text, "\r\n"); i >= 0 {
		text = text[:i]
	}
	b.WriteString(text)
	return b.String()
}
