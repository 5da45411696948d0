package maosctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// The approval group: what the requester does (request, cancel) and
// anyone reads (list, show) is here; the approvers' verbs (approve,
// reject, modify) are in approval_decide.go, the wait on the stream in
// approval_wait.go.

func approvalCommand() *cli.Command {
	return &cli.Command{
		Name:  "approval",
		Usage: "ask people to approve an exact action (k of n), decide on it, wait for the decision",
		UsageText: `maosctl approval request|list|show|approve|reject|modify|cancel|wait [flags]

   ID=$(maosctl --json approval request --from deployer --approver alice,bob,role:lead --quorum 2 \
          --title "deploy v2.3 to prod" --action '{"cmd":"deploy","version":"2.3"}' | jq -r .id)
   maosctl approval list --approver alice --state pending
   maosctl approval approve $ID --approver alice       # prints the action and the hash it approves
   maosctl approval wait $ID --timeout 1h && ./deploy.sh 2.3`,
		Description: `An approval is a proposed action (any JSON) that quorum of the listed
approvers (agent ids and role:NAME) must approve, kept in the cluster's log:

   pending ──(quorum distinct approvals)──▶ approved
      │ ──(one reject)──▶ rejected     ──(its timeout)──▶ expired
      │ ──(cancel, by its requester)──▶ cancelled
      └─(modify: the action is replaced; the approvals so far are void)

Every decision names the sha256 hash of the action it was made on: one on
an action that changed since is refused (409), so nobody approves
something other than what they saw. Each approver counts once per action.
With --on-timeout escalate, the cluster's escalation_target is alerted
and the approval waits one more timeout before it expires.

A request posts a hitl_approval_request message to the approvers (their
inbox, hook digest and status line show it); the outcome posts a
hitl_decision reply to the requester. --from and --approver default to
$MAOS_AGENT_ID. Add --json for the API's objects.`,
		Subcommands: []*cli.Command{
			approvalRequestCommand(),
			approvalListCommand(),
			approvalShowCommand(),
			approvalDecideCommand(api.DecisionApprove),
			approvalDecideCommand(api.DecisionReject),
			approvalDecideCommand(api.DecisionModify),
			approvalCancelCommand(),
			approvalWaitCommand(),
		},
		Action: noCommand,
	}
}

// actionFlag is the JSON value of flag name; "-" reads it from stdin. A
// value that is not JSON is a usage error.
func actionFlag(c *cli.Context, name string) (json.RawMessage, error) {
	text, err := textFlag(c, name)
	if err != nil {
		return nil, err
	}
	return rawJSON(c, name, text, "not one JSON value")
}

func approvalRequestCommand() *cli.Command {
	return &cli.Command{
		Name:  "request",
		Usage: "ask approvers to approve an action",
		UsageText: `maosctl approval request --approver A[,role:R...] --title T --action JSON|- [--from ID] [--quorum K]
       [--needed-for WHAT] [--rationale R] [--confidence 0..1] [--priority P] [--timeout D]
       [--on-timeout reject|escalate] [--option approve,reject,modify] [--task-id ID] [--channel C] [--id ID]

   maosctl approval request --from triage --approver alice --title "close #123 as a duplicate of #456" \
       --action '{"action_type":"close_issue","issue_number":123}' --rationale "same stack trace" --confidence 0.96
   kubectl diff -f prod.yaml | jq -Rs '{"diff": .}' | \
       maosctl approval request --approver role:sre --quorum 2 --title "apply prod.yaml" --action - --timeout 4h`,
		Description: `Opens the approval and prints "requested ID: pending, 0 of K approvals,
action sha256:… (seq N)"; with --json, the API's answer
{"id","seq","state","action_hash","approvals","quorum"}.

--approver lists agent ids and role:NAME entries (a role's agents each
count once); --quorum of them must approve (default 1). --timeout is how
long it waits for the decision (a Go duration, default 1h, at most 720h);
then it expires, or with --on-timeout escalate the cluster's
escalation_target is alerted and it waits once more. --option limits the
decisions it takes (approve must be one). The id is fixed before the
first try (appr-YYYYMMDD-HHMMSS-FROM-HEX unless --id gives one), so
repeating a request with the same --id stores it once.`,
		Flags: []cli.Flag{
			agentFlag("from", "requester agent `ID`"),
			&cli.StringSliceFlag{Name: "approver", Usage: "approver agent `ID` or role:NAME; repeat or comma-separate (required)"},
			&cli.IntFlag{Name: "quorum", Usage: "how many distinct approvers must approve: `K`", Value: 1},
			&cli.StringFlag{Name: "title", Usage: "one-line `TITLE` (required)"},
			&cli.StringFlag{Name: "action", Usage: "the proposed action as `JSON` (any value); - reads it from stdin (required)"},
			&cli.StringFlag{Name: "needed-for", Usage: "what the approval is for, in a few `WORDS` (seed 004's approval_needed_for)"},
			&cli.StringFlag{Name: "rationale", Usage: "why the action is proposed: `TEXT`"},
			&cli.Float64Flag{Name: "confidence", Usage: "the requester's confidence, `0..1`"},
			priorityFlag(),
			&cli.DurationFlag{Name: "timeout", Usage: "how long it waits for a decision: `DURATION`", Value: api.DefaultApprovalTimeout},
			&cli.StringFlag{Name: "on-timeout", Usage: "`WHAT` happens then: reject (it expires) or escalate", Value: api.OnTimeoutReject},
			&cli.StringSliceFlag{Name: "option", Usage: "a `DECISION` it takes (approve, reject, modify); repeat or comma-separate (default all)"},
			&cli.StringFlag{Name: "task-id", Usage: "the task `ID` it belongs to"},
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` of its messages", EnvVars: []string{envChannel}, Value: api.DefaultChannel},
			&cli.StringFlag{Name: "id", Usage: "approval `ID` to use instead of a generated one (makes retries safe across runs)"},
			jsonFlag(),
		},
		Action: approvalRequest,
	}
}

func approvalRequest(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := require(c, "from", "approver", "title", "action"); err != nil {
		return err
	}
	action, err := actionFlag(c, "action")
	if err != nil {
		return err
	}
	cmd := api.ApprovalRequestCommand{
		ID:                strings.TrimSpace(c.String("id")),
		From:              strings.TrimSpace(c.String("from")),
		Approvers:         splitList(c.StringSlice("approver")),
		Quorum:            c.Int("quorum"),
		Title:             c.String("title"),
		ApprovalNeededFor: c.String("needed-for"),
		Action:            action,
		Rationale:         c.String("rationale"),
		Priority:          flagPriority(c),
		Timeout:           api.ApprovalTimeout(c.Duration("timeout")),
		OnTimeout:         strings.TrimSpace(c.String("on-timeout")),
		Options:           splitList(c.StringSlice("option")),
		TaskID:            strings.TrimSpace(c.String("task-id")),
		Channel:           or(strings.TrimSpace(c.String("channel")), api.DefaultChannel),
	}
	if c.IsSet("confidence") {
		v := c.Float64("confidence")
		cmd.Confidence = &v
	}
	if cmd.Quorum < 1 {
		return usagef(c, "--quorum %d: want at least 1", cmd.Quorum)
	}
	res, err := createObject(c, "approval", &cmd.ID, cmd.From, api.NewApprovalID,
		func(ctx context.Context, client *client.Client) (api.ApprovalResult, error) {
			return client.RequestApproval(ctx, cmd)
		})
	if err != nil {
		return err
	}
	return printResult(c, res, "requested %s: %s, %d of %d approvals, action %s (seq %d)\n",
		res.ID, res.State, res.Approvals, res.Quorum, res.ActionHash, res.Seq)
}

func approvalListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list approvals, oldest first, by state, approver or requester",
		UsageText: `maosctl approval list [--state S] [--approver ID] [--from ID] [--after SEQ] [--limit N] [--page-size N]

   maosctl approval list --approver alice --state pending
   maosctl --json approval list --from deployer | jq -r '.approvals[] | select(.state == "approved") | .id'`,
		Description: `Prints one line per approval in creation order: id, state, approvals so
far of the quorum, requester, approvers and title: at most --limit
approvals (default 100), asking for as many pages as that takes; then,
when there are more, the command that lists the next ones. Every filter given must
match; --approver matches the approvals that list the agent by id or by
its registered role. States: pending, approved, rejected, expired,
cancelled. The read sees every write acknowledged before it. With --json,
GET /v1/approvals's answer {"approvals","has_more"} (without decisions).`,
		Flags: listFlags("approval",
			&cli.StringFlag{Name: "state", Usage: "only approvals in `STATE`"},
			&cli.StringFlag{Name: "approver", Usage: "only approvals agent `ID` may decide"},
			&cli.StringFlag{Name: "from", Usage: "only approvals agent `ID` requested"},
		),
		Action: approvalList,
	}
}

func approvalList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	q := api.ApprovalQuery{State: api.ApprovalState(strings.TrimSpace(c.String("state"))),
		Approver: strings.TrimSpace(c.String("approver")), From: strings.TrimSpace(c.String("from"))}
	client := apiClient(c)
	var page api.ApprovalPage
	var err error
	page.Approvals, page.HasMore, err = listObjects(c, "approval", func(ctx context.Context, after uint64, size int) ([]*api.Approval, bool, error) {
		q.After, q.Limit = after, size
		p, err := client.Approvals(ctx, q)
		return p.Approvals, p.HasMore, err
	}, func(a *api.Approval) uint64 { return a.Seq })
	if err != nil {
		return err
	}
	return printList(c, &page, &page.Approvals, page.HasMore, "approval", "ID\tSTATE\tAPPROVALS\tFROM\tAPPROVERS\tTITLE",
		func(a *api.Approval) string {
			return fmt.Sprintf("%s\t%s\t%d/%d\t%s\t%s\t%s", a.ID, a.State, a.Approvals, a.Quorum, a.From, strings.Join(a.Approvers, ","), a.Title)
		}, func(a *api.Approval) uint64 { return a.Seq })
}

func approvalShowCommand() *cli.Command {
	return &cli.Command{
		Name:  "show",
		Usage: "show an approval: its action, hash and decisions",
		UsageText: `maosctl approval show ID

   maosctl approval show appr-20261124-103000-deployer-4c78a9d2
   maosctl --json approval show $ID | jq .action`,
		Description: `Prints the approval: state, approvals so far of the quorum, requester and
approvers, what it is for, the rationale, the deadline, the action (as
indented JSON) with its hash, and every decision with its time, the hash
it was made on and its comment (a modify's with its new action; an
approval a later modify voided is marked void). The read sees every
decision acknowledged before it. With --json, GET /v1/approvals/ID's
answer.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: approvalShow,
	}
}

func approvalShow(c *cli.Context) error {
	return showObject(c, (*client.Client).Approval, printApproval)
}

// printApproval writes an approval for people: its state line, one
// "key: value" line per field it has, the action and its decisions.
func printApproval(w io.Writer, a *api.Approval) error {
	printHead(w, a.ID, approvalStateLine(a), a.Title, a.From, strings.Join(a.Approvers, ", "), a.Channel, a.Priority)
	if a.ApprovalNeededFor != "" {
		fmt.Fprintf(w, "needed for: %s\n", a.ApprovalNeededFor)
	}
	if a.Rationale != "" {
		fmt.Fprintf(w, "rationale: %s\n", oneLine(a.Rationale))
	}
	if a.Confidence != nil {
		fmt.Fprintf(w, "confidence: %s\n", strconv.FormatFloat(*a.Confidence, 'f', -1, 64))
	}
	if a.TaskID != "" {
		fmt.Fprintf(w, "task: %s\n", a.TaskID)
	}
	if len(a.Options) > 0 {
		fmt.Fprintf(w, "options: %s\n", strings.Join(a.Options, ", "))
	}
	fmt.Fprintf(w, "timeout: %s, then %s\n", time.Duration(a.TimeoutSeconds)*time.Second, a.OnTimeout)
	printStamps(w, a.Created, a.Seq, a.Updated, a.Context)
	printAction(w, a)
	return printLog(w, "decisions", a.Decisions, func(d api.ApprovalDecision) string {
		what := d.Decision
		if d.Voided {
			what += " (void: the action changed)"
		}
		note := oneLine(d.Comment)
		if len(d.Action) > 0 {
			note = strings.TrimSpace(note + " new action: " + string(d.Action))
		}
		return fmt.Sprintf("  %s\t#%d\t%s\t%s\ton %s\t%s", d.Time.UTC().Format(time.RFC3339), d.Seq, d.Approver, what, shortHash(d.ActionHash), note)
	})
}

// printAction writes the approval's action, indented, under its hash:
// what an approver decides on.
func printAction(w io.Writer, a *api.Approval) {
	var pretty bytes.Buffer
	if json.Indent(&pretty, a.Action, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(a.Action)
	}
	fmt.Fprintf(w, "action %s:\n  %s\n", a.ActionHash, pretty.String())
}

// approvalStateLine is the state and what goes with it: "pending (1 of 2
// approvals, until T)", "pending (escalated, until T)", "approved".
func approvalStateLine(a *api.Approval) string {
	if a.State != api.ApprovalPending {
		return fmt.Sprintf("%s (%d of %d approvals)", a.State, a.Approvals, a.Quorum)
	}
	esc := ""
	if a.Escalated {
		esc = ", escalated"
	}
	return fmt.Sprintf("pending (%d of %d approvals%s, until %s)", a.Approvals, a.Quorum, esc, a.Deadline.UTC().Format(time.RFC3339))
}

// shortHash is "sha256:" and the first 12 hex digits, for tables.
func shortHash(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12]
	}
	return h
}

func approvalCancelCommand() *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "cancel a pending approval you requested",
		UsageText: `maosctl approval cancel ID [--from ID] [--reason R]

   maosctl approval cancel $ID --from deployer --reason "rolled back instead"`,
		Description: `Cancels a pending approval; only its requester may (403 otherwise; an
admin token acts as the requester named by --from); one already decided
or expired is a conflict (409) saying its state, and a cancelled one
answers again. Prints "cancelled ID"; with --json the API's answer
{"id","seq","state","action_hash","approvals","quorum"}.`,
		Flags: []cli.Flag{
			agentFlag("from", "the requester's agent `ID`"),
			&cli.StringFlag{Name: "reason", Usage: "why, in a `SENTENCE`"},
			jsonFlag(),
		},
		Action: approvalCancel,
	}
}

func approvalCancel(c *cli.Context) error {
	return cancelObject(c, func(ctx context.Context, client *client.Client, id, from, reason string) (any, string, error) {
		res, err := client.CancelApproval(ctx, api.ApprovalCancelCommand{ID: id, From: from, Reason: reason})
		return res, res.ID, err
	})
}
