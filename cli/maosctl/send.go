package maosctl

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/artifacts"
)

func sendCommand() *cli.Command {
	return &cli.Command{
		Name:  "send",
		Usage: "post a message to a channel",
		UsageText: `maosctl send [--from A] --to B[,C] [--channel CH] --text T [--title T] [--type T] [--priority P] [--reply-to ID] [--id ID]

   maosctl send --from codex --to claude --channel review --text "@claude please review"
   git diff | maosctl send --to claude,gemini --type review --priority high --title "retry logic" --text -`,
		Description: `Posts one message and prints its id and its place in the log ("msg-... seq=42");
with --json, the API's answer {"id","seq","timestamp"}.

--to takes agent ids, "all", "role:NAME" or globs like "engineer_*"; give it
several times or comma-separated. --text - reads the text from stdin.
--channel defaults to $MAOS_CHANNEL, else "` + api.DefaultChannel + `".

The id is fixed before the first try (generated as msg-YYYYMMDD-HHMMSS-FROM-HEX
unless --id gives one), so repeating a send with the same --id never stores
the message twice; the same id with other content is refused as a conflict.

The communication rules may keep a message from some recipients: they are
listed after the id ("blocked ID: reason"; in --json, "blocked"). If they
block every recipient the send fails (403) and nothing is stored.

--attach FILE (repeatable) uploads each file as an artifact first (maosctl
artifact put) and references it in content.artifacts as {"id","name"}; the
recipients' watchers fetch it into their shared context.

--wait read|answered then waits until every recipient marked the message
read (or answered it) / answered it, polling its receipts, for at most
--timeout (default 60s; the global --timeout still bounds each API call);
it exits 1 naming the recipients that did not get there. With --json it
prints one object: the send's answer plus "wait" {"state","pending","receipts"}.

   maosctl send --from codex --to role:reviewer --channel review --text "please review" --wait answered --timeout 10m`,
		Flags: []cli.Flag{
			agentFlag("from", "sender agent `ID`"),
			&cli.StringSliceFlag{Name: "to", Usage: "recipient `ID`s: agent ids, all, role:NAME, globs; repeat or comma-separate (required)"},
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME`", EnvVars: []string{envChannel}, Value: api.DefaultChannel},
			&cli.StringFlag{Name: "text", Usage: "message `TEXT`; - reads it from stdin (required)"},
			&cli.StringFlag{Name: "title", Usage: "one-line `TITLE`"},
			&cli.StringFlag{Name: "type", Usage: "message `TYPE`: chat, request, response, review, status, ... (default chat)"},
			priorityFlag(),
			&cli.StringFlag{Name: "reply-to", Usage: "`ID` of the message this one answers (sets in_reply_to)"},
			&cli.BoolFlag{Name: "private", Usage: "visibility private: only the sender, the recipients and moderators read it; on a cluster with --auth everyone else never sees it (channel, overview, stream) and the audit keeps a redacted line"},
			&cli.StringFlag{Name: "id", Usage: "message `ID` to use instead of a generated one (makes retries safe across runs)"},
			&cli.StringSliceFlag{Name: "attach", Usage: "upload `FILE` as an artifact and reference it (repeatable)"},
			&cli.StringFlag{Name: "wait", Usage: "after sending, wait until every recipient got to `STATE`: read or answered"},
			&cli.DurationFlag{Name: "timeout", Usage: "with --wait: give up after `DURATION` and exit 1 naming who did not get there", Value: defaultWaitTimeout},
			jsonFlag(),
		},
		Action: send,
	}
}

func send(c *cli.Context) error {
	if err := noArgs(c, "from", "to", "text"); err != nil {
		return err
	}
	wait, waitTimeout, err := sendWaitFlags(c)
	if err != nil {
		return err
	}
	text, err := textFlag(c, "text")
	if err != nil {
		return err
	}
	from := strings.TrimSpace(c.String("from"))
	m := &api.Message{
		ID:        strings.TrimSpace(c.String("id")),
		Channel:   or(strings.TrimSpace(c.String("channel")), api.DefaultChannel),
		From:      from,
		To:        splitList(c.StringSlice("to")),
		Type:      strings.TrimSpace(c.String("type")),
		Title:     c.String("title"),
		Priority:  flagPriority(c),
		Content:   api.Content{Text: text},
		InReplyTo: strings.TrimSpace(c.String("reply-to")),
	}
	if c.Bool("private") {
		m.Visibility = api.VisibilityPrivate
	}
	if err := attachFiles(c, m); err != nil {
		return err
	}
	if m.ID == "" && api.ValidName(from) {
		// Fixed before the first try, so the outcome of a timed-out send
		// can be checked (maosctl get ID) and the send retried with --id.
		m.ID = api.NewID(from, time.Now())
	}
	// The global --timeout bounds the call: send's own --timeout is --wait's.
	ctx, cancel := call(rootContext(c))
	defer cancel()
	res, err := apiClient(c).Send(ctx, m)
	if err != nil {
		maybe := api.Classify(err) == api.MaybeCommitted
		err = apiError(rootContext(c), err)
		if maybe && m.ID != "" {
			err = fmt.Errorf("%w\nthe message may or may not be stored: check with 'maosctl get %s'; "+
				"retrying with --id %s is safe", err, m.ID, m.ID)
		}
		return err
	}
	if wait != "" {
		return sendAndWait(c, res, wait, waitTimeout)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	return printSent(c, res)
}

// textFlag is the value of the text flag name, read from stdin when it is
// "-" (trailing line ends dropped; empty input is a usage error).
func textFlag(c *cli.Context, name string) (string, error) {
	text := c.String(name)
	if text != "-" {
		return text, nil
	}
	r := c.App.Reader
	if r == nil {
		return "", usagef(c, "--%s -: no standard input", name)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("read --%s from stdin: %w", name, err)
	}
	text = strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(text) == "" {
		return "", usagef(c, "--%s -: standard input was empty", name)
	}
	return text, nil
}

// attachFiles uploads each --attach file as an artifact from m's sender
// and references it in m, {id, name}, bounded by the command's context
// and --transfer-timeout's default.
func attachFiles(c *cli.Context, m *api.Message) error {
	for _, path := range c.StringSlice("attach") {
		ctx, cancel := within(commandContext(c), defaultArtifactTimeout)
		a, err := artifacts.Upload(ctx, apiClient(c), path, "", m.From)
		cancel()
		if err != nil {
			return fmt.Errorf("--attach %s: %w", path, apiError(c, err))
		}
		m.Content.Artifacts = append(m.Content.Artifacts, api.ArtifactRef{Ref: a.ID, Name: filepath.Base(path)})
	}
	return nil
}
