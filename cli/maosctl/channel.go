package maosctl

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// channelCommand is `maosctl channel`: per-channel settings.
func channelCommand() *cli.Command {
	chFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "channel", Usage: "channel `NAME` (required)", EnvVars: []string{envChannel}}
	}
	return &cli.Command{
		Name:  "channel",
		Usage: "per-channel settings: retention",
		UsageText: `maosctl channel set-retention|retention|trim --channel C [flags]

   maosctl channel set-retention --channel ops --max-age 720h
   maosctl channel retention --channel ops`,
		Description: `Retention keeps a channel from growing without bound. A policy removes the
oldest messages beyond --max-messages, and those older than --max-age
(measured against the time of the log entry that trims, never a node's
clock). The leader trims every channel with a policy once a minute; setting
a policy trims at once. Trimmed messages leave the channel log, inboxes,
threads and receipts on every node alike; their ids stay reserved, so a late
retry of a trimmed send is still not stored twice, and the audit trail keeps
their lines.`,
		Action: noCommand,
		Subcommands: []*cli.Command{
			{
				Name:  "set-retention",
				Usage: "set a channel's retention policy and trim now",
				UsageText: `maosctl channel set-retention --channel C [--max-age D] [--max-messages N]

   maosctl channel set-retention --channel ops --max-age 720h --max-messages 100000`,
				Description: `Prints how many messages the immediate trim removed. Giving neither limit
removes the policy. --max-age is a duration (1m to 100 years).`,
				Flags: []cli.Flag{chFlag(),
					&cli.StringFlag{Name: "max-age", Usage: "remove messages older than `DURATION` (e.g. 720h)"},
					&cli.Uint64Flag{Name: "max-messages", Usage: "keep at most `N` messages"},
					jsonFlag()},
				Action: func(c *cli.Context) error {
					if err := require(c, "channel"); err != nil {
						return err
					}
					ctx, cancel := call(c)
					defer cancel()
					res, err := apiClient(c).SetRetention(ctx, c.String("channel"), c.String("max-age"), c.Uint64("max-messages"))
					if err != nil {
						return apiError(c, err)
					}
					if wantJSON(c) {
						return printJSON(c.App.Writer, res)
					}
					fmt.Fprintf(c.App.Writer, "channel %s: max_age %v, max_messages %d; trimmed %d now (%d in all)\n",
						res.Channel, res.Retention.MaxAge, res.Retention.MaxMessages, res.Trimmed, res.Retention.Trimmed)
					return nil
				},
			},
			{
				Name:        "retention",
				Usage:       "show a channel's retention policy and what it trimmed",
				UsageText:   "maosctl channel retention --channel C [--strong]\n\n   maosctl channel retention --channel ops --json",
				Description: `Prints the policy and the count of messages trimmed so far.`,
				Flags:       []cli.Flag{chFlag(), strongFlag(), jsonFlag()},
				Action: func(c *cli.Context) error {
					if err := require(c, "channel"); err != nil {
						return err
					}
					ctx, cancel := call(c)
					defer cancel()
					r, err := apiClient(c).Retention(ctx, c.String("channel"), consistency(c))
					if err != nil {
						return apiError(c, err)
					}
					if wantJSON(c) {
						return printJSON(c.App.Writer, r)
					}
					fmt.Fprintf(c.App.Writer, "channel %s: max_age %v, max_messages %d, trimmed %d (newest trimmed seq %d)\n",
						r.Channel, r.MaxAge, r.MaxMessages, r.Trimmed, r.LastTrimSeq)
					return nil
				},
			},
			{
				Name:        "trim",
				Usage:       "apply a channel's retention policy now",
				UsageText:   "maosctl channel trim --channel C\n\n   maosctl channel trim --channel ops",
				Description: `Prints how many messages were removed.`,
				Flags:       []cli.Flag{chFlag(), jsonFlag()},
				Action: func(c *cli.Context) error {
					if err := require(c, "channel"); err != nil {
						return err
					}
					ctx, cancel := call(c)
					defer cancel()
					res, err := apiClient(c).Trim(ctx, c.String("channel"))
					if err != nil {
						return apiError(c, err)
					}
					if wantJSON(c) {
						return printJSON(c.App.Writer, res)
					}
					fmt.Fprintf(c.App.Writer, "channel %s: trimmed %d (up to seq %d)\n", res.Channel, res.Trimmed, res.UpToSeq)
					return nil
				},
			},
		},
	}
}
