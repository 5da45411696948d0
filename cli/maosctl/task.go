package maosctl

import (
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

// jsonFlagValue is the JSON object or value of flag name ("" for none),
// refused as a usage error when it is not JSON.
func jsonFlagValue(c *cli.Context, name string) (json.RawMessage, error) {
	s := strings.TrimSpace(c.String(name))
	if s == "" {
		return nil, nil
	}
	return rawJSON(c, name, s, "not valid JSON")
}

// rawJSON is text, flag name's value, as JSON; text that is not JSON is
// a usage error, "--NAME: NOT (why)".
func rawJSON(c *cli.Context, name, text, not string) (json.RawMessage, error) {
	if !json.Valid([]byte(text)) {
		var v any
		err := json.Unmarshal([]byte(text), &v)
		return nil, usagef(c, "--%s: %s (%v)", name, not, err)
	}
	return json.RawMessage(text), nil
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
			agentFlag("from", "creator agent `ID`"),
			&cli.StringFlag{Name: "to", Usage: "assignee: agent `ID`, role:NAME or capability:NAME (required)"},
			&cli.StringFlag{Name: "title", Usage: "one-line `TITLE` (required)"},
			&cli.StringFlag{Name: "description", Usage: "the work, in words: `TEXT`; - reads it from stdin"},
			priorityFlag(),
			&cli.StringSliceFlag{Name: "depends-on", Usage: "task `ID`s that must succeed first; repeat or comma-separate"},
			&cli.DurationFlag{Name: "timeout", Usage: "lease of each claim: `DURATION`", Value: api.DefaultTaskTimeout},
			&cli.IntFlag{Name: "max-attempts", Usage: "claims that may lapse before the task fails: `N`", Value: api.DefaultTaskMaxAttempts},
			&cli.StringFlag{Name: "context", Usage: "free `JSON` for the claimant"},
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` of its messages", EnvVars: []string{envChannel}, Value: api.DefaultChannel},
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
	cmd := api.TaskCreateCommand{
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
		Channel:      or(strings.TrimSpace(c.String("channel")), api.DefaultChannel),
	}
	d := c.Duration("timeout")
	if d < time.Second || d%time.Second != 0 {
		return usagef(c, "--timeout %s: want whole seconds, at least 1s (the lease of each claim)", d)
	}
	cmd.TimeoutSeconds = int(d / time.Second)
	if cmd.MaxAttempts < 1 {
		return usagef(c, "--max-attempts %d: want at least 1", cmd.MaxAttempts)
	}
	res, err := createObject(c, "task", &cmd.ID, cmd.From, api.NewTaskID,
		func(ctx context.Context, client *client.Client) (api.TaskResult, error) {
			return client.CreateTask(ctx, cmd)
		})
	if err != nil {
		return err
	}
	return printResult(c, res, "created %s: %s (seq %d)\n", res.ID, res.State, res.Seq)
}

func taskListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list tasks, oldest first, by state, assignee, creator or claimant",
		UsageText: `maosctl task list [--state S] [--to T] [--from ID] [--claimed-by ID] [--after SEQ] [--limit N] [--page-size N]

   maosctl task list --state ready --to role:reviewer
   maosctl task list --claimed-by rita
   maosctl --json task list --from lead | jq -r '.tasks[] | select(.state == "failed") | .id'`,
		Description: `Prints one line per task in creation order: id, state (with the approval
it awaits), assignee, claimant, attempts (claims so far), leases lapsed
(of max_attempts, at which it fails) and title: at most --limit tasks
(default 100), asking for as many pages as that takes; then, when there
are more, the command that lists the next ones. Every filter given must
match. States: waiting, ready, running, awaiting_approval, succeeded,
failed, cancelled. The read sees every write acknowledged before it. With --json, GET /v1/tasks's answer
{"tasks","has_more"} (tasks without their history).`,
		Flags: listFlags("task",
			&cli.StringFlag{Name: "state", Usage: "only tasks in `STATE`"},
			&cli.StringFlag{Name: "to", Usage: "only tasks for `ASSIGNEE` (an agent, role:NAME or capability:NAME, as created)"},
			&cli.StringFlag{Name: "from", Usage: "only tasks created by agent `ID`"},
			&cli.StringFlag{Name: "claimed-by", Usage: "only tasks agent `ID` claimed"},
		),
		Action: taskList,
	}
}

func taskList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	q := api.TaskQuery{State: api.TaskState(strings.TrimSpace(c.String("state"))), To: strings.TrimSpace(c.String("to")),
		From: strings.TrimSpace(c.String("from")), ClaimedBy: strings.TrimSpace(c.String("claimed-by"))}
	client := apiClient(c)
	var page api.TaskPage
	var err error
	page.Tasks, page.HasMore, err = listObjects(c, "task", func(ctx context.Context, after uint64, size int) ([]*api.Task, bool, error) {
		q.After, q.Limit = after, size
		p, err := client.Tasks(ctx, q)
		return p.Tasks, p.HasMore, err
	}, func(t *api.Task) uint64 { return t.Seq })
	if err != nil {
		return err
	}
	return printList(c, &page, &page.Tasks, page.HasMore, "task", "ID\tSTATE\tTO\tCLAIMED BY\tATTEMPTS\tLAPSED\tTITLE",
		func(t *api.Task) string {
			state := string(t.State)
			if t.State == api.TaskAwaitingApproval {
				state += " (" + t.ApprovalID + ")"
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d/%d\t%s", t.ID, state, t.To, or(t.ClaimedBy, "-"), t.Attempt, t.Expiries, t.MaxAttempts, t.Title)
		}, func(t *api.Task) uint64 { return t.Seq })
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
	return showObject(c, (*client.Client).Task, printTask)
}

// printTask writes a task for people: its state line, one "key: value"
// line per field it has, its description and its history.
func printTask(w io.Writer, t *api.Task) error {
	printHead(w, t.ID, taskStateLine(t), t.Title, t.From, t.To, t.Channel, t.Priority)
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
	printStamps(w, t.Created, t.Seq, t.Updated, t.Context)
	if t.Description != "" {
		fmt.Fprintf(w, "\n%s\n", t.Description)
	}
	return printLog(w, "history", t.History, func(e api.TaskEvent) string {
		return fmt.Sprintf("  %s\t#%d\t%s\t%s\t%s\t%s", e.Time.UTC().Format(time.RFC3339), e.Seq, e.Actor, e.Event, e.State, e.Detail)
	})
}

// taskStateLine is the state and what goes with it: "running (rita,
// attempt 3, fence 17, lease until T)" (attempt: the claims so far, which
// max_attempts does not bound), "ready (from T)", "awaiting_approval
// (approval APPR of rita's completion)".
func taskStateLine(t *api.Task) string {
	switch {
	case t.State == api.TaskRunning && t.LeaseExpires != nil:
		return fmt.Sprintf("running (%s, attempt %d, fence %d, lease until %s)", t.ClaimedBy, t.Attempt,
			t.Fence, t.LeaseExpires.UTC().Format(time.RFC3339))
	case t.State == api.TaskAwaitingApproval:
		return fmt.Sprintf("awaiting_approval (approval %s of %s's completion)", t.ApprovalID, t.ClaimedBy)
	case t.State == api.TaskReady && t.ReadyAt != nil:
		return fmt.Sprintf("ready (claimable from %s)", t.ReadyAt.UTC().Format(time.RFC3339))
	}
	return string(t.State)
}

// completionLine is "success (0.97)", or "failure: timeout".
func completionLine(tc *api.TaskCompletion) string {
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
			agentFlag("from", "the creator's agent `ID`"),
			&cli.StringFlag{Name: "reason", Usage: "why, in a `SENTENCE` (kept in the history)"},
			jsonFlag(),
		},
		Action: taskCancel,
	}
}

func taskCancel(c *cli.Context) error {
	return cancelObject(c, func(ctx context.Context, client *client.Client, id, from, reason string) (any, string, error) {
		res, err := client.CancelTask(ctx, api.TaskCancelCommand{ID: id, From: from, Reason: reason})
		return res, res.ID, err
	})
}

// printTaskResult prints a task command's answer (format and args for
// people, the result with --json), or its error.
func printTaskResult(c *cli.Context, res api.TaskResult, err error, format string, args ...any) error {
	if err != nil {
		return apiError(rootContext(c), err)
	}
	return printResult(c, res, format, args...)
}
