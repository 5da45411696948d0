package maosctl

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/bridge"
)

func mirrorCommand() *cli.Command {
	return &cli.Command{
		Name:  "mirror",
		Usage: "keep a channel folder of msg-*.json files for file-polling watchers",
		UsageText: `maosctl mirror --channel CH --dir DIR [-f] [--json]

   maosctl mirror --channel agent-os-paper --dir /mnt/shared/collab/channels/agent-os-paper -f`,
		Description: `Writes each message of the channel to DIR as ID.json in the channel layout's
shape (id, seq, timestamp, session_id, from, to, type,
content{text,code,artifacts}, metadata), so watcher scripts that poll the
folder with jq keep working. A file is written to a hidden .tmp file and
then put in place; an existing file is never rewritten.

It starts after the newest file present (the highest "seq"). Without -f it
writes what is there and exits; with -f it follows the channel's stream
until interrupted, reconnecting after the last message it wrote.
It prints each file written; with --json, one {"file","id","seq"} per line.

A folder has no per-reader access control, so private messages and those
for moderators only are never written, whatever the token may read; each
one skipped is a line on stderr, and the count is the last line.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` (required)", EnvVars: []string{envChannel}},
			&cli.StringFlag{Name: "dir", Usage: "`DIR` to keep (required; created if missing)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep following the channel"},
			jsonFlag(),
		},
		Action: mirror,
	}
}

func mirror(c *cli.Context) error {
	if err := noArgs(c, "channel", "dir"); err != nil {
		return err
	}
	if !api.ValidName(c.String("channel")) {
		return usagef(c, "--channel %q is not a channel name (lower-case letters, digits, ., _, -; at most 64)", c.String("channel"))
	}
	asJSON := wantJSON(c)
	var werr error
	mr := &bridge.Mirror{Client: apiClient(c), Channel: c.String("channel"), Dir: c.String("dir")}
	mr.OnWrite = func(path string, m *api.Message) {
		if werr != nil {
			return
		}
		if asJSON {
			werr = printJSONLine(c.App.Writer, map[string]any{"file": path, "id": m.ID, "seq": m.Seq})
		} else {
			_, werr = fmt.Fprintln(c.App.Writer, path)
		}
	}
	mr.OnSkip = func(m *api.Message) {
		fmt.Fprintf(c.App.ErrWriter, "maosctl: skipped #%d %s: %s, and a shared folder would show it to every reader\n", m.Seq, m.ID, visibilityWords(m))
	}
	mr.OnRetry = func(err error, after uint64) {
		fmt.Fprintf(c.App.ErrWriter, "maosctl: stream interrupted (%v); resuming after #%d\n", err, after)
	}
	var err error
	if c.Bool("follow") {
		err = mr.Follow(c.Context)
	} else {
		ctx, cancel := call(c)
		defer cancel()
		_, err = mr.Once(ctx)
	}
	if mr.Skipped > 0 {
		fmt.Fprintf(c.App.ErrWriter, "maosctl: skipped %d message(s) not for everyone (private or for moderators only)\n", mr.Skipped)
	}
	if err != nil {
		return apiError(c, err)
	}
	return werr
}

// visibilityWords says who may read m, which is not public.
func visibilityWords(m *api.Message) string {
	if m.Visibility == api.VisibilityModerators {
		return "for moderators only"
	}
	return "private"
}
