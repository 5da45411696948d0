package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// TaskSource is one node's view of the task workload's tasks.
type TaskSource interface {
	// Name identifies the node in the result.
	Name() string
	// ReadTasks returns every task of TaskQueue with its history.
	ReadTasks(ctx context.Context) ([]*api.Task, error)
}

// NodeTaskSource reads the tasks through n's API.
func NodeTaskSource(n *harness.Node) TaskSource { return nodeTaskSource{n} }

type nodeTaskSource struct{ n *harness.Node }

func (s nodeTaskSource) Name() string { return s.n.ID }

func (s nodeTaskSource) ReadTasks(ctx context.Context) ([]*api.Task, error) {
	cl := s.n.Client()
	if cl == nil {
		return nil, fmt.Errorf("chaos: %s was never started", s.n.ID)
	}
	return listTasks(ctx, cl, true)
}

// stuckAfter is how long past its lease's end a running task may stay
// running before the checker calls it stuck: the leader expires a lapsed
// lease with its next tick (cluster/tasks.go), well within this.
const stuckAfter = 5 * time.Second

// TaskCheck is the verdict on the task workload. The id lists are sorted;
// Notes say what was seen for each finding.
type TaskCheck struct {
	// Workers is the number of task workers.
	Workers int `json:"workers"`
	// Created is the number of distinct creates acknowledged; Stored how
	// many tasks of the workload the first node holds (an unknown create
	// may be stored too).
	Created int `json:"created"`
	Stored  int `json:"stored"`
	// Claimed is the number of claims granted (distinct task and fence
	// acknowledged); ClaimConflicts the claims refused because another
	// worker held the task or it was in its backoff (contention, not a
	// fault).
	Claimed        int `json:"claimed"`
	ClaimConflicts int `json:"claim_conflicts"`
	// Completed is the number of tasks a completion ended; Reclaimed the
	// tasks claimed more than once (a lease lapsed: attempt > 1); Expired
	// the leases the leader expired.
	Completed int `json:"completed"`
	Reclaimed int `json:"reclaimed"`
	Expired   int `json:"expired"`
	// Refused is the number of progress reports and completions refused
	// (409) because their claim was no longer the task's (a lapsed lease,
	// a newer fence); Stalled the claims whose completion was sent on
	// purpose after the lease's end (each must be refused, or end unknown
	// when no node could answer); Abandoned the claims dropped on purpose.
	Refused   int `json:"refused"`
	Stalled   int `json:"stalled"`
	Abandoned int `json:"abandoned"`
	// Ended counts the tasks in each final state.
	Ended map[api.TaskState]int `json:"ended"`
	// Open lists the tasks still legitimately open ("id state": ready,
	// possibly in its backoff, or running under a live lease), which the
	// wait after the faults did not see end; not a violation.
	Open []string `json:"open"`
	// WaitedFor is how long, after the faults, the tasks took to end (or
	// the wait ran out).
	WaitedFor time.Duration `json:"waited_for_ns"`

	// Lost: acknowledged creates missing on some node.
	Lost []string `json:"lost"`
	// Duplicated: a task id listed twice on a node, or one create's
	// title (its workload id) stored as two tasks.
	Duplicated []string `json:"duplicated"`
	// Unexpected: tasks of the queue no create of the workload carried.
	Unexpected []string `json:"unexpected"`
	// Stuck: open in a state nothing of the workload leaves: running
	// more than stuckAfter past its lease, waiting, awaiting approval.
	Stuck []string `json:"stuck"`
	// CompletedTwice: a task whose history records two completions, or
	// whose completion was acknowledged under two claims (two workers, or
	// two fences).
	CompletedTwice []string `json:"completed_twice"`
	// StaleAccepted: completions sent after their lease ended that were
	// acknowledged.
	StaleAccepted []string `json:"stale_accepted"`
	// WrongCompleter: an acknowledged completion whose claim is not the
	// one the task records, or a task whose result names another claim
	// than its claimant's.
	WrongCompleter []string `json:"wrong_completer"`
	// Rejected: task ops answered with a 4xx other than a claim's
	// conflict and a report's refusal (bad input, forbidden: a bug, the
	// workload's commands are valid).
	Rejected []string `json:"rejected"`
	// Divergent: tasks the nodes show differently (state, claimant, fence,
	// attempt, result, history length).
	Divergent []string `json:"divergent"`
	// Notes say where each finding was seen.
	Notes []string `json:"notes"`
}

// OK reports whether no task promise was broken.
func (c *TaskCheck) OK() bool {
	return len(c.Lost) == 0 && len(c.Duplicated) == 0 && len(c.Unexpected) == 0 && len(c.Stuck) == 0 &&
		len(c.CompletedTwice) == 0 && len(c.StaleAccepted) == 0 && len(c.WrongCompleter) == 0 &&
		len(c.Rejected) == 0 && len(c.Divergent) == 0
}

// CheckTasks reads the tasks from every node (call it once the workers
// stopped and the nodes converged) and checks them against the task
// history ht: see CheckTaskSources.
func CheckTasks(ctx context.Context, nodes []*harness.Node, ht *History, workers int) (*TaskCheck, error) {
	srcs := make([]TaskSource, len(nodes))
	for i, n := range nodes {
		srcs[i] = NodeTaskSource(n)
	}
	return CheckTaskSources(ctx, srcs, ht, workers, time.Now())
}

// CheckTaskSources checks the task history ht against what each source
// shows, at time now (for the leases):
//
//  1. every acknowledged create is stored on every node, once (Lost,
//     Duplicated), and nothing else is (Unexpected);
//  2. every task has ended, or is legitimately open (Open), not Stuck;
//  3. each task's completion is recorded once (its history's completed
//     events; the claims under which a completion was acknowledged), by
//     the claim the task records (CompletedTwice, WrongCompleter), and no
//     completion sent after its lease was acknowledged (StaleAccepted);
//  4. no task op got a 4xx it should not (Rejected); every node shows
//     each task the same (Divergent).
//
// The error is for a node that could not be read.
func CheckTaskSources(ctx context.Context, srcs []TaskSource, ht *History, workers int, now time.Time) (*TaskCheck, error) {
	views := make([][]*api.Task, len(srcs))
	for i, s := range srcs {
		ts, err := s.ReadTasks(ctx)
		if err != nil {
			return nil, fmt.Errorf("chaos: check tasks on %s: %w", s.Name(), err)
		}
		views[i] = ts
	}
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Name()
	}
	return checkTaskViews(names, views, ht.Ops(), workers, now), nil
}

// completer is one claim under which a completion was acknowledged.
type completer struct {
	agent string
	fence uint64
}

func (c completer) String() string { return fmt.Sprintf("%s under fence %d", c.agent, c.fence) }

func checkTaskViews(names []string, views [][]*api.Task, ops []Op, workers int, now time.Time) *TaskCheck {
	res := &TaskCheck{Workers: workers, Ended: map[api.TaskState]int{}, Open: []string{}, Notes: []string{}}
	counts := map[string]int{}
	note := func(kind, format string, args ...any) {
		counts[kind]++
		if counts[kind] <= 20 {
			res.Notes = append(res.Notes, kind+": "+fmt.Sprintf(format, args...))
		}
	}
	lost, dup, unexpected, stuck := idSet{}, idSet{}, idSet{}, idSet{}
	twice, stale, wrong, rejected, divergent := idSet{}, idSet{}, idSet{}, idSet{}, idSet{}

	// What the history says.
	created := idSet{} // every id a create carried
	acked := idSet{}
	claims := map[string]map[uint64]bool{}
	completions := map[string]map[completer]bool{}
	stalled := map[completer]bool{} // the claims whose completion was sent late on purpose
	for _, op := range ops {
		switch op.Kind {
		case KindTaskCreate:
			created[op.ID] = true
			if op.Outcome == OK {
				acked[op.ID] = true
			}
		case KindTaskClaim:
			if op.Outcome == OK {
				if claims[op.ID] == nil {
					claims[op.ID] = map[uint64]bool{}
				}
				claims[op.ID][op.Fence] = true
			}
		case KindTaskComplete:
			if op.Stale {
				stalled[completer{op.Agent, op.Fence}] = true
			}
			if op.Outcome == OK {
				if completions[op.ID] == nil {
					completions[op.ID] = map[completer]bool{}
				}
				completions[op.ID][completer{op.Agent, op.Fence}] = true
				if op.Stale {
					stale[op.ID] = true
					note("stale accepted", "%s: %s completed it after its lease ended (via %s at %s)", op.ID, op.Agent, op.Node, op.Invoke)
				}
			}
		}
		if op.Outcome != Fail || nonRejecting[op.Code] {
			continue
		}
		switch {
		case op.Code == api.CodeConflict && op.Kind == KindTaskClaim:
			res.ClaimConflicts++
		case op.Code == api.CodeConflict && (op.Kind == KindTaskProgress || op.Kind == KindTaskComplete):
			res.Refused++
		default:
			rejected[op.ID] = true
			note("rejected", "%s %s by %s (via %s): %s", op.Kind, op.ID, op.Agent, op.Node, op.Err)
		}
	}
	res.Created, res.Stalled = len(acked), len(stalled)
	for _, fs := range claims {
		res.Claimed += len(fs)
	}

	// What each node stores.
	byID := make([]map[string]*api.Task, len(views))
	for k, view := range views {
		byID[k] = map[string]*api.Task{}
		titles := map[string][]string{}
		for _, t := range view {
			if byID[k][t.ID] != nil {
				dup[t.ID] = true
				note("duplicated", "%s: task %s is listed twice", names[k], t.ID)
			}
			byID[k][t.ID] = t
			titles[t.Title] = append(titles[t.Title], t.ID)
			if !created[t.ID] {
				unexpected[t.ID] = true
				note("unexpected", "%s: task %s (%q) was never created by the workload", names[k], t.ID, t.Title)
			}
		}
		for title, ids := range titles {
			if len(ids) > 1 {
				dup[title] = true
				note("duplicated", "%s: the create %s is stored as %d tasks: %s", names[k], title, len(ids), strings.Join(ids, ", "))
			}
		}
		for _, id := range acked.sorted() {
			if byID[k][id] == nil {
				lost[id] = true
				note("lost", "%s: acknowledged task %s is missing", names[k], id)
			}
		}
	}

	// Each task, as the first node shows it, and the others against it.
	if len(views) > 0 {
		res.Stored = len(views[0])
		for _, t := range views[0] {
			checkOneTask(t, res, now, note, completions[t.ID], stuck, twice, wrong)
			for k := 1; k < len(views); k++ {
				o := byID[k][t.ID]
				if o == nil {
					continue // lost, if acknowledged
				}
				if d := taskDiff(t, o); d != "" {
					divergent[t.ID] = true
					note("divergent", "%s: %s and %s differ: %s", t.ID, names[0], names[k], d)
				}
			}
		}
		for k := 1; k < len(views); k++ {
			for id := range byID[k] {
				if byID[0][id] == nil {
					divergent[id] = true
					note("divergent", "%s: on %s, not on %s", id, names[k], names[0])
				}
			}
		}
	}
	res.Lost, res.Duplicated, res.Unexpected, res.Stuck = lost.sorted(), dup.sorted(), unexpected.sorted(), stuck.sorted()
	res.CompletedTwice, res.StaleAccepted, res.WrongCompleter = twice.sorted(), stale.sorted(), wrong.sorted()
	res.Rejected, res.Divergent = rejected.sorted(), divergent.sorted()
	sort.Strings(res.Open)
	return res
}

// checkOneTask checks one stored task t and its acknowledged completions.
func checkOneTask(t *api.Task, res *TaskCheck, now time.Time, note func(string, string, ...any),
	acked map[completer]bool, stuck, twice, wrong idSet) {
	completedEvents := 0
	for _, e := range t.History {
		switch e.Event {
		case "completed":
			completedEvents++
		case "expired":
			res.Expired++
		}
	}
	if t.Attempt > 1 {
		res.Reclaimed++
	}
	switch {
	case t.State.Final():
		res.Ended[t.State]++
	case t.State == api.TaskReady:
		res.Open = append(res.Open, t.ID+" "+string(t.State))
	case t.State == api.TaskRunning && t.LeaseExpires != nil && now.Sub(*t.LeaseExpires) <= stuckAfter:
		res.Open = append(res.Open, t.ID+" "+string(t.State))
	default:
		stuck[t.ID] = true
		lease := "no lease"
		if t.LeaseExpires != nil {
			lease = "lease ended " + t.LeaseExpires.UTC().Format(time.RFC3339Nano)
		}
		note("stuck", "%s is %s (claimed by %s, fence %d, %s)", t.ID, t.State, t.ClaimedBy, t.Fence, lease)
	}
	if completedEvents > 0 {
		res.Completed++
	}
	if completedEvents > 1 {
		twice[t.ID] = true
		note("completed twice", "%s: its history records %d completions", t.ID, completedEvents)
	}
	if len(acked) > 1 {
		twice[t.ID] = true
		var who []string
		for c := range acked {
			who = append(who, c.String())
		}
		sort.Strings(who)
		note("completed twice", "%s: completions acknowledged under %d claims: %s", t.ID, len(acked), strings.Join(who, "; "))
	}
	mine := completer{t.ClaimedBy, t.Fence}
	for c := range acked {
		if c != mine || completedEvents == 0 {
			wrong[t.ID] = true
			note("wrong completer", "%s: a completion by %s was acknowledged, but the task is %s, claimed by %s",
				t.ID, c, t.State, mine)
		}
	}
	if completedEvents > 0 && t.Completion != nil && t.Completion.Result != TaskResultText(t.ClaimedBy, t.Fence) {
		wrong[t.ID] = true
		note("wrong completer", "%s: claimed by %s, its result says %q", t.ID, mine, t.Completion.Result)
	}
}

// taskDiff says how two nodes' views of a task differ, "" if they agree.
func taskDiff(a, b *api.Task) string {
	var d []string
	if a.State != b.State {
		d = append(d, fmt.Sprintf("state %s / %s", a.State, b.State))
	}
	if a.ClaimedBy != b.ClaimedBy || a.Fence != b.Fence || a.Attempt != b.Attempt {
		d = append(d, fmt.Sprintf("claim %s@%d #%d / %s@%d #%d", a.ClaimedBy, a.Fence, a.Attempt, b.ClaimedBy, b.Fence, b.Attempt))
	}
	ra, rb := "", ""
	if a.Completion != nil {
		ra = a.Completion.Result
	}
	if b.Completion != nil {
		rb = b.Completion.Result
	}
	if ra != rb {
		d = append(d, fmt.Sprintf("result %q / %q", ra, rb))
	}
	if len(a.History) != len(b.History) {
		d = append(d, fmt.Sprintf("%d / %d events", len(a.History), len(b.History)))
	}
	return strings.Join(d, ", ")
}

// text is the report's task section.
func (c *TaskCheck) text() string {
	var b strings.Builder
	states := make([]string, 0, len(c.Ended))
	for _, s := range api.TaskStates {
		if n := c.Ended[s]; n > 0 {
			states = append(states, fmt.Sprintf("%s %d", s, n))
		}
	}
	fmt.Fprintf(&b, "tasks: %d workers; created %d (stored %d), claimed %d (%d conflicts), completed %d, reclaimed %d, leases expired %d, reports refused %d; claims stalled past their lease on purpose %d, abandoned %d; ended: %s; open %s within %s\n",
		c.Workers, c.Created, c.Stored, c.Claimed, c.ClaimConflicts, c.Completed, c.Reclaimed, c.Expired,
		c.Refused, c.Stalled, c.Abandoned, strings.Join(states, ", "), idList(c.Open), roundMS(c.WaitedFor))
	for _, l := range []struct {
		name string
		ids  []string
	}{{"lost", c.Lost}, {"duplicated", c.Duplicated}, {"unexpected", c.Unexpected}, {"stuck", c.Stuck},
		{"completed twice", c.CompletedTwice}, {"stale completion accepted", c.StaleAccepted},
		{"wrong completer", c.WrongCompleter}, {"rejected", c.Rejected}, {"divergent", c.Divergent}} {
		fmt.Fprintf(&b, "  %s: %s\n", l.name, idList(l.ids))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
