package maosctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Exit statuses of 'task wait'.
const (
	waitSucceeded = 0
	waitFailed    = 1 // failed or cancelled
	waitTimedOut  = 2
)

func taskWaitCommand() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "wait until a task ends; the exit status says how",
		UsageText: `maosctl task wait ID [--timeout D]

   maosctl task wait $ID --timeout 30m && git merge review/pr-12
   maosctl task wait $ID; case $? in 0) echo done;; 1) echo failed;; 2) echo still running;; esac`,
		Description: `Waits until the task succeeds, fails or is cancelled, and prints the outcome:
"ID succeeded: success (0.97): RESULT", "ID failed: failure: ERROR_TYPE:
MESSAGE", "ID cancelled". Exits 0 when it succeeded, 1 when it failed or
was cancelled, 2 when --timeout (default: none) passed first, printing
"ID still STATE after D". With --json it prints the task as its last
event left it (without history) instead, and exits the same.

It reads the task once and then follows its events on the node's stream
(no polling); a stream the node closes is resumed where it stopped.`,
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Usage: "give up after `DURATION` and exit 2 (the global --timeout still bounds the first read)"},
			jsonFlag(),
		},
		Action: taskWait,
	}
}

func taskWait(c *cli.Context) error {
	return waitObject(c, (*client.Client).Task, taskFinal, followTask, printWaitOutcome)
}

func taskFinal(t *api.Task) bool { return t.State.Final() }

// followTask follows task t (as read) on the node's stream until it is
// final (followObject): its events after the last one the read saw, so
// none is missed.
func followTask(ctx context.Context, client *client.Client, _ *cli.Context, t *api.Task) (*api.Task, error) {
	last := t.Seq
	if n := len(t.History); n > 0 {
		last = t.History[n-1].Seq
	}
	q := api.StreamQuery{Channel: t.Channel, Resume: strconv.FormatUint(last, 10) + ":task", Tasks: api.StreamTasksOnly}
	return followObject(ctx, client, q, t, func(ev api.StreamEvent) (*api.Task, bool) {
		if ev.Task == nil || ev.Task.Task.ID != t.ID {
			return nil, false
		}
		return ev.Task.Task, true
	}, taskFinal)
}

// printWaitOutcome prints how task t ended (or, not final, that it had
// not after timeout) and returns the exit status that says it.
func printWaitOutcome(c *cli.Context, t *api.Task, timeout time.Duration) error {
	code := waitTimedOut
	line := fmt.Sprintf("%s still %s after %s", t.ID, t.State, timeout)
	switch t.State {
	case api.TaskSucceeded:
		code, line = waitSucceeded, t.ID+" succeeded"
	case api.TaskFailed:
		code, line = waitFailed, t.ID+" failed"
	case api.TaskCancelled:
		code, line = waitFailed, t.ID+" cancelled"
	}
	if tc := t.Completion; tc != nil && t.State.Final() {
		line += ": " + completionLine(tc)
		switch {
		case tc.Error != nil && tc.Error.ErrorMessage != "":
			line += ": " + oneLine(tc.Error.ErrorMessage)
		case tc.Result != "":
			line += ": " + oneLine(tc.Result)
		}
	}
	return printWaitEnd(c, code, t, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, line)
		return err
	})
}
