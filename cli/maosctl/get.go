package maosctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func getCommand() *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "show one message by id",
		ArgsUsage: "ID",
		UsageText: `maosctl get ID [--strong]

   maosctl get msg-20261121-103000-codex-9f3a61c2
   maosctl --json get --strong msg-20261121-103000-codex-9f3a61c2`,
		Description: `Prints the whole message: header lines (id, seq, time, channel, from, to,
type, priority, title, and the optional fields that are set), a blank line,
then the text. With --json, the message object as the API returns it.

A node answers from its own state, which may be a few entries behind; --strong
waits for the leader so a message acknowledged by any node is found.`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: get,
	}
}

func get(c *cli.Context) error {
	m, err := readByID(c, apiClient(c).Message)
	if err != nil {
		return err
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, m)
	}
	// When "to" named a role, a glob, "all" or the text @mentioned agents,
	// show whom it was delivered to as well.
	shown := *m
	if len(m.Recipients) > 0 && !slices.Equal(m.To, m.Recipients) {
		shown.To = api.Recipients{strings.Join(m.To, ", ") + " → " + strings.Join(m.Recipients, ", ")}
	}
	return printMessage(c.App.Writer, &shown)
}

// readByID reads what the command's one ID argument names with read (a
// Client method such as Message or Receipts), bounded by --timeout, at the
// consistency --strong asks for. Errors are usage errors or apiError's.
func readByID[T any](c *cli.Context, read func(context.Context, string, api.Consistency) (T, error)) (T, error) {
	var zero T
	args, err := positionalArgs(c, "id")
	if err != nil {
		return zero, err
	}
	ctx, cancel := call(c)
	defer cancel()
	v, err := read(ctx, args[0], consistency(c))
	if err != nil {
		return zero, apiError(c, err)
	}
	return v, nil
}

// formatTime formats a message time for people: RFC 3339 in UTC, with
// milliseconds when full is true.
func formatTime(t time.Time, full bool) string {
	if t.IsZero() {
		return "-"
	}
	if full {
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.UTC().Format(time.RFC3339)
}

// printMessage writes m as header lines, a blank line and its text.
func printMessage(w io.Writer, m *api.Message) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	line := func(k, v string) {
		fmt.Fprintf(tw, "%s:\t%s\n", k, v)
	}
	opt := func(k, v string) {
		if v != "" {
			line(k, v)
		}
	}
	line("id", m.ID)
	line("seq", fmt.Sprint(m.Seq))
	line("time", formatTime(m.Timestamp, true))
	line("channel", m.Channel)
	line("from", m.From)
	line("to", strings.Join(m.To, ", "))
	line("type", m.Type)
	line("priority", string(m.Priority))
	line("title", m.Title)
	opt("in reply to", m.InReplyTo)
	opt("thread", m.ThreadID)
	opt("correlation", m.CorrelationID)
	opt("tags", strings.Join(m.Tags, ", "))
	var arts []string
	for _, a := range m.Content.Artifacts {
		arts = append(arts, a.String())
	}
	opt("artifacts", strings.Join(arts, ", "))
	if m.RequiresResponse {
		line("requires response", "yes")
	}
	opt("visibility", strings.TrimPrefix(m.Visibility, api.VisibilityPublic))
	if len(m.Metadata) > 0 && string(m.Metadata) != "{}" && string(m.Metadata) != "null" {
		line("metadata", string(m.Metadata))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	body := "\n" + m.Content.Text
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	if m.Content.Code != "" {
		body += "\n" + m.Content.Code
		if !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
	}
	_, err := io.WriteString(w, body)
	return err
}
