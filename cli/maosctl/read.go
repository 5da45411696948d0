package maosctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func readCommand() *cli.Command {
	return &cli.Command{
		Name:  "read",
		Usage: "list a channel's messages in log order",
		UsageText: `maosctl read --channel CH [--after SEQ] [--limit N | --all] [--page-size N] [--strong]

   maosctl read --channel review                 # the first 100 messages
   maosctl read --channel review --after 1042    # what came after #1042
   maosctl --json read --channel review --all    # everything, as one JSON array`,
		Description: fmt.Sprintf(`Prints one line per message, oldest first:

   #SEQ TIME FROM → TO [TYPE/PRIORITY] TITLE: first line of the text

Use 'maosctl get ID' for the whole message. It prints at most --limit
messages (default %d), asking for as many pages as that takes (--page-size
a request, at most %d); when more follow, a hint on stderr gives the
--after to continue from, and --all prints every message to the end.
With --json, a JSON array of message objects ([] when there are none).`,
			api.DefaultPageLimit, api.MaxPageLimit),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` (required)", EnvVars: []string{envChannel}},
			&cli.Uint64Flag{Name: "after", Usage: "only messages with a seq above `SEQ`"},
			limitFlag("messages", api.DefaultPageLimit),
			pageSizeFlag(),
			allFlag("message"),
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
	channel := strings.TrimSpace(c.String("channel"))
	client, cons := apiClient(c), consistency(c)
	return listPages(c, "channel "+channel, "maosctl read --channel "+channel,
		func(ctx context.Context, after uint64, size int) ([]*api.Message, bool, error) {
			page, err := client.ChannelPage(ctx, channel, after, size, cons)
			return page.Messages, page.HasMore, err
		},
		func(m *api.Message) uint64 { return m.Seq }, messageLine)
}

// messageLine is the one-line form of m:
// "#SEQ TIME FROM → TO [TYPE/PRIORITY] TITLE: first line of the text".
func messageLine(m *api.Message) string {
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
