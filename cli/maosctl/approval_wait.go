package maosctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

func approvalWaitCommand() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "wait until an approval is decided; the exit status says how",
		UsageText: `maosctl approval wait ID [--timeout D]

   maosctl approval wait $ID --timeout 1h && ./deploy.sh
   maosctl approval wait $ID; case $? in 0) echo approved;; 1) echo rejected;; 2) echo no decision;; esac`,
		Description: `Waits until the approval is approved, rejected, cancelled or expired, and
prints the outcome ("ID approved by alice, bob", "ID rejected by bob",
"ID expired") and then every decision, one a line. Exits 0 when it was
approved, 1 when it was rejected or cancelled, 2 when it expired or
--timeout (default: none) passed first, printing "ID still pending after
D". With --json it prints the approval with its decisions instead, and
exits the same.

It reads the approval, follows its events on the node's stream (no
polling; a stream the node closes is resumed where it stopped), and when
it ends or --timeout passes reads it once more for its decisions.`,
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Usage: "give up after `DURATION` and exit 2 (the global --timeout still bounds each read)"},
			jsonFlag(),
		},
		Action: approvalWait,
	}
}

func approvalWait(c *cli.Context) error {
	return waitObject(c, (*client.Client).Approval, approvalFinal,
		func(ctx context.Context, client *client.Client, root *cli.Context, a *api.Approval) (*api.Approval, error) {
			reread := func() (context.Context, context.CancelFunc) { return call(root) }
			return awaitApproval(ctx, client, a, reread, func(a *api.Approval, err error) {
				fmt.Fprintf(c.App.ErrWriter, "%s: %s is %s; its decisions could not be read: %v\n", c.App.Name, a.ID, a.State, err)
			})
		}, printApprovalOutcome)
}

func approvalFinal(a *api.Approval) bool { return a.State.Final() }

// awaitApproval is the wait on an approval of 'approval wait' and the
// gate: it follows a (as read) on the node's stream until it is final or
// ctx ends (followApproval), then reads it once more, within the context
// reread gives, for its decisions, which the stream's updates leave out.
// It returns the approval as it then stands and the follow's error: nil
// when it is final, ctx's when ctx ended first (the read is made all the
// same: it sees a decision made at the last moment), or a refusal of the
// stream that reconnecting will not mend (then no read). A failed read
// leaves the stream's last update and is given to readFailed.
func awaitApproval(ctx context.Context, client *client.Client, a *api.Approval,
	reread func() (context.Context, context.CancelFunc), readFailed func(*api.Approval, error)) (*api.Approval, error) {
	a, err := followApproval(ctx, client, a)
	if err != nil && ctx.Err() == nil {
		return a, err
	}
	rctx, cancel := reread()
	defer cancel()
	full, rerr := client.Approval(rctx, a.ID)
	if rerr != nil {
		readFailed(a, rerr)
		return a, err
	}
	return full, err
}

// followApproval follows approval a (as read) on the node's stream until
// it is final and returns it so, as its last update left it (without
// decisions: the stream's updates leave them out). When ctx ends first it
// returns a as last seen and ctx's error; a refusal of the stream that
// reconnecting will not mend is returned as the error.
func followApproval(ctx context.Context, client *client.Client, a *api.Approval) (*api.Approval, error) {
	// Its events after the last change the read saw: no gap.
	q := api.StreamQuery{Channel: a.Channel, Events: []string{api.EventApproval},
		Resume: strconv.FormatUint(lastChange(a), 10) + ":" + api.EventApproval}
	return followObject(ctx, client, q, a, func(ev api.StreamEvent) (*api.Approval, bool) {
		if ev.Approval == nil || ev.Approval.Approval.ID != a.ID {
			return nil, false
		}
		return ev.Approval.Approval, true
	}, approvalFinal)
}

// lastChange is the index of the last entry the approval shows: its
// request's or its last decision's.
func lastChange(a *api.Approval) uint64 {
	last := a.Seq
	for _, d := range a.Decisions {
		last = max(last, d.Seq)
	}
	return last
}

// printApprovalOutcome prints how approval a ended (or, still pending,
// that it had not after timeout) and its decisions, and returns the exit
// status that says it.
func printApprovalOutcome(c *cli.Context, a *api.Approval, timeout time.Duration) error {
	code := waitTimedOut
	line := fmt.Sprintf("%s still pending after %s (%d of %d approvals)", a.ID, timeout, a.Approvals, a.Quorum)
	switch a.State {
	case api.ApprovalApproved:
		code, line = waitSucceeded, a.ID+" approved"
		if who := approvers(a, api.DecisionApprove); len(who) > 0 {
			line += " by " + strings.Join(who, ", ")
		}
	case api.ApprovalRejected:
		code, line = waitFailed, a.ID+" rejected"
		if who := approvers(a, api.DecisionReject); len(who) > 0 {
			line += " by " + strings.Join(who, ", ")
		}
	case api.ApprovalCancelled:
		code, line = waitFailed, a.ID+" cancelled"
	case api.ApprovalExpired:
		code, line = waitTimedOut, a.ID+" expired"
	}
	return printWaitEnd(c, code, a, func(w io.Writer) error { return printDecisions(w, line, a) })
}

// printDecisions writes line, then each decision: "  T alice approve on
// sha256:…: comment".
func printDecisions(w io.Writer, line string, a *api.Approval) error {
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	for _, d := range a.Decisions {
		what := d.Decision
		if d.Voided {
			what += " (void)"
		}
		s := fmt.Sprintf("  %s %s %s on %s", d.Time.UTC().Format(time.RFC3339), d.Approver, what, shortHash(d.ActionHash))
		if d.Comment != "" {
			s += ": " + oneLine(d.Comment)
		}
		if _, err := fmt.Fprintln(w, s); err != nil {
			return err
		}
	}
	return nil
}
