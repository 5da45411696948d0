package maosctl

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/urfave/cli/v2"
)

// defaultWaitTimeout bounds 'send --wait' unless its --timeout says
// otherwise.
const defaultWaitTimeout = 60 * time.Second

// sendWaitFlags checks send's --wait and --timeout before anything is
// sent: the state to wait for ("" for none) and how long.
func sendWaitFlags(c *cli.Context) (string, time.Duration, error) {
	wait := strings.TrimSpace(c.String("wait"))
	timeout := defaultWaitTimeout
	if c.IsSet("timeout") {
		if wait == "" {
			return "", 0, usagef(c, "--timeout goes with --wait; the global --timeout (each API call) goes before the command: maosctl --timeout D send ...")
		}
		if timeout = c.Duration("timeout"); timeout <= 0 {
			return "", 0, usagef(c, "--timeout %s: want a positive duration such as 60s or 10m", timeout)
		}
	}
	if wait != "" && !slices.Contains(waitStates, wait) {
		return "", 0, usagef(c, "--wait %q: want %s", wait, strings.Join(waitStates, " or "))
	}
	return wait, timeout, nil
}

// printSent prints a send's answer: "ID seq=N", then a line per
// recipient the rules blocked.
func printSent(c *cli.Context, res *api.SendResponse) error {
	if _, err := fmt.Fprintf(c.App.Writer, "%s seq=%d\n", res.ID, res.Seq); err != nil {
		return err
	}
	for _, b := range res.Blocked {
		if _, err := fmt.Fprintf(c.App.Writer, "blocked %s: %s\n", b.ID, b.Reason); err != nil {
			return err
		}
	}
	return nil
}

// sendAndWait waits for the receipts of a sent message and reports.
func sendAndWait(c *cli.Context, res *api.SendResponse, state string, timeout time.Duration) error {
	asJSON := wantJSON(c)
	if !asJSON {
		if err := printSent(c, res); err != nil {
			return err
		}
	}
	receipts, pending, err := waitReceipts(c, res.ID, state, timeout)
	if err != nil {
		return err
	}
	if asJSON {
		out := sendWait{SendResponse: *res}
		out.Wait.State, out.Wait.Pending, out.Wait.Receipts = state, pending, receipts
		if out.Wait.Pending == nil {
			out.Wait.Pending = []string{}
		}
		if err := printJSON(c.App.Writer, out); err != nil {
			return err
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("not %s within %s by %s (see 'maosctl receipts %s')", state, timeout, strings.Join(pending, ", "), res.ID)
	}
	if asJSON {
		return nil
	}
	var who []string
	for _, r := range receipts {
		if r.Reached(state) {
			who = append(who, r.Agent)
		}
	}
	if len(who) == 0 {
		_, err = fmt.Fprintln(c.App.Writer, "no recipients to wait for")
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s by %s\n", state, strings.Join(who, ", "))
	return err
}
