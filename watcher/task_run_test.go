package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/testenv"
)

// Run does tasks against the real API (one node on a real FSM): one
// created before it started (the list at start) and one to a capability
// queue of its claim entries (the stream's task update; the agent is
// registered with the capability, so the claim is allowed). The
// delegation messages are not answered as mail, and the heartbeats count
// both tasks.
func TestRunDoesTasks(t *testing.T) {
	svc, cl := apiNode(t, "bob")
	ctx := context.Background()
	create := func(id, to string) {
		t.Helper()
		if _, err := cl.CreateTask(ctx, api.TaskCreateCommand{ID: id, From: "lead", To: to, Title: "job " + id, Description: "do " + id}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	create("task-early", "bob")

	f, err := Parse(fmt.Appendf(nil, "agents:\n- {id: bob, role: reviewer, claim: [\"capability:go\"], command: [%q, --progress, '1'], context_messages: 0}\n", buildStub(t)))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitTaskState(t, cl, "task-early", api.TaskSucceeded)
	a, err := cl.Agent(ctx, "bob", api.Local)
	if err != nil || !slices.Equal(a.Capabilities, []string{"go"}) {
		t.Fatalf("bob registered as %+v (%v), want capability go", a, err)
	}
	create("task-go", "capability:go")
	for _, id := range []string{"task-early", "task-go"} {
		task := waitTaskState(t, cl, id, api.TaskSucceeded)
		c := task.Completion
		if task.ClaimedBy != "bob" || c.Status != api.TaskStatusSuccess || c.Result != "stub answer to "+id ||
			!slices.Equal(c.Outputs, []string{"stub/" + id + ".txt"}) {
			t.Errorf("%s: claimed by %q, completion %+v", id, task.ClaimedBy, c)
		}
		if d := svc.Stored(task.MessageID); d == nil {
			t.Errorf("%s: no delegation message", id)
		} else if r := svc.Stored(ReplyID("bob", d)); r != nil {
			t.Errorf("%s: the delegation was answered as mail: %+v", id, r)
		}
	}
	waitFor(t, "the heartbeats count both tasks", func() bool {
		p, err := cl.AgentPresence(ctx, "bob")
		return err == nil && p.TasksSucceeded == 2 && p.TasksRunning == 0 && p.MeanDurationMS > 0
	})
}

// Against the real API, a CLI's requires_approval completion opens an
// approval of its proposed action by the task's creator, and the task
// waits on it: approved, it succeeds; rejected, it fails; modified, the
// watcher runs it once more, the approved action in its prompt, and it
// succeeds under the modify's fence. The decisions, sent to the
// claimant, are not answered as mail; only the modified task ran twice.
func TestRunTaskApprovals(t *testing.T) {
	svc, cl := apiNode(t, "bob")
	ctx := context.Background()
	dir := t.TempDir()
	f, err := Parse(fmt.Appendf(nil, "agents:\n- {id: bob, command: [sh, -c, %q], context_messages: 0}\n", `p=$(cat); echo "$p" > `+dir+`/$MAOS_TASK_ID-$MAOS_TASK_FENCE
case "$p" in
  *'{"cmd":"deploy v2"}'*) echo "deployed v2" ;;
  *) echo '{"type":"complete","result":"requires_approval","proposed_action":{"cmd":"deploy v1","task":"'$MAOS_TASK_ID'"},"rationale":"it deploys"}' ;;
esac`))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	decisions := map[string]string{"task-yes": api.DecisionApprove, "task-no": api.DecisionReject, "task-mod": api.DecisionModify}
	first := map[string]uint64{}
	for _, id := range []string{"task-yes", "task-no", "task-mod"} {
		if _, err := cl.CreateTask(ctx, api.TaskCreateCommand{ID: id, From: "lead", To: "bob", Title: "deploy " + id}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		task := waitTaskState(t, cl, id, api.TaskAwaitingApproval)
		first[id] = task.Fence
		ap, err := cl.Approval(ctx, task.ApprovalID)
		if err != nil {
			t.Fatalf("%s: approval %q: %v", id, task.ApprovalID, err)
		}
		if want := `{"cmd":"deploy v1","task":"` + id + `"}`; string(ap.Action) != want || ap.From != "bob" ||
			!slices.Equal(ap.Approvers, []string{"lead"}) || ap.TaskID != id || ap.Rationale != "it deploys" {
			t.Errorf("%s: approval %+v; want bob's proposed action %s for lead", id, ap, want)
		}
		cmd := api.ApprovalDecideCommand{ID: ap.ID, Approver: "lead", Decision: decisions[id], ActionHash: ap.ActionHash}
		if cmd.Decision == api.DecisionModify {
			cmd.Action = json.RawMessage(`{"cmd":"deploy v2"}`)
		}
		if _, err := cl.DecideApproval(ctx, cmd); err != nil {
			t.Fatalf("%s: %s: %v", id, cmd.Decision, err)
		}
	}
	mod := waitTaskState(t, cl, "task-mod", api.TaskSucceeded)
	if c := mod.Completion; mod.Fence <= first["task-mod"] || c == nil || c.Status != api.TaskStatusSuccess || c.Result != "deployed v2" {
		t.Errorf("task-mod: fence %d (first %d), completion %+v; want the approved action done under the modify's fence", mod.Fence, first["task-mod"], c)
	}
	prompt, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("task-mod-%d", mod.Fence)))
	if !strings.Contains(string(prompt), "lead changed it. Carry out this approved action, not the one you proposed:\n{\"cmd\":\"deploy v2\"}") {
		t.Errorf("the rerun's prompt lacks the approved action:\n%s", prompt)
	}
	waitTaskState(t, cl, "task-yes", api.TaskSucceeded)
	if no := waitTaskState(t, cl, "task-no", api.TaskFailed); no.Completion == nil || no.Completion.Error == nil ||
		no.Completion.Error.ErrorType != api.TaskErrorApprovalRejected {
		t.Errorf("task-no: completion %+v, want approval_rejected", no.Completion)
	}
	waitFor(t, "the heartbeats count the rerun alone as a success", func() bool {
		p, err := cl.AgentPresence(ctx, "bob")
		return err == nil && p.TasksSucceeded == 1 && p.TasksFailed == 0 && p.TasksRunning == 0
	})
	var decided []*api.Message
	waitFor(t, "the three decisions to bob", func() bool {
		page, err := cl.ChannelPage(ctx, api.DefaultChannel, 0, api.MaxPageLimit, api.Strong)
		if err != nil {
			return false
		}
		decided = nil
		for _, m := range page.Messages {
			if m.Type == api.TypeHITLDecision && slices.Equal(m.To, api.Recipients{"bob"}) {
				decided = append(decided, m)
			}
		}
		return len(decided) == 3
	})
	waitFor(t, "bob's cursor past the decisions (each handled)", func() bool {
		cur, err := cl.Cursor(ctx, "bob", api.Strong)
		return err == nil && !slices.ContainsFunc(decided, func(m *api.Message) bool { return cur.Seq < m.Seq })
	})
	for _, m := range decided {
		if r := svc.Stored(ReplyID("bob", m)); r != nil {
			t.Errorf("the decision %q was answered as mail: %+v", m.Title, r)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*"))
	slices.Sort(runs)
	want := []string{fmt.Sprintf("task-mod-%d", first["task-mod"]), fmt.Sprintf("task-mod-%d", mod.Fence),
		fmt.Sprintf("task-no-%d", first["task-no"]), fmt.Sprintf("task-yes-%d", first["task-yes"])}
	for i := range want {
		want[i] = filepath.Join(dir, want[i])
	}
	if !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v: the modified task twice, the others once", runs, want)
	}
}

// A dry run reports a delegation as a task, not mail to take; for a tmux
// agent, whose session claims its own tasks, it is mail to type in.
func TestDryRunNamesTasks(t *testing.T) {
	_, cl := apiNode(t)
	ctx := context.Background()
	for _, a := range []string{"bob", "tom"} {
		if _, err := cl.RegisterAgent(ctx, api.RegisterAgentCommand{ID: a}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.CreateTask(ctx, api.TaskCreateCommand{ID: "task-" + a, From: "lead", To: a, Title: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Parse([]byte(`agents: [{id: bob, command: [x]}, {id: tom, delivery: tmux, tmux_target: "s:0.0"}]`))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []Decision
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), DryRun: func(d Decision) {
			mu.Lock()
			got = append(got, d)
			mu.Unlock()
		}})
	}()
	waitFor(t, "a decision of each agent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	cancel()
	<-done
	for _, d := range got {
		switch d.Agent {
		case "bob":
			if d.Take || d.Reason != ReasonTask+" task-bob" || !strings.HasPrefix(d.ID, "msg-") {
				t.Errorf("bob: decision %+v; want a skip naming the task", d)
			}
		case "tom":
			if !d.Take || d.Reason != ReasonAddressed {
				t.Errorf("tom: decision %+v; want the delegation taken as mail", d)
			}
		}
	}
	for _, a := range []string{"bob", "tom"} {
		if task, _ := cl.Task(ctx, "task-"+a); task.State != api.TaskReady {
			t.Errorf("a dry run claimed task-%s: %s", a, task.State)
		}
	}
}

// waitTaskState polls until task id is in state (bounded).
func waitTaskState(t *testing.T, cl *client.Client, id string, state api.TaskState) *api.Task {
	t.Helper()
	var task *api.Task
	waitFor(t, "task "+id+" "+string(state), func() bool {
		var err error
		task, err = cl.Task(context.Background(), id)
		return err == nil && task.State == state
	})
	return task
}

// waitFor polls cond (bounded: the test's deadline).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := testenv.Deadline(t); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by the test's deadline", what)
		}
	}
}
