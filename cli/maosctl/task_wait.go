package maosctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/urfave/cli/v2"
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
	id, err := taskID(c)
	if err != nil {
		return err
	}
	timeout := c.Duration("timeout")
	if c.IsSet("timeout") && timeout <= 0 {
		return usagef(c, "--timeout %s: want a positive duration such as 90s or 30m", timeout)
	}
	root := rootContext(c)
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	client := apiClient(c)
	readCtx, cancel := call(root)
	t, err := client.Task(readCtx, id)
	cancel()
	if err != nil {
		return apiError(root, err)
	}
	// Follow the task's events after the last one the read saw: no gap.
	last := t.Seq
	if n := len(t.History); n > 0 {
		last = t.History[n-1].Seq
	}
	resume := strconv.FormatUint(last, 10) + ":task"
	errEnded := errors.New("ended")
	delay := 100 * time.Millisecond
	for !t.State.Final() {
		err := client.Stream(ctx, transport.StreamQuery{Channel: t.Channel, Resume: resume, Tasks: transport.StreamTasksOnly},
			func(ev transport.StreamEvent) error {
				if ev.ID != "" {
					resume = ev.ID
				}
				if ev.Task == nil || ev.Task.Task.ID != id {
					return nil
				}
				t = ev.Task.Task
				delay = 100 * time.Millisecond
				if t.State.Final() {
					return errEnded
				}
				return nil
			})
		var api *transport.APIError
		switch {
		case errors.Is(err, errEnded):
		case ctx.Err() != nil:
			return printWaitOutcome(c, t, timeout)
		case errors.As(err, &api) && api.Status < http.StatusInternalServerError && api.Status != http.StatusTooManyRequests:
			return apiError(root, err) // bad input: reconnecting will not help
		default:
			// The node closed the stream or could not be reached: resume
			// where it stopped, a little later each time.
			select {
			case <-ctx.Done():
				return printWaitOutcome(c, t, timeout)
			case <-time.After(delay):
			}
			delay = min(2*delay, 5*time.Second)
		}
	}
	return printWaitOutcome(c, t, timeout)
}

// printWaitOutcome prints how task t ended (or, not final, that it had
// not after timeout) and returns the exit status that says it.
func printWaitOutcome(c *cli.Context, t *fsm.Task, timeout time.Duration) error {
	code := waitTimedOut
	line := fmt.Sprintf("%s still %s after %s", t.ID, t.State, timeout)
	switch t.State {
	case fsm.TaskSucceeded:
		code, line = waitSucceeded, t.ID+" succeeded"
	case fsm.TaskFailed:
		code, line = waitFailed, t.ID+" failed"
	case fsm.TaskCancelled:
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
	var err error
	if wantJSON(c) {
		err = printJSON(c.App.Writer, t)
	} else {
		_, err = fmt.Fprintln(c.App.Writer, line)
	}
	if err != nil || code == waitSucceeded {
		return err
	}
	return &exitStatus{code: code}
}
