package maosctl

import (
	"fmt"
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
	ctx, cancel := within(commandContext(c), timeout)
	defer cancel()
	client := apiClient(c)
	readCtx, cancelRead := call(root)
	t, err := client.Task(readCtx, id)
	cancelRead()
	if err != nil {
		return apiError(root, err)
	}
	if !t.State.Final() {
		// Follow the task's events after the last one the read saw: no gap.
		last := t.Seq
		if n := len(t.History); n > 0 {
			last = t.History[n-1].Seq
		}
		q := transport.StreamQuery{Channel: t.Channel, Resume: strconv.FormatUint(last, 10) + ":task", Tasks: transport.StreamTasksOnly}
		err := followStream(ctx, client, q, func(ev transport.StreamEvent) error {
			if ev.Task == nil || ev.Task.Task.ID != id {
				return nil
			}
			t = ev.Task.Task
			if t.State.Final() {
				return errStreamDone
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			return apiError(root, err)
		}
		// ctx ended: --timeout passed; t is as its last event left it.
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
