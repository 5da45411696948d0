package maosctl

import (
	"fmt"
	"os"

	"github.com/maos-project/maos/bridge"
	"github.com/maos-project/maos/dialect"
	"github.com/urfave/cli/v2"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "send the messages of a file-based mailbox or channel folder",
		UsageText: `maosctl import [--channel DEFAULT] [--json] DIR

   maosctl import ./mailboxes --channel legacy
   maosctl import /mnt/shared/collab/channels`,
		Description: `Reads every message file under DIR in any of the file-based layouts:
{agent}/inbox/*.json and {agent}/outbox/*.json, channel folders of
msg-YYYYMMDD-HHMMSS-{agent}-{hex}.json files, and the ADR-008
messages/inbox/{agent}/ tree. Each dialect is mapped onto a maos message:
content as a string or {text, code, artifacts}, subject/body,
message_type/message_id/from_agent/to_agent, session_id as the channel;
fields with no place are kept under metadata. Ids and timestamps are kept;
an id the cluster cannot take becomes "imp-" + a hash, and names are
lower-cased with other characters turned into "-" (originals kept in
metadata as original_id, original_from, ...).

A file with no session_id goes to --channel, else to its channel folder's
name, else to DIR's name. Re-running adds nothing: sends are idempotent by
id. A file that cannot be read, mapped or stored is named on stderr and
skipped whole; then the command exits 1. Other files (status.json) are
ignored. It prints "imported N, already there M, skipped K, ignored L";
with --json, the report {"imported":[{file,layout,id,seq,already}],
"skipped":[{file,reason}],"ignored":[...]}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` for files that name none"},
			jsonFlag(),
		},
		Action: runImport,
	}
}

func runImport(c *cli.Context) error {
	args, err := positionalArgs(c, "DIR")
	if err != nil {
		return err
	}
	dir := args[0]
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usagef(c, "DIR %q is not a folder", dir)
	}
	ch := c.String("channel")
	if ch != "" && dialect.SanitizeName(ch) != ch {
		return usagef(c, "--channel %q is not a channel name (lower-case letters, digits, ., _, -; at most 64)", ch)
	}
	// Each request is bounded by the client's own timeout: the whole
	// import may take longer than --timeout.
	rep, err := bridge.Import(c.Context, apiClient(c), dir, dialect.Options{Channel: ch})
	if err != nil && rep == nil {
		return err
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(c.App.ErrWriter, "maosctl: skipped %s: %s\n", s.File, s.Reason)
	}
	imported, already := rep.Counts()
	if wantJSON(c) {
		if perr := printJSON(c.App.Writer, rep); perr != nil {
			return perr
		}
	} else {
		fmt.Fprintf(c.App.Writer, "imported %d, already there %d, skipped %d, ignored %d\n", imported, already, len(rep.Skipped), len(rep.Ignored))
	}
	if err != nil {
		return apiError(c, err)
	}
	if len(rep.Skipped) > 0 {
		return fmt.Errorf("%d file(s) skipped (named above); fix them and re-run: what is imported stays", len(rep.Skipped))
	}
	return nil
}
