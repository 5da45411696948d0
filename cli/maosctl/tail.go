package maosctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func tailCommand() *cli.Command {
	return &cli.Command{
		Name:  "tail",
		Usage: "print messages as the node stores them (Server-Sent Events)",
		UsageText: `maosctl tail [--channel C] [--agent A] [--after SEQ] [-f]

   maosctl tail --channel ops -f
   maosctl --json tail --agent claude -f | jq -r .content.text`,
		Description: `Prints every message stored after --after (all of them by default), one
audit-style line each: "[TIME] [from→to] TYPE #SEQ: title or first line".
--channel keeps one channel, --agent one agent's inbox (both: its inbox in
that channel). Without -f it stops once it has printed what is stored now;
with -f it goes on printing messages as the node applies them, until
Ctrl-C, and reconnects (resuming after the last seq, with no gap and no
repeat) if the connection drops. --json prints one message object per line.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "channel", Usage: "only channel `NAME`"},
			&cli.StringFlag{Name: "agent", Usage: "only agent `ID`'s inbox"},
			&cli.Uint64Flag{Name: "after", Usage: "start after `SEQ`"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new messages"},
			jsonFlag(),
		},
		Action: tail,
	}
}

// tailLine renders a message in the audit trail's style.
func tailLine(m *api.Message) string {
	to := strings.Join(m.To, ",")
	text := m.Title
	if text == "" {
		text, _, _ = strings.Cut(m.Content.Text, "\n")
	}
	return fmt.Sprintf("[%s] [%s→%s] %s #%d: %s", m.Timestamp.UTC().Format(time.RFC3339), m.From, to,
		strings.ToUpper(m.Type), m.Seq, text)
}

func tail(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	q := api.StreamQuery{Channel: c.String("channel"), Agent: c.String("agent"), After: c.Uint64("after")}
	follow, asJSON := c.Bool("follow"), wantJSON(c)
	ctx := c.Context
	if !follow {
		var cancel context.CancelFunc
		ctx, cancel = call(c)
		defer cancel()
	}
	errCaughtUp := errors.New("caught up")
	show := func(ev api.StreamEvent) error {
		if ev.Ready {
			if !follow {
				return errCaughtUp
			}
			return nil
		}
		q.After = ev.Seq
		if asJSON {
			return printJSONLine(c.App.Writer, ev.Message)
		}
		_, err := fmt.Fprintln(c.App.Writer, tailLine(ev.Message))
		return err
	}
	client := apiClient(c)
	for attempt := 0; ; attempt++ {
		err := client.Stream(ctx, q, show)
		switch {
		case errors.Is(err, errCaughtUp):
			return nil
		case ctx.Err() != nil:
			return nil // Ctrl-C or the call's timeout ends a tail cleanly
		case !follow:
			if err == nil {
				err = errors.New("the node closed the stream")
			}
			return apiError(c, err)
		}
		if api.Classify(err) == api.Refused {
			return apiError(c, err) // bad input: reconnecting will not help
		}
		fmt.Fprintf(c.App.ErrWriter, "maosctl: stream interrupted (%v); resuming after #%d\n", err, q.After)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(min(time.Duration(attempt+1)*500*time.Millisecond, 5*time.Second)):
		}
	}
}

// printJSONLine prints v as one line of JSON.
func printJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
