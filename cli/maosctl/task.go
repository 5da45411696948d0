package maosctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/urfave/cli/v2"
)

// The task group: create, list and show tasks, work on them as their
// claimant (task_claim.go) and wait for their end (task_wait.go).

func taskCommand() *cli.Command {
	return &cli.Command{
		Name:  "task",
		Usage: "delegate typed work to an agent or a queue, claim it, report on it, wait for it",
		UsageText: `maosctl task create|list|show|claim|progress|complete|fail|handoff|cancel|wait [flags]

   ID=$(maosctl --json task create --from lead --to role:reviewer --title "review PR 12" | jq -r .id)
   maosctl task claim $ID --agent rita                 # prints the fence
   maosctl task complete $ID --agent rita --fence 17 --result "LGTM" --confidence 0.9
   maosctl task wait $ID --timeout 10m && echo merged`,
		Description: `A task is work with a lifecycle, kept in the cluster's log like messages:

   waiting ──(its dependencies succeeded)──▶ ready ──claim──▶ running ──▶ succeeded | failed
   running ──complete --status requires_approval──▶ awaiting_approval ──▶ succeeded | failed | running
   cancel (by its creator) from waiting, ready, running or awaiting_approval ──▶ cancelled

--to is an agent, role:NAME or capability:NAME: a queue that exactly one
matching agent claims. A claim is a lease (--timeout, default 5m): report
progress to renew it; a lease that lapses puts the task back to ready
(after a backoff of 1, 2, 4, 8, 16 s) until --max-attempts, then it fails
with error_type timeout and an incident goes to the creator and the
cluster's escalation_target. The claim's fence (the log index that granted
it) goes with every progress, complete, fail and handoff: a claimant whose
lease lapsed is refused (409), so each task ends once.

Creating a task also posts a task_delegation message to its assignee;
ending it posts a task_completion reply to its creator. --from and --agent
default to $MAOS_AGENT_ID. Add --json for the API's objects.`,
		Subcommands: []*cli.Command{
			taskCreateCommand(),
			taskListCommand(),
			taskShowCommand(),
			taskClaimCommand(),
			taskProgressCommand(),
			taskCompleteCommand(),
			taskFailCommand(),
			taskHandoffCommand(),
			taskCancelCommand(),
			taskWaitCommand(),
		},
		Action: noCommand,
	}
}

// taskID is the command's one positional argument, the task's id; then
// the flags named by required must be given (require).
func taskID(c *cli.Context, required ...string) (string, error) {
	pos, err := positionalArgs(c, "ID")
	if err != nil {
		return "", err
	}
	return pos[0], require(c, required...)
}

// jsonFlagValue is the JSON object or value of flag name ("" for none),
// refused as a usage error when it is not JSON.
func jsonFlagValue(c *cli.Context, name string) (json.RawMessage, error) {
	s := strings.TrimSpace(c.String(name))
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		var v any
		err := json.Unmarshal([]byte(s), &v)
		return nil, usagef(c, "--%s: not valid JSON (%v)", name, err)
	}
	return json.RawMessage(s), nil
}

func taskCreateCommand() *cli.Command {
	return &cli.Command{
		Name:  "create",
		Usage: "create a task for an agent or a queue",
		UsageText: `maosctl task create --to AGENT|role:NAME|capability:NAME --title T [--description D|-] [--from ID]
       [--priority P] [--depends-on A,B] [--timeout D] [--max-attempts N] [--context JSON] [--channel C] [--id ID]

   maosctl task create --from lead --to role:reviewer --title "review PR 12" --description "diff in #review"
   maosctl task create --to capability:go --title "port the retry loop" --depends-on $DESIGN --timeout 30m
   git diff | maosctl task create --to rita --title "review this diff" --description - --context '{"pr":12}'`,
		Description: `Creates the task and prints "created ID: STATE (seq N)": ready, or waiting
while a task of --depends-on has not succeeded (failed at once if one
already failed or was cancelled; an unknown one is refused, naming it).
With --json, the API's answer {"id","seq","state"}.

--timeout is the lease of each claim (a Go duration, at least 1s, default
5m); --max-attempts how many claims may lapse before the task fails
(default 5); --context any JSON the claimant gets with the task. The id is
fixed before the first try (task-YYYYMMDD-HHMMSS-FROM-HEX unless --id
gives one), so repeating a create with the same --id stores it once.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "creator agent `ID` (required)", EnvVars: []string{envAgent}},
			&cli.StringFlag{Name: "to", Usage: "assignee: agent `ID`, role:NAME or capability:NAME (required)"},
			&cli.StringFlag{Name: "title", Usage: "one-line `TITLE` (required)"},
			&cli.StringFlag{Name: "description", Usage: "the work, in words: `TEXT`; - reads it from stdin"},
			priorityFlag(),
			&cli.StringSliceFlag{Name: "depends-on", Usage: "task `ID`s that must succeed first; repeat or comma-separate"},
			&cli.DurationFlag{Name: "timeout", Usage: "lease of each claim: `DURATION`", Value: fsm.DefaultTaskTimeout},
			&cli.IntFlag{Name: "max-attempts", Usage: "claims that may lapse before the task fails: `N`", Value: fsm.DefaultTaskMaxAttempts},
			&cli.StringFlag{Name: "context", Usage: "free `JSON` for the claimant"},
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` of its messages", EnvVars: []string{envChannel}, Value: fsm.DefaultChannel},
			&cli.BoolFlag{Name: "requires-hitl", Usage: "mark it as needing a human's approval"},
			&cli.StringFlag{Name: "id", Usage: "task `ID` to use instead of a generated one (makes retries safe across runs)"},
			jsonFlag(),
		},
		Action: taskCreate,
	}
}

func taskCreate(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := require(c, "from", "to", "title"); err != nil {
		return err
	}
	desc, err := textFlag(c, "description")
	if err != nil {
		return err
	}
	ctxJSON, err := jsonFlagValue(c, "context")
	if err != nil {
		return err
	}
	cmd := fsm.TaskCreateCommand{
		ID:           strings.TrimSpace(c.String("id")),
		From:         strings.TrimSpace(c.String("from")),
		To:           strings.TrimSpace(c.String("to")),
		Title:        c.String("title"),
		Description:  desc,
		Priority:     flagPriority(c),
		Context:      ctxJSON,
		DependsOn:    splitList(c.StringSlice("depends-on")),
		MaxAttempts:  c.Int("max-attempts"),
		RequiresHITL: c.Bool("requires-hitl"),
		Channel:      or(strings.TrimSpace(c.String("channel")), fsm.DefaultChannel),
	}
	d := c.Duration("timeout")
	if d < time.Second || d%time.Second != 0 {
		return usagef(c, "--timeout %s: want whole seconds, at least 1s (the lease of each claim)", d)
	}
	cmd.TimeoutSeconds = int(d / time.Second)
	if cmd.MaxAttempts < 1 {
		return usagef(c, "--max-attempts %d: want at least 1", cmd.MaxAttempts)
	}
	if cmd.ID == "" && fsm.ValidName(cmd.From) {
		// Fixed before the first try, so a create that timed out can be
		// checked (maosctl task show ID) and retried with --id.
		cmd.ID = fsm.NewTaskID(cmd.From, time.Now())
	}
	// The global --timeout bounds the call: create's own is the lease.
	root := rootContext(c)
	ctx, cancel := call(root)
	defer cancel()
	res, err := apiClient(c).CreateTask(ctx, cmd)
	if err != nil {
		maybe := maybeCommitted(err)
		err = apiError(root, err)
		if maybe {
			err = fmt.Errorf("%w\nthe task may or may not be stored: check with 'maosctl task show %s'; "+
				"retrying with --id %s is safe", err, cmd.ID, cmd.ID)
		}
		return err
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	_, err = fmt.Fprintf(c.App.Writer, "created %s: %s (seq %d)\n", res.ID, res.State, res.Seq)
	return err
}

func taskListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list tasks, oldest first, by state, assignee, creator or claimant",
		UsageText: `maosctl task list [--state S] [--to T] [--from ID] [--claimed-by ID] [--after SEQ] [--limit N]

   maosctl task list --state ready --to role:reviewer
   maosctl task list --claimed-by rita
   maosctl --json task list --from lead | jq -r '.tasks[] | select(.state == "failed") | .id'`,
		Description: `Prints one line per task in creation order: id, state (with the approval
it awaits), assignee, claimant, attempts (claims so far), leases lapsed
(of max_attempts, at which it fails) and title; then, when there are
more, the command that lists the next page. Every filter given must
match. States: waiting, ready, running, awaiting_approval, succeeded,
failed, cancelled. The read sees every write acknowledged before it. With --json, GET /v1/tasks's answer
{"tasks","has_more"} (tasks without their history).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Usage: "only tasks in `STATE`"},
			&cli.StringFlag{Name: "to", Usage: "only tasks for `ASSIGNEE` (an agent, role:NAME or capability:NAME, as created)"},
			&cli.StringFlag{Name: "from", Usage: "only tasks created by agent `ID`"},
			&cli.StringFlag{Name: "claimed-by", Usage: "only tasks agent `ID` claimed"},
			&cli.Uint64Flag{Name: "after", Usage: "start after the task with seq `SEQ` (the next page)"},
			&cli.IntFlag{Name: "limit", Usage: "at most `N` tasks (at most 1000)", Value: fsm.DefaultPageLimit},
			jsonFlag(),
		},
		Action: taskList,
	}
}

func taskList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	q := fsm.TaskQuery{State: fsm.TaskState(strings.TrimSpace(c.String("state"))), To: strings.TrimSpace(c.String("to")),
		From: strings.TrimSpace(c.String("from")), ClaimedBy: strings.TrimSpace(c.String("claimed-by")),
		After: c.Uint64("after"), Limit: c.Int("limit")}
	ctx, cancel := call(c)
	defer cancel()
	page, err := apiClient(c).Tasks(ctx, q)
	if err != nil {
		return apiError(c, err)
	}
	if page.Tasks == nil {
		page.Tasks = []*fsm.Task{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, page)
	}
	w := c.App.Writer
	if len(page.Tasks) == 0 {
		_, err := fmt.Fprintln(w, "no tasks")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTO\tCLAIMED BY\tATTEMPTS\tLAPSED\tTITLE")
	for _, t := range page.Tasks {
		state := string(t.State)
		if t.State == fsm.TaskAwaitingApproval {
			state += " (" + t.ApprovalID + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\n", t.ID, state, t.To, or(t.ClaimedBy, "-"), t.Attempt, t.Expiries, t.MaxAttempts, t.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.HasMore {
		_, err = fmt.Fprintf(w, "more: maosctl task list --after %d\n", page.Tasks[len(page.Tasks)-1].Seq)
	}
	return err
}

func taskShowCommand() *cli.Command {
	return &cli.Command{
		Name:  "show",
		Usage: "show a task with its completion and history",
		UsageText: `maosctl task show ID

   maosctl task show task-20260111-163315-lead-4c78a9d2
   maosctl --json task show $ID | jq .completion`,
		Description: `Prints the task: state (with the claim: claimant, attempt, fence, lease
end; or the approval it awaits), assignee, creator, dependencies, lease,
attempts (claims so far) and leases lapsed (of max_attempts, at which it
fails), its approval and the action approved, progress, the completion
(status, confidence, result, error) and every transition with its time
and actor. The read sees every write acknowledged before it.
With --json, GET /v1/tasks/ID's answer.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: taskShow,
	}
}

func taskShow(c *cli.Context) error {
	id, err := taskID(c)
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	t, err := apiClient(c).Task(ctx, id)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, t)
	}
	return printTask(c.App.Writer, t)
}

// printTask writes a task for people: its state line, one "key: value"
// line per field it has, its description and its history.
func printTask(w io.Writer, t *fsm.Task) error {
	fmt.Fprintf(w, "%s %s\n", t.ID, taskStateLine(t))
	fmt.Fprintf(w, "title: %s\n", t.Title)
	fmt.Fprintf(w, "from: %s → %s, channel %s, priority %s\n", t.From, t.To, t.Channel, t.Priority)
	if len(t.DependsOn) > 0 {
		fmt.Fprintf(w, "depends on: %s\n", strings.Join(t.DependsOn, ", "))
	}
	fmt.Fprintf(w, "lease: %s per claim, attempts %d, leases lapsed %d of %d\n", time.Duration(t.TimeoutSeconds)*time.Second,
		t.Attempt, t.Expiries, t.MaxAttempts)
	if t.RequiresHITL {
		fmt.Fprintln(w, "requires: a human's approval")
	}
	if t.ApprovalID != "" {
		fmt.Fprintf(w, "approval: %s (maosctl approval show %s)\n", t.ApprovalID, t.ApprovalID)
	}
	if len(t.ApprovedAction) > 0 {
		fmt.Fprintf(w, "approved action: %s\n", t.ApprovedAction)
	}
	if t.Progress != nil || t.ProgressMessage != "" {
		p := "-"
		if t.Progress != nil {
			p = strconv.FormatFloat(100**t.Progress, 'f', 0, 64) + "%"
		}
		fmt.Fprintf(w, "progress: %s %s\n", p, t.ProgressMessage)
	}
	if tc := t.Completion; tc != nil {
		fmt.Fprintf(w, "completion: %s\n", completionLine(tc))
		if tc.Result != "" {
			fmt.Fprintf(w, "result: %s\n", oneLine(tc.Result))
		}
		if tc.Rationale != "" {
			fmt.Fprintf(w, "rationale: %s\n", oneLine(tc.Rationale))
		}
		if e := tc.Error; e != nil {
			fmt.Fprintf(w, "error: %s: %s\n", e.ErrorType, oneLine(e.ErrorMessage))
		}
		for _, o := range tc.Outputs {
			fmt.Fprintf(w, "output: %s\n", o)
		}
	}
	fmt.Fprintf(w, "created: %s (seq %d), updated %s\n", t.Created.UTC().Format(time.RFC3339), t.Seq, t.Updated.UTC().Format(time.RFC3339))
	if len(t.Context) > 0 {
		fmt.Fprintf(w, "context: %s\n", t.Context)
	}
	if t.Description != "" {
		fmt.Fprintf(w, "\n%s\n", t.Description)
	}
	if len(t.History) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nhistory:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range t.History {
		fmt.Fprintf(tw, "  %s\t#%d\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Seq, e.Actor, e.Event, e.State, e.Detail)
	}
	return tw.Flush()
}

// taskStateLine is the state and what goes with it: "running (rita,
// attempt 3, fence 17, lease until T)" (attempt: the claims so far, which
// max_attempts does not bound), "ready (from T)", "awaiting_approval
// (approval APPR of rita's completion)".
func taskStateLine(t *fsm.Task) string {
	switch {
	case t.State == fsm.TaskRunning && t.LeaseExpires != nil:
		return fmt.Sprintf("running (%s, attempt %d, fence %d, lease until %s)", t.ClaimedBy, t.Attempt,
			t.Fence, t.LeaseExpires.UTC().Format(time.RFC3339))
	case t.State == fsm.TaskAwaitingApproval:
		return fmt.Sprintf("awaiting_approval (approval %s of %s's completion)", t.ApprovalID, t.ClaimedBy)
	case t.State == fsm.TaskReady && t.ReadyAt != nil:
		return fmt.Sprintf("ready (claimable from %s)", t.ReadyAt.UTC().Format(time.RFC3339))
	}
	return string(t.State)
}

// completionLine is "success (0.97)", or "failure: timeout".
func completionLine(tc *fsm.TaskCompletion) string {
	s := tc.Status
	if tc.ConfidenceScore != nil {
		s += " (" + strconv.FormatFloat(*tc.ConfidenceScore, 'f', -1, 64) + ")"
	}
	if tc.Error != nil {
		s += ": " + tc.Error.ErrorType
	}
	return s
}

// oneLine is s on one line, cut at 200 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}

func taskCancelCommand() *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "cancel a task you created",
		UsageText: `maosctl task cancel ID [--from ID] [--reason R]

   maosctl task cancel $ID --from lead --reason "superseded by PR 14"`,
		Description: `Cancels a task that is waiting, ready or running; the tasks that depend on
it fail (error_type dependency_failed). Only its creator may (403
otherwise; an admin token acts as the creator named by --from); a task
that ended is a conflict (409). Prints "cancelled ID"; with --json the
API's answer {"id","seq","state"}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "the creator's agent `ID` (required)", EnvVars: []string{envAgent}},
			&cli.StringFlag{Name: "reason", Usage: "why, in a `SENTENCE` (kept in the history)"},
			jsonFlag(),
		},
		Action: taskCancel,
	}
}

func taskCancel(c *cli.Context) error {
	id, err := taskID(c, "from")
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).CancelTask(ctx, fsm.TaskCancelCommand{ID: id, From: strings.TrimSpace(c.String("from")), Reason: c.String("reason")})
	return printTaskResult(c, res, err, "cancelled %s\n", res.ID)
}

// printTaskResult prints a task command's answer (format and args for
// people, the result with --json), or its error.
func printTaskResult(c *cli.Context, res fsm.TaskResult, err error, format string, args ...any) error {
	if err != nil {
		return apiError(rootContext(c), err)
	}
	return printResult(c, res, format, args...)
}
