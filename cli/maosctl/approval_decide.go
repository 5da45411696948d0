package maosctl

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// The approvers' verbs of the approval group: approve, reject and modify
// fetch the approval, show the action and its hash, and decide on that
// hash, so a decision is never made on an action the approver did not see.

// decideHelp is each decision's usage line, examples and words.
var decideHelp = map[string]struct{ usage, text, examples, outcome string }{
	api.DecisionApprove: {
		usage:    "approve the action an approval proposes",
		text:     "maosctl approval approve ID [--approver ID] [--comment C] [--hash sha256:…]",
		examples: `maosctl approval approve $ID --approver alice --comment "checked the diff"`,
		outcome: `Your approval counts once; when quorum distinct approvers have approved,
the approval is approved and its requester is told.`,
	},
	api.DecisionReject: {
		usage:    "reject the action an approval proposes",
		text:     "maosctl approval reject ID [--approver ID] [--comment C] [--hash sha256:…]",
		examples: `maosctl approval reject $ID --approver bob --comment "not on a Friday"`,
		outcome:  `One rejection rejects the approval; its requester is told.`,
	},
	api.DecisionModify: {
		usage:    "replace the action an approval proposes: the approvals so far are void",
		text:     "maosctl approval modify ID --action JSON|- [--approver ID] [--comment C] [--hash sha256:…]",
		examples: `maosctl approval modify $ID --approver alice --action '{"cmd":"deploy","version":"2.3","canary":true}'`,
		outcome: `The action is replaced by --action (a new hash): every approval given so far
is void (kept, marked void) and everyone decides again on the new action;
the approval stays pending, with the same deadline.`,
	},
}

func approvalDecideCommand(decision string) *cli.Command {
	h := decideHelp[decision]
	flags := []cli.Flag{
		agentFlag("approver", "your agent `ID`, as the approval lists it or by your role"),
		&cli.StringFlag{Name: "comment", Usage: "a `SENTENCE` kept with the decision"},
		&cli.StringFlag{Name: "hash", Usage: "decide only if the action is still the one with this `HASH` (as 'approval show' printed it)"},
		jsonFlag(),
	}
	if decision == api.DecisionModify {
		flags = append(flags, &cli.StringFlag{Name: "action", Usage: "the new action as `JSON`; - reads it from stdin (required)"})
	}
	return &cli.Command{
		Name:  decision,
		Usage: h.usage,
		UsageText: h.text + `

   ` + h.examples,
		Description: `Fetches the approval, prints its title and the action with its hash, and
sends your decision on that hash (with --hash, on the hash given: one you
read earlier with 'approval show'). If the action changed in between, the
node refuses it (409) naming the new hash: look at it again. Then prints
where the approval stands: "ID approved by alice, bob", "ID pending: 1 of
2 approvals". With --json, only the API's answer: the approval with its
decisions.

` + h.outcome + `

Only an approver the approval lists (by id, or role:NAME for an agent
registered with that role) may decide (403), once per action (409); an
approval that is no longer pending is a conflict (409).`,
		Flags:  flags,
		Action: func(c *cli.Context) error { return approvalDecide(c, decision) },
	}
}

func approvalDecide(c *cli.Context, decision string) error {
	id, err := objectID(c)
	if err != nil {
		return err
	}
	required := []string{"approver"}
	if decision == api.DecisionModify {
		required = append(required, "action")
	}
	if err := require(c, required...); err != nil {
		return err
	}
	cmd := api.ApprovalDecideCommand{ID: id, Approver: strings.TrimSpace(c.String("approver")), Decision: decision,
		ActionHash: strings.TrimSpace(c.String("hash")), Comment: c.String("comment")}
	if decision == api.DecisionModify {
		if cmd.Action, err = actionFlag(c, "action"); err != nil {
			return err
		}
	}
	client := apiClient(c)
	ctx, cancel := call(c)
	defer cancel()
	a, err := client.Approval(ctx, id)
	if err != nil {
		return apiError(c, err)
	}
	w := c.App.Writer
	if !wantJSON(c) {
		fmt.Fprintf(w, "%s %s: %s\n", a.ID, approvalStateLine(a), a.Title)
		printAction(w, a)
	}
	if cmd.ActionHash == "" {
		cmd.ActionHash = a.ActionHash
	}
	after, err := client.DecideApproval(ctx, cmd)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(w, after)
	}
	return printDecided(w, after, cmd)
}

// printDecided says where the approval stands after cmd.
func printDecided(w io.Writer, a *api.Approval, cmd api.ApprovalDecideCommand) error {
	var err error
	switch {
	case a.State == api.ApprovalApproved:
		_, err = fmt.Fprintf(w, "%s approved by %s\n", a.ID, strings.Join(approvers(a, api.DecisionApprove), ", "))
	case a.State != api.ApprovalPending:
		_, err = fmt.Fprintf(w, "%s %s\n", a.ID, a.State)
	case cmd.Decision == api.DecisionModify:
		_, err = fmt.Fprintf(w, "%s pending: the action is now %s; the approvals before it are void, 0 of %d\n", a.ID, a.ActionHash, a.Quorum)
	default:
		_, err = fmt.Fprintf(w, "%s pending: %d of %d approvals\n", a.ID, a.Approvals, a.Quorum)
	}
	return err
}

// approvers are the agents whose decision (not voided) on the approval's
// current action is decision, in order.
func approvers(a *api.Approval, decision string) []string {
	var out []string
	for _, d := range a.Decisions {
		if d.Decision == decision && !d.Voided && d.ActionHash == a.ActionHash {
			out = append(out, d.Approver)
		}
	}
	return out
}
