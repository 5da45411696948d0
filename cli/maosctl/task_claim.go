package maosctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// The claimant's verbs of the task group: claim a task, then report under
// the claim's fence.

func taskAgentFlag() cli.Flag {
	return agentFlag("agent", "the claimant's agent `ID`")
}

func taskFenceFlag() cli.Flag {
	return &cli.StringFlag{Name: "fence", Usage: "the claim's `FENCE`, as 'task claim' printed it (required)"}
}

// claimant reads the task id, --agent and --fence of a claimant's verb,
// and requires the flags also names after those.
func claimant(c *cli.Context, also ...string) (id, agent string, fence uint64, err error) {
	if id, err = objectID(c, append([]string{"agent", "fence"}, also...)...); err != nil {
		return
	}
	s := strings.TrimSpace(c.String("fence"))
	if fence, err = strconv.ParseUint(s, 10, 64); err != nil || fence == 0 {
		return "", "", 0, usagef(c, "--fence: %q is not a fence (a whole number from 1, as 'task claim' printed)", s)
	}
	return id, strings.TrimSpace(c.String("agent")), fence, nil
}

// leaseEnd is " until T", or "" for a result without a lease.
func leaseEnd(res api.TaskResult) string {
	if res.LeaseExpires == nil {
		return ""
	}
	return " until " + res.LeaseExpires.UTC().Format(time.RFC3339)
}

func taskClaimCommand() *cli.Command {
	return &cli.Command{
		Name:  "claim",
		Usage: "claim a ready task: you run it under a lease",
		UsageText: `maosctl task claim ID [--agent ID]

   maosctl task claim $ID --agent rita
   FENCE=$(maosctl --json task claim $ID | jq .fence)`,
		Description: `Makes you the task's claimant and prints "claimed ID: attempt N, fence F,
lease until T"; with --json, {"id","seq","state","attempt","fence","lease_expires"}.
Keep the fence: progress, complete, fail and handoff need it. The lease
lasts the task's timeout; 'task progress' renews it.

Only an agent of the task's queue may claim it (403 otherwise: the agent
it names, an agent registered with its role:NAME or capability:NAME). A
task another agent holds, one still waiting for its dependencies or
backing off after a lapsed lease, or one that ended is a conflict (409,
saying which). Claiming again a task you hold answers your claim.`,
		Flags:  []cli.Flag{taskAgentFlag(), jsonFlag()},
		Action: taskClaim,
	}
}

func taskClaim(c *cli.Context) error {
	id, err := objectID(c, "agent")
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).ClaimTask(ctx, id, strings.TrimSpace(c.String("agent")))
	return printTaskResult(c, res, err, "claimed %s: attempt %d, fence %d, lease%s\n", res.ID, res.Attempt, res.Fence, leaseEnd(res))
}

func taskProgressCommand() *cli.Command {
	return &cli.Command{
		Name:  "progress",
		Usage: "report progress on a task you run, renewing its lease",
		UsageText: `maosctl task progress ID --fence F [--agent ID] [--message M] [--progress 0..1]

   maosctl task progress $ID --agent rita --fence 17 --message "tests pass, writing the summary" --progress 0.8`,
		Description: `Records the report in the task's history and renews the lease from now for
the task's timeout; prints "progress on ID: lease until T". A fence that is
not the current claim's, or a lease that lapsed, is a conflict (409): the
task is someone else's now.`,
		Flags: []cli.Flag{taskAgentFlag(), taskFenceFlag(),
			&cli.StringFlag{Name: "message", Usage: "what you are doing, in a `SENTENCE`"},
			&cli.Float64Flag{Name: "progress", Usage: "how far along, `0..1`"},
			jsonFlag()},
		Action: taskProgress,
	}
}

func taskProgress(c *cli.Context) error {
	id, agent, fence, err := claimant(c)
	if err != nil {
		return err
	}
	cmd := api.TaskProgressCommand{ID: id, Agent: agent, Fence: fence, Message: c.String("message")}
	if c.IsSet("progress") {
		p := c.Float64("progress")
		cmd.Progress = &p
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).TaskProgress(ctx, cmd)
	return printTaskResult(c, res, err, "progress on %s: lease%s\n", res.ID, leaseEnd(res))
}

// completionFlags are what complete and fail both take.
func completionFlags() []cli.Flag {
	return []cli.Flag{
		taskAgentFlag(), taskFenceFlag(),
		&cli.StringFlag{Name: "result", Usage: "the outcome, in `TEXT`; - reads it from stdin"},
		&cli.StringFlag{Name: "rationale", Usage: "why, at most 1000 characters: `TEXT`"},
		&cli.StringSliceFlag{Name: "output", Usage: "an artifact `PATH` or URL produced; repeat or comma-separate"},
		&cli.StringSliceFlag{Name: "next-step", Usage: "a `STEP` left to do; repeat"},
		&cli.DurationFlag{Name: "execution-time", Usage: "how long the work took: `DURATION`"},
		&cli.StringFlag{Name: "metrics", Usage: "`JSON` metrics (tokens_used, ...)"},
		&cli.StringFlag{Name: "flags", Usage: "`JSON` flags for the creator"},
		jsonFlag(),
	}
}

// completion reads the completion flags of complete and fail into a
// completion of status.
func completion(c *cli.Context, status string) (api.TaskCompletion, error) {
	tc := api.TaskCompletion{Status: status, Rationale: c.String("rationale"),
		Outputs: splitList(c.StringSlice("output")), NextSteps: c.StringSlice("next-step"),
		ExecutionTimeMS: c.Duration("execution-time").Milliseconds()}
	var err error
	if tc.Result, err = textFlag(c, "result"); err != nil {
		return tc, err
	}
	if tc.Metrics, err = jsonFlagValue(c, "metrics"); err != nil {
		return tc, err
	}
	if tc.Flags, err = jsonFlagValue(c, "flags"); err != nil {
		return tc, err
	}
	return tc, nil
}

// postCompletion sends a complete (or fail) and prints "DONE ID: STATE".
func postCompletion(c *cli.Context, cmd api.TaskCompleteCommand, done string) error {
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).CompleteTask(ctx, cmd)
	return printTaskResult(c, res, err, "%s %s: %s\n", done, res.ID, res.State)
}

func taskCompleteCommand() *cli.Command {
	return &cli.Command{
		Name:  "complete",
		Usage: "end a task you run with its result",
		UsageText: `maosctl task complete ID --fence F [--agent ID] [--status S] [--result TEXT|-] [--confidence 0..1]
       [--proposed-action JSON|-] [--rationale R] [--output PATH]... [--next-step S]... [--execution-time D]
       [--metrics JSON] [--flags JSON]

   maosctl task complete $ID --agent rita --fence 17 --result "LGTM, two nits inline" --confidence 0.9
   go test ./... 2>&1 | maosctl task complete $ID --fence $FENCE --status partial_success --result -
   maosctl task complete $ID --fence $FENCE --status requires_approval --result "ready to ship" \
       --proposed-action '{"cmd":"deploy","version":"2.3"}'`,
		Description: `Ends the task with seed 004's task_completion: --status success (the
default) or partial_success make it succeeded and ready its dependents.
A failure is 'maosctl task fail'. The completion goes to the creator as a
task_completion reply. Prints "completed ID: STATE".

--status requires_approval asks the task's creator to approve first: the
task awaits the approval (awaiting_approval: no lease, its dependents
still waiting) and an approval of --proposed-action (any JSON; - reads it
from stdin; absent: {"task_id","result","outputs"}) goes to the creator,
quorum 1, for 24 h. It prints "completed ID: awaiting_approval, approval
APPR". Approved, the task succeeds and its dependents go on; rejected,
expired or cancelled, it fails (error_type approval_rejected,
approval_expired or approval_cancelled); modified, it runs again for you
under a new fence and lease, the approved action in the task
(approved_action: 'maosctl task show ID').

The fence must be the current claim's and the lease live (409 otherwise: a
claimant whose lease lapsed cannot finish a task another agent now runs).
Repeating the same completion answers the same.`,
		Flags: append(completionFlags(),
			&cli.StringFlag{Name: "status", Usage: "`STATUS`: success, partial_success or requires_approval", Value: api.TaskStatusSuccess},
			&cli.Float64Flag{Name: "confidence", Usage: "confidence in the result, `0..1`"},
			&cli.StringFlag{Name: "proposed-action", Usage: "with --status requires_approval, the action to approve as `JSON`; - reads it from stdin"}),
		Action: taskComplete,
	}
}

func taskComplete(c *cli.Context) error {
	id, agent, fence, err := claimant(c)
	if err != nil {
		return err
	}
	status := strings.TrimSpace(c.String("status"))
	if status == api.TaskStatusFailure {
		return usagef(c, "--status failure: use 'maosctl task fail', which says what went wrong")
	}
	tc, err := completion(c, status)
	if err != nil {
		return err
	}
	if c.IsSet("confidence") {
		v := c.Float64("confidence")
		tc.ConfidenceScore = &v
	}
	if c.IsSet("proposed-action") {
		if status != api.TaskStatusRequiresApproval {
			return usagef(c, "--proposed-action: only with --status %s (status is %q)", api.TaskStatusRequiresApproval, status)
		}
		if tc.ProposedAction, err = actionFlag(c, "proposed-action"); err != nil {
			return err
		}
	}
	cmd := api.TaskCompleteCommand{ID: id, Agent: agent, Fence: fence, Completion: tc}
	ctx, cancel := call(c)
	defer cancel()
	client := apiClient(c)
	res, err := client.CompleteTask(ctx, cmd)
	if err != nil || wantJSON(c) || res.State != api.TaskAwaitingApproval {
		return printTaskResult(c, res, err, "completed %s: %s\n", res.ID, res.State)
	}
	// The approval's id is the state machine's (derived from the entry):
	// read it from the task.
	t, err := client.Task(ctx, id)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "%s: %s awaits an approval, which could not be read: %v\n", c.App.Name, id, apiError(rootContext(c), err))
		return printResult(c, res, "completed %s: %s\n", res.ID, res.State)
	}
	return printResult(c, res, "completed %s: %s, approval %s\n", res.ID, res.State, t.ApprovalID)
}

func taskFailCommand() *cli.Command {
	return &cli.Command{
		Name:  "fail",
		Usage: "end a task you run as failed, saying why",
		UsageText: `maosctl task fail ID --fence F --error MESSAGE [--agent ID] [--error-type T] [--error-code C]
       [--recoverable] [--suggested-action S] [--result TEXT|-] [--rationale R] ...

   maosctl task fail $ID --agent rita --fence 17 --error "CI is red on main" --error-type ci_failed --recoverable`,
		Description: `Ends the task with status failure and seed 004's error object: --error is
its error_message, --error-type its error_type (default task_error). The
tasks that depend on it fail too (dependency_failed). The failure goes to
the creator as a task_completion reply. Prints "failed ID: failed".
Fence and lease are checked as for 'task complete'.`,
		Flags: append(completionFlags(),
			&cli.StringFlag{Name: "error", Usage: "what went wrong: `MESSAGE` (required)"},
			&cli.StringFlag{Name: "error-type", Usage: "the error's `TYPE`", Value: "task_error"},
			&cli.StringFlag{Name: "error-code", Usage: "the error's `CODE`"},
			&cli.BoolFlag{Name: "recoverable", Usage: "a retry may succeed"},
			&cli.StringFlag{Name: "suggested-action", Usage: "what to do about it: `SENTENCE`"}),
		Action: taskFail,
	}
}

func taskFail(c *cli.Context) error {
	id, agent, fence, err := claimant(c, "error")
	if err != nil {
		return err
	}
	tc, err := completion(c, api.TaskStatusFailure)
	if err != nil {
		return err
	}
	tc.Error = &api.TaskError{ErrorType: strings.TrimSpace(c.String("error-type")), ErrorMessage: c.String("error"),
		ErrorCode: c.String("error-code"), IsRecoverable: c.Bool("recoverable"), SuggestedAction: c.String("suggested-action")}
	return postCompletion(c, api.TaskCompleteCommand{ID: id, Agent: agent, Fence: fence, Completion: tc}, "failed")
}

func taskHandoffCommand() *cli.Command {
	return &cli.Command{
		Name:  "handoff",
		Usage: "hand a task you run to another agent or queue",
		UsageText: `maosctl task handoff ID --fence F --to AGENT|role:NAME|capability:NAME [--agent ID] [--reason R]

   maosctl task handoff $ID --agent rita --fence 17 --to role:security --reason "touches the auth code"`,
		Description: `Gives up your claim: the task is ready again, for --to, which gets a
handoff message. Prints "handed ID to TO: ready". Fence and lease are
checked as for 'task complete'.`,
		Flags: []cli.Flag{taskAgentFlag(), taskFenceFlag(),
			&cli.StringFlag{Name: "to", Usage: "the new assignee: agent `ID`, role:NAME or capability:NAME (required)"},
			&cli.StringFlag{Name: "reason", Usage: "why, in a `SENTENCE`"},
			jsonFlag()},
		Action: taskHandoff,
	}
}

func taskHandoff(c *cli.Context) error {
	id, agent, fence, err := claimant(c, "to")
	if err != nil {
		return err
	}
	to := strings.TrimSpace(c.String("to"))
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).HandoffTask(ctx, api.TaskHandoffCommand{ID: id, Agent: agent, Fence: fence, To: to, Reason: c.String("reason")})
	return printTaskResult(c, res, err, "handed %s to %s: %s\n", res.ID, to, res.State)
}
