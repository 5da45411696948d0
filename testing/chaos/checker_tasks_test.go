package chaos

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// taskOps is a task history: ops in order, each with an invoke time.
type taskOps []Op

func (h *taskOps) add(op Op) {
	op.Invoke = time.Duration(len(*h)+1) * time.Millisecond
	op.Return = op.Invoke + time.Millisecond
	*h = append(*h, op)
}

func (h *taskOps) create(id string, o Outcome) {
	h.add(Op{Kind: KindTaskCreate, ID: id, Agent: TaskCreator, Outcome: o})
}

func (h *taskOps) claim(id, agent string, fence uint64) {
	h.add(Op{Kind: KindTaskClaim, ID: id, Agent: agent, Fence: fence, Outcome: OK})
}

func (h *taskOps) complete(id, agent string, fence uint64, o Outcome, stale bool) {
	op := Op{Kind: KindTaskComplete, ID: id, Agent: agent, Fence: fence, Outcome: o, Stale: stale}
	if o == Fail {
		op.Code, op.Err = api.CodeConflict, "fence is not the current claim's"
	}
	h.add(op)
}

// doneTask is a task completed by agent under fence, after attempts
// claims, as the API shows it.
func doneTask(id string, seq uint64, agent string, fence uint64, attempts int) *api.Task {
	t := &api.Task{ID: id, Seq: seq, Title: id, To: TaskQueue, State: api.TaskSucceeded, ClaimedBy: agent,
		Fence: fence, Attempt: attempts, Completion: &api.TaskCompletion{Status: api.TaskStatusSuccess, Result: TaskResultText(agent, fence)}}
	t.History = append(t.History, api.TaskEvent{Event: "created", State: api.TaskReady})
	for i := 1; i < attempts; i++ {
		t.History = append(t.History, api.TaskEvent{Event: "claimed", State: api.TaskRunning},
			api.TaskEvent{Event: "expired", State: api.TaskReady})
	}
	t.History = append(t.History, api.TaskEvent{Event: "claimed", State: api.TaskRunning},
		api.TaskEvent{Event: "completed", State: api.TaskSucceeded})
	return t
}

// goodTasks is a correct run: t1 completed at once; t2's first claim (w0,
// fence 10) stalled and its late completion was refused, w1 claimed it
// again (fence 20) and completed it; t3's create had an unknown outcome
// and was stored, and is ready again at the end; t4's create failed and
// is not stored.
func goodTasks() (taskOps, []*api.Task) {
	var h taskOps
	h.create("chaos-t-1", OK)
	h.create("chaos-t-2", OK)
	h.create("chaos-t-3", Unknown)
	h.add(Op{Kind: KindTaskCreate, ID: "chaos-t-4", Outcome: Fail, Code: api.CodeNoLeader})
	h.claim("chaos-t-1", "w1", 5)
	h.complete("chaos-t-1", "w1", 5, Unknown, false)
	h.complete("chaos-t-1", "w1", 5, OK, false) // the retry answers the stored result
	h.claim("chaos-t-2", "w0", 10)
	h.complete("chaos-t-2", "w0", 10, Unknown, true) // one late completion, two attempts
	h.complete("chaos-t-2", "w0", 10, Fail, true)
	h.claim("chaos-t-2", "w1", 20)
	h.complete("chaos-t-2", "w1", 20, OK, false)
	t3 := &api.Task{ID: "chaos-t-3", Seq: 3, Title: "chaos-t-3", To: TaskQueue, State: api.TaskReady,
		History: []api.TaskEvent{{Event: "created", State: api.TaskReady}}}
	return h, []*api.Task{doneTask("chaos-t-1", 1, "w1", 5, 1), doneTask("chaos-t-2", 2, "w1", 20, 2), t3}
}

// clone deep-copies tasks enough for a test to change one.
func clone(ts []*api.Task) []*api.Task {
	out := make([]*api.Task, len(ts))
	for i, t := range ts {
		c := *t
		c.History = slices.Clone(t.History)
		if t.Completion != nil {
			cc := *t.Completion
			c.Completion = &cc
		}
		out[i] = &c
	}
	return out
}

// A correct run passes with its figures; each violation the task check
// knows -- a lost task, a duplicate, a task completed twice (in its
// history, and acknowledged under two claims), a stale completion
// accepted, a completion acknowledged but not kept, a task stuck running,
// a rejected op, nodes that disagree -- is caught, named by the task.
func TestCheckTaskViews(t *testing.T) {
	now := time.Now()
	ops, tasks := goodTasks()
	res := checkTaskViews([]string{"n1", "n2"}, [][]*api.Task{tasks, clone(tasks)}, ops, 2, now)
	if !res.OK() {
		t.Fatalf("a correct run failed: %s", res.text())
	}
	if res.Created != 2 || res.Stored != 3 || res.Claimed != 3 || res.Completed != 2 || res.Reclaimed != 1 ||
		res.Expired != 1 || res.Refused != 1 || res.Stalled != 1 || res.Ended[api.TaskSucceeded] != 2 ||
		!slices.Equal(res.Open, []string{"chaos-t-3 ready"}) {
		t.Errorf("figures of the correct run: %s", res.text())
	}

	tests := []struct {
		name  string
		plant func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task)
		field func(*TaskCheck) []string
		want  string
	}{
		{"lost on one node", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			return n1, n2[1:]
		}, func(c *TaskCheck) []string { return c.Lost }, "chaos-t-1"},
		{"one create stored twice", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			d := doneTask("chaos-t-9", 9, "w0", 30, 1)
			d.Title = "chaos-t-2"
			h.create("chaos-t-9", Unknown)
			return append(n1, d), append(n2, d)
		}, func(c *TaskCheck) []string { return c.Duplicated }, "chaos-t-2"},
		{"a task listed twice", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			return n1, append(n2, n2[0])
		}, func(c *TaskCheck) []string { return c.Duplicated }, "chaos-t-1"},
		{"never created", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			x := doneTask("chaos-t-77", 77, "w0", 77, 1)
			return append(n1, x), append(n2, x)
		}, func(c *TaskCheck) []string { return c.Unexpected }, "chaos-t-77"},
		{"two completions in the history", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			for _, n := range [][]*api.Task{n1, n2} {
				n[1].History = append(n[1].History, api.TaskEvent{Event: "completed", State: api.TaskSucceeded})
			}
			return n1, n2
		}, func(c *TaskCheck) []string { return c.CompletedTwice }, "chaos-t-2"},
		{"completions acknowledged under two claims", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			h.complete("chaos-t-2", "w0", 10, OK, false)
			return n1, n2
		}, func(c *TaskCheck) []string { return c.CompletedTwice }, "chaos-t-2"},
		{"a stale completion accepted", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			h.complete("chaos-t-1", "w1", 5, OK, true)
			return n1, n2
		}, func(c *TaskCheck) []string { return c.StaleAccepted }, "chaos-t-1"},
		{"an acknowledged completion not kept", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			for _, n := range [][]*api.Task{n1, n2} {
				n[0].State, n[0].Completion = api.TaskReady, nil
				n[0].History = n[0].History[:1]
			}
			return n1, n2
		}, func(c *TaskCheck) []string { return c.WrongCompleter }, "chaos-t-1"},
		{"a result naming another claim", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			for _, n := range [][]*api.Task{n1, n2} {
				n[1].Completion.Result = TaskResultText("w0", 10)
			}
			return n1, n2
		}, func(c *TaskCheck) []string { return c.WrongCompleter }, "chaos-t-2"},
		{"stuck running past its lease", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			ended := now.Add(-time.Minute)
			for _, n := range [][]*api.Task{n1, n2} {
				n[2].State, n[2].ClaimedBy, n[2].Fence, n[2].LeaseExpires = api.TaskRunning, "w0", 40, &ended
			}
			return n1, n2
		}, func(c *TaskCheck) []string { return c.Stuck }, "chaos-t-3"},
		{"a create refused as bad input", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			h.add(Op{Kind: KindTaskCreate, ID: "chaos-t-5", Outcome: Fail, Code: api.CodeInvalid, Err: "title: required"})
			return n1, n2
		}, func(c *TaskCheck) []string { return c.Rejected }, "chaos-t-5"},
		{"nodes disagree", func(h *taskOps, n1, n2 []*api.Task) ([]*api.Task, []*api.Task) {
			n2[1].Fence = 21
			return n1, n2
		}, func(c *TaskCheck) []string { return c.Divergent }, "chaos-t-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ts := goodTasks()
			n1, n2 := tt.plant(&h, clone(ts), clone(ts))
			res := checkTaskViews([]string{"n1", "n2"}, [][]*api.Task{n1, n2}, h, 2, now)
			if res.OK() || !slices.Contains(tt.field(res), tt.want) {
				t.Fatalf("want %s caught; got %s", tt.want, res.text())
			}
			if len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, "\n"), tt.want) {
				t.Errorf("no note names %s: %q", tt.want, res.Notes)
			}
		})
	}
}

// fakeTasks is a TaskSource with canned tasks or an error.
type fakeTasks struct {
	name  string
	tasks []*api.Task
	err   error
}

func (f fakeTasks) Name() string                                   { return f.name }
func (f fakeTasks) ReadTasks(context.Context) ([]*api.Task, error) { return f.tasks, f.err }

// CheckTaskSources reads every source and names the one it could not read.
func TestCheckTaskSources(t *testing.T) {
	ops, tasks := goodTasks()
	h := HistoryFromOps(ops)
	res, err := CheckTaskSources(context.Background(), []TaskSource{fakeTasks{"n1", tasks, nil}, fakeTasks{"n2", clone(tasks), nil}}, h, 2, time.Now())
	if err != nil || !res.OK() || res.Created != 2 {
		t.Fatalf("CheckTaskSources = %+v, %v", res, err)
	}
	_, err = CheckTaskSources(context.Background(), []TaskSource{fakeTasks{"n1", tasks, nil}, fakeTasks{"n2", nil, errors.New("boom")}}, h, 2, time.Now())
	if err == nil || !strings.Contains(err.Error(), "n2") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("an unreadable node: %v", err)
	}
}
