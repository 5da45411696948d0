package system

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/testing/harness"
)

// taskWait bounds each wait of the task tests: a claim, a run of the stub
// model, a lease that lapses (a few seconds) and a failover.
const taskWait = 60 * time.Second

// reviewerYAML is a watcher config of one agent of role reviewer that
// claims the role's queue, running command (argv items, quoted).
func reviewerYAML(id, command string) string {
	return fmt.Sprintf(`
agents:
  - id: %s
    role: reviewer
    claim: ["role:reviewer"]
    command: [%s]
    context_messages: 0
    retries: 0
    timeout: 120s
`, id, command)
}

// createTask creates cmd through cl (the id fixed by the test) and
// returns the id.
func createTask(t *testing.T, cl *client.Client, cmd api.TaskCreateCommand) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	res, err := cl.CreateTask(ctx, cmd)
	if err != nil {
		t.Fatalf("create task %s: %v", cmd.ID, err)
	}
	if res.ID != cmd.ID {
		t.Fatalf("create task %s: answered %+v", cmd.ID, res)
	}
	return res.ID
}

// readTask reads task id (with its history) through cl.
func readTask(cl *client.Client, id string) (*api.Task, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return cl.Task(ctx, id)
}

// waitTask polls cl until task id is in state, and returns it.
func waitTask(t *testing.T, cl *client.Client, id string, state api.TaskState) *api.Task {
	t.Helper()
	var task *api.Task
	harness.NoErr(t, harness.WaitFor(taskWait, fmt.Sprintf("task %s %s", id, state), func() error {
		var err error
		if task, err = readTask(cl, id); err != nil {
			return err
		}
		if task.State != state {
			return fmt.Errorf("it is %s", task.State)
		}
		return nil
	}))
	return task
}

// events lists the history's events of kind, in order.
func events(task *api.Task, kind string) []api.TaskEvent {
	var out []api.TaskEvent
	for _, e := range task.History {
		if e.Event == kind {
			out = append(out, e)
		}
	}
	return out
}

// completionReplies lists the task_completion messages that answer
// task's delegation in its channel, as cl reads them (strongly).
func completionReplies(t *testing.T, cl *client.Client, task *api.Task) []*api.Message {
	t.Helper()
	msgs, err := readChannel(cl, task.Channel, api.Strong)
	harness.NoErr(t, err)
	var out []*api.Message
	for _, m := range msgs {
		if m.Type == "task_completion" && m.InReplyTo == task.MessageID {
			out = append(out, m)
		}
	}
	return out
}

// describe is a task's state and history, for failure messages.
func describe(task *api.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s claimed_by=%q attempt=%d fence=%d;", task.ID, task.State, task.ClaimedBy, task.Attempt, task.Fence)
	for _, e := range task.History {
		fmt.Fprintf(&b, " [%d %s %s→%s %q]", e.Seq, e.Actor, e.Event, e.State, e.Detail)
	}
	return b.String()
}

// On a 3-node cluster with a watcher on each of two nodes, both agents of
// the reviewer role claiming its queue, every task to role:reviewer is
// claimed by exactly one of them, once, and completed by it once: one
// claim and one completion in its history, one task_completion message to
// its creator, from the claimant, with the stub's answer.
func TestTaskRoleQueueClaimedByOneOfTwo(t *testing.T) {
	c := clustertest.New(t, 3)
	n1 := c.Nodes[0].Client
	startWatcher(t, c.Nodes[1].Client, reviewerYAML("rev-a", fmt.Sprintf("%q", stubmodelBin)))
	startWatcher(t, c.Nodes[2].Client, reviewerYAML("rev-b", fmt.Sprintf("%q", stubmodelBin)))
	waitRegistered(t, n1, "rev-a")
	waitRegistered(t, n1, "rev-b")

	var ids []string
	for i := range 4 {
		ids = append(ids, createTask(t, n1, api.TaskCreateCommand{ID: fmt.Sprintf("task-review-%d", i), From: "lead",
			To: "role:reviewer", Title: fmt.Sprintf("review part %d", i), Description: "look it over", Channel: "dev"}))
	}
	claimants := map[string]int{}
	for _, id := range ids {
		task := waitTask(t, n1, id, api.TaskSucceeded)
		claims, done := events(task, "claimed"), events(task, "completed")
		if len(claims) != 1 || len(done) != 1 || done[0].Actor != task.ClaimedBy || claims[0].Actor != task.ClaimedBy ||
			(task.ClaimedBy != "rev-a" && task.ClaimedBy != "rev-b") || task.Attempt != 1 {
			t.Errorf("want one claim and one completion by one reviewer: %s", describe(task))
		}
		if task.Completion == nil || task.Completion.Status != api.TaskStatusSuccess || task.Completion.Result != "stub answer to "+id {
			t.Errorf("%s: completion %+v, want success with the stub's answer", id, task.Completion)
		}
		replies := completionReplies(t, n1, task)
		if len(replies) != 1 || replies[0].From != task.ClaimedBy || !slices.Equal(replies[0].To, api.Recipients{"lead"}) {
			t.Errorf("%s: task_completion messages %+v, want one from %s to lead", id, replies, task.ClaimedBy)
		}
		claimants[task.ClaimedBy]++
	}
	t.Logf("claims: %s", countsLine(claimants))
}

// A task that depends on another waits until it succeeded, then is
// claimed and done with the dependency's result in its prompt; one whose
// dependency failed fails with dependency_failed naming it, never
// claimed.
func TestTaskDependencyWaitsForItsDependency(t *testing.T) {
	c := clustertest.New(t, 3)
	n1 := c.Nodes[0].Client
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	// The builder's CLI waits for the test's gate (so the dependent is
	// seen waiting) and fails the tasks titled "break".
	builder := writeScript(t, t.TempDir(), fmt.Sprintf(`p=$(cat)
while [ ! -e %q ]; do sleep 0.05; done
case "$p" in *"title: break"*) echo "cannot" >&2; exit 4 ;; esac
printf '%%s\n' "$p" | exec %q
`, gate, stubmodelBin))
	startWatcher(t, c.Nodes[1].Client, fmt.Sprintf(`
agents:
  - id: builder
    command: ["sh", %q]
    context_messages: 0
    retries: 0
`, builder))
	// The reviewer keeps each prompt it is given.
	reviewer := writeScript(t, t.TempDir(), fmt.Sprintf(`tee %q/prompt-"$MAOS_TASK_ID" | exec %q`, dir, stubmodelBin))
	startWatcher(t, c.Nodes[2].Client, reviewerYAML("rev-a", fmt.Sprintf(`"sh", %q`, reviewer)))
	waitRegistered(t, n1, "builder")
	waitRegistered(t, n1, "rev-a")

	build := createTask(t, n1, api.TaskCreateCommand{ID: "task-build", From: "lead", To: "builder", Title: "build it", Channel: "dev"})
	review := createTask(t, n1, api.TaskCreateCommand{ID: "task-review", From: "lead", To: "role:reviewer", Title: "review the build",
		DependsOn: []string{build}, Channel: "dev"})
	broken := createTask(t, n1, api.TaskCreateCommand{ID: "task-break", From: "lead", To: "builder", Title: "break", Channel: "dev"})
	orphan := createTask(t, n1, api.TaskCreateCommand{ID: "task-orphan", From: "lead", To: "role:reviewer", Title: "review the break",
		DependsOn: []string{broken}, Channel: "dev"})

	waitTask(t, n1, build, api.TaskRunning)
	for _, id := range []string{review, orphan} {
		if task, err := readTask(n1, id); err != nil || task.State != api.TaskWaiting {
			t.Fatalf("%s while its dependency runs: %v %+v, want waiting", id, err, task)
		}
	}
	harness.NoErr(t, os.WriteFile(gate, nil, 0o644))

	done := waitTask(t, n1, review, api.TaskSucceeded)
	dep := waitTask(t, n1, build, api.TaskSucceeded)
	ready, claimed := events(done, "ready"), events(done, "claimed")
	if len(ready) != 1 || len(claimed) != 1 || claimed[0].Actor != "rev-a" || ready[0].Seq != events(dep, "completed")[0].Seq {
		t.Errorf("review: want ready by the entry that completed %s, then one claim by rev-a: %s", build, describe(done))
	}
	prompt, err := os.ReadFile(filepath.Join(dir, "prompt-"+review))
	harness.NoErr(t, err)
	if want := `- task-build "build it": succeeded (success): stub answer to task-build`; !strings.Contains(string(prompt), want) {
		t.Errorf("the review's prompt lacks %q:\n%s", want, prompt)
	}

	failed := waitTask(t, n1, broken, api.TaskFailed)
	if e := failed.Completion.Error; e == nil || e.ErrorType != "cli_error" || e.ErrorCode != "exit 4" || !strings.Contains(e.ErrorMessage, "cannot") {
		t.Errorf("break: completion %+v", failed.Completion)
	}
	gone := waitTask(t, n1, orphan, api.TaskFailed)
	if e := gone.Completion.Error; e == nil || e.ErrorType != api.TaskErrorDependencyFailed || !strings.Contains(e.ErrorMessage, broken) ||
		len(events(gone, "claimed")) != 0 {
		t.Errorf("orphan: want failed with dependency_failed naming %s, never claimed: %s error %+v", broken, describe(gone), e)
	}
	if _, err := os.Stat(filepath.Join(dir, "prompt-"+orphan)); err == nil {
		t.Errorf("the orphan's CLI ran")
	}
}

// reviewerNodes starts a 3-node cluster of the built binaries whose n2
// and n3 run a watcher (maosd --agents) of one reviewer each, rev-a and
// rev-b, claiming role:reviewer with the script cli, and waits until both
// are registered. It returns the cluster and the node of each agent.
func reviewerNodes(t *testing.T, cli string) (*harness.Cluster, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	nodeOf := map[string]string{"rev-a": "n2", "rev-b": "n3"}
	args := map[string][]string{}
	for a, node := range nodeOf {
		p := filepath.Join(dir, a+".yaml")
		harness.NoErr(t, os.WriteFile(p, []byte(reviewerYAML(a, fmt.Sprintf(`"sh", %q`, cli))), 0o644))
		args[node] = []string{"--agents", p}
	}
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, NodeArgs: func(id string) []string { return args[id] }})
	for a := range nodeOf {
		harness.NoErr(t, harness.WaitFor(taskWait, a+" registered", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
			defer cancel()
			_, err := c.Node("n1").Client().Agent(ctx, a, api.Strong)
			return err
		}))
	}
	return c, nodeOf
}

// waitRunning polls cl until task id runs and its CLI has reported
// progress (so it is mid-run), and returns it.
func waitRunning(t *testing.T, cl *client.Client, id string) *api.Task {
	t.Helper()
	var task *api.Task
	harness.NoErr(t, harness.WaitFor(taskWait, id+" running with progress", func() error {
		var err error
		if task, err = readTask(cl, id); err != nil {
			return err
		}
		if task.State != api.TaskRunning || task.ProgressMessage == "" {
			return fmt.Errorf("%s, progress %q", task.State, task.ProgressMessage)
		}
		return nil
	}))
	return task
}

// checkFinishedOnceBy checks, on every node of c (converged first), that
// task id succeeded once, by agent at attempt 2 after the first claimant's
// lease expired, with one task_completion to its creator.
func checkFinishedOnceBy(t *testing.T, c *harness.Cluster, id, first, agent string) {
	t.Helper()
	_, err := c.WaitConverged()
	harness.NoErr(t, err)
	for _, n := range c.Nodes() {
		task, err := readTask(n.Client(), id)
		harness.NoErr(t, err)
		claims, expired, completed := events(task, "claimed"), events(task, "expired"), events(task, "completed")
		if task.State != api.TaskSucceeded || task.Attempt != 2 || len(claims) != 2 || claims[0].Actor != first ||
			claims[1].Actor != agent || len(expired) != 1 || len(completed) != 1 || completed[0].Actor != agent ||
			task.Completion.Result != "stub answer to "+id {
			t.Errorf("%s: want claimed by %s, expired, claimed and completed once by %s: %s", n.ID, first, agent, describe(task))
		}
		if r := completionReplies(t, n.Client(), task); len(r) != 1 || r[0].From != agent {
			t.Errorf("%s: task_completion messages %+v, want one from %s", n.ID, r, agent)
		}
	}
}

// The other reviewer of a pair (on n2 and n3).
func other(agent string) string {
	if agent == "rev-a" {
		return "rev-b"
	}
	return "rev-a"
}

// The SIGKILL test: the first attempt's CLI runs long (renewing the lease
// by status lines); the node whose watcher claimed the task is SIGKILLed
// mid-run. The lease lapses, the task is ready again after the backoff,
// and the other watcher claims and finishes it, once. The dead
// claimant's completion under its fence is then refused (409), and once
// its node is back nothing changes.
func TestTaskFinishedByTheOtherClaimantAfterSIGKILL(t *testing.T) {
	cli := writeScript(t, t.TempDir(), fmt.Sprintf(`if [ "$MAOS_TASK_ATTEMPT" = 1 ]; then exec %q --progress 60 --sleep 120s; fi
exec %q --progress 1`, stubmodelBin, stubmodelBin))
	c, nodeOf := reviewerNodes(t, cli)
	n1 := c.Node("n1")
	id := createTask(t, n1.Client(), api.TaskCreateCommand{ID: "task-survive", From: "lead", To: "role:reviewer",
		Title: "survive a crash", Channel: "dev", TimeoutSeconds: 3})
	first := waitRunning(t, n1.Client(), id)
	victim := c.Node(nodeOf[first.ClaimedBy])
	harness.NoErr(t, victim.Kill())
	t.Logf("killed %s while %s ran %s under fence %d", victim.ID, first.ClaimedBy, id, first.Fence)

	waitTask(t, n1.Client(), id, api.TaskSucceeded)
	// The dead claimant's report, late, under its fence: refused.
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	_, err := n1.Client().CompleteTask(ctx, api.TaskCompleteCommand{ID: id, Agent: first.ClaimedBy, Fence: first.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "late"}})
	if !errors.Is(err, api.ErrConflict) {
		t.Errorf("the stale claimant's completion: %v, want a conflict (409)", err)
	}

	harness.NoErr(t, victim.Restart())
	harness.NoErr(t, c.WaitReady())
	harness.NoErr(t, harness.WaitFor(taskWait, first.ClaimedBy+" awake again", func() error {
		p, err := agentOn(victim, first.ClaimedBy)
		if err != nil {
			return err
		}
		if p.State != api.PresenceAwake {
			return fmt.Errorf("presence %s", p.State)
		}
		return nil
	}))
	checkFinishedOnceBy(t, c, id, first.ClaimedBy, other(first.ClaimedBy))
}

// A claimant whose node hangs (SIGSTOP) past its lease while its CLI
// finishes: the other reviewer claims and finishes the task; resumed, the
// hung watcher's late report is refused (its renewal or its completion
// gets 409) and it drops the work: the task ends once, by the other, and
// the hung agent's heartbeat counts the failure and names the task.
func TestTaskLateReportOfAHungClaimantRefused(t *testing.T) {
	dir := t.TempDir()
	finished := filepath.Join(dir, "first-finished")
	cli := writeScript(t, t.TempDir(), fmt.Sprintf(`if [ "$MAOS_TASK_ATTEMPT" = 1 ]; then %q --progress 2 --sleep 2s; rc=$?; touch %q; exit $rc; fi
exec %q --progress 1`, stubmodelBin, finished, stubmodelBin))
	c, nodeOf := reviewerNodes(t, cli)
	n1 := c.Node("n1")
	id := createTask(t, n1.Client(), api.TaskCreateCommand{ID: "task-hung", From: "lead", To: "role:reviewer",
		Title: "outlive a hang", Channel: "dev", TimeoutSeconds: 3})
	first := waitRunning(t, n1.Client(), id)
	hung := c.Node(nodeOf[first.ClaimedBy])
	harness.NoErr(t, hung.Pause())
	t.Logf("paused %s while %s ran %s under fence %d", hung.ID, first.ClaimedBy, id, first.Fence)

	waitTask(t, n1.Client(), id, api.TaskSucceeded)
	harness.NoErr(t, harness.WaitFor(taskWait, "the hung claimant's CLI to finish", func() error {
		_, err := os.Stat(finished)
		return err
	}))
	harness.NoErr(t, hung.Resume())
	var lastErr string
	harness.NoErr(t, harness.WaitFor(taskWait, first.ClaimedBy+"'s heartbeat to count the lost work", func() error {
		p, err := agentOn(hung, first.ClaimedBy)
		if err != nil {
			return err
		}
		if p.TasksFailed != 1 || p.TasksSucceeded != 0 || p.TasksRunning != 0 || !strings.Contains(p.LastError, id) {
			return fmt.Errorf("health %+v", p.AgentHealth)
		}
		lastErr = p.LastError
		return nil
	}))
	t.Logf("resumed, %s dropped the work: %s", first.ClaimedBy, lastErr)
	checkFinishedOnceBy(t, c, id, first.ClaimedBy, other(first.ClaimedBy))
}
