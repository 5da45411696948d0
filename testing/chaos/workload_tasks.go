package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
)

// Task workload: one creator makes typed tasks for a role queue while the
// faults run; task workers, clients like an agent's task loop, each on a
// home node (worker k on the k-th member, modulo their number: a worker
// whose node is down or paused waits for it, its claims lapse and the
// others take them), list the ready tasks, claim one, report progress and
// complete it with a result under the claim's fence. Some claims are abandoned on purpose (a worker
// that crashed: its lease lapses and the task is claimed again) and some
// stall past their lease before completing (a worker that hung: its
// completion must be refused by the fence or the lapsed lease). Every
// attempt goes into a History of its own; CheckTasks holds it against the
// tasks every node shows at the end.
const (
	// TaskRole is the role of the task workers; tasks go to its queue.
	TaskRole = "chaos-tasker"
	// TaskQueue is the tasks' assignee.
	TaskQueue = api.RolePrefix + TaskRole
	// TaskChannel carries the tasks' delegation and completion messages,
	// apart from the channels the message checker reads.
	TaskChannel = "chaos-t"
	// TaskCreator creates every task.
	TaskCreator = "chaos-tc"
	// taskPrefix starts every task id (and title): chaos-t-{n}.
	taskPrefix = "chaos-t-"
	// TaskLease is each claim's lease (timeout_seconds): short, so claims
	// of a worker cut off by a fault lapse within the run.
	TaskLease = 2 * time.Second
	// taskMaxAttempts bounds the lapsed leases of one task before it fails
	// with a timeout (a final state too).
	taskMaxAttempts = 10
	// DefaultTaskWorkers is the number of task workers of maos-chaos
	// --tasks and of the short run.
	DefaultTaskWorkers = 3
	// One claim in stallOneIn stalls past its lease and then reports (it
	// must be refused); one in abandonOneIn is dropped without a word.
	stallOneIn   = 8
	abandonOneIn = 16
	// stallPast is how long after the lease's end a stalled worker
	// reports: half of them just after it (refused for the lapsed lease,
	// before the task is claimed again), the other half once the task
	// has likely been claimed again after its first backoff (refused for
	// the newer fence, or because the task ended).
	stallPast     = 500 * time.Millisecond
	longStallPast = 1500 * time.Millisecond
	// Pauses: between two creates, between two polls of an empty queue,
	// and the "work" before progress and before completion.
	minCreatePause = 40 * time.Millisecond
	maxCreatePause = 120 * time.Millisecond
	minPollPause   = 30 * time.Millisecond
	maxPollPause   = 80 * time.Millisecond
	minWork        = 30 * time.Millisecond
	maxWork        = 120 * time.Millisecond
	// taskListLimit is the page of ready tasks a worker picks from.
	taskListLimit = 20
	// claimAttempts bounds the retries of a claim whose outcome is
	// unknown (a retried claim by its claimant answers the same claim).
	claimAttempts = 3
	// DefaultTaskWait bounds the wait, after the faults, until every task
	// has ended.
	DefaultTaskWait = 60 * time.Second
)

// TaskWorkerID names the i-th task worker: chaos-tw-0, ...
func TaskWorkerID(i int) string { return fmt.Sprintf("chaos-tw-%d", i) }

// taskWorkload runs the creator and the workers of one chaos run.
type taskWorkload struct {
	w       *workload // its cfg (nodes, seed, timeouts) and history
	workers int
	// members returns the cluster's members, live or not, in a stable
	// order: worker k's home is members()[k % len].
	members func() []*harness.Node

	// abandoned counts the claims dropped on purpose (a crashed worker
	// says nothing, so the history has no op for it).
	abandoned atomic.Int64
	// draining is set once the creator stopped: the workers then only
	// finish tasks (no claim abandoned or stalled), so the wait for every
	// task to end is not spent in backoffs of their own making.
	draining atomic.Bool

	create  context.CancelFunc // stops the creator
	stop    context.CancelFunc // stops the workers
	created chan struct{}      // closed when the creator returned
	done    chan struct{}      // closed when every worker returned
}

// startTasks registers the workers as agents of TaskRole (retried until
// OK or ctx ends), then starts the creator and the workers, recording in
// h. nodes returns the live nodes (the creator's and the registration's
// choice), members every member, for the workers' homes. Stop the creator
// with stopCreating, the workers with stopWorkers.
func startTasks(ctx context.Context, nodes, members func() []*harness.Node, seed int64, workers int, h *History) (*taskWorkload, error) {
	w := &workload{cfg: WorkloadConfig{Nodes: nodes, Seed: seed}.withDefaults(), h: h}
	r := rand.New(rand.NewPCG(uint64(seed), 0x7461736b))
	for i := range workers {
		if err := w.register(ctx, r, api.RegisterAgentCommand{ID: TaskWorkerID(i), Role: TaskRole}); err != nil {
			return nil, err
		}
	}
	cctx, create := context.WithCancel(ctx)
	wctx, stop := context.WithCancel(ctx)
	tw := &taskWorkload{w: w, workers: workers, members: members, create: create, stop: stop,
		created: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tw.created)
		tw.creator(cctx)
	}()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tw.worker(wctx, i)
		}()
	}
	go func() {
		wg.Wait()
		close(tw.done)
	}()
	return tw, nil
}

// register registers an agent through random nodes until one
// acknowledges, a 4xx answers, or RetryFor passes.
func (w *workload) register(ctx context.Context, r *rand.Rand, cmd api.RegisterAgentCommand) error {
	deadline := time.Now().Add(w.cfg.RetryFor)
	var err error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		_, cl := w.pick(r, "")
		if cl == nil {
			sleepOrDone(ctx, noNodesPause)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
		_, err = cl.RegisterAgent(actx, cmd)
		cancel()
		if err == nil {
			return nil
		}
		if !api.Classify(err).Retry() {
			break
		}
		sleepOrDone(ctx, randBetween(r, minBackoff, maxBackoff))
	}
	if err == nil {
		err = cmp.Or(ctx.Err(), errors.New("no node to register through"))
	}
	return fmt.Errorf("chaos: register task worker %s: %w", cmd.ID, err)
}

// stopCreating stops the creator and waits for it: its last create is
// retried until acknowledged or RetryFor, like a send.
func (tw *taskWorkload) stopCreating() {
	tw.draining.Store(true)
	tw.create()
	<-tw.created
}

// stopWorkers stops the workers and waits for them; a worker finishes the
// report it is sending (bounded by AttemptTimeout per attempt).
func (tw *taskWorkload) stopWorkers() {
	tw.stop()
	<-tw.done
}

// creator creates tasks chaos-t-1, 2, ... for TaskQueue until ctx ends,
// each retried by id through another node until acknowledged, a 4xx or
// RetryFor.
func (tw *taskWorkload) creator(ctx context.Context) {
	r := rand.New(rand.NewPCG(uint64(tw.w.cfg.Seed), 0x63726561))
	for n := 1; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("%s%d", taskPrefix, n)
		cmd := api.TaskCreateCommand{ID: id, From: TaskCreator, To: TaskQueue, Title: id,
			Description: "chaos task " + id, TimeoutSeconds: int(TaskLease / time.Second),
			MaxAttempts: taskMaxAttempts, Channel: TaskChannel}
		tw.retry(ctx, r, Op{Client: -1, Kind: KindTaskCreate, ID: id, Agent: TaskCreator}, tw.w.cfg.RetryFor,
			func(actx context.Context, cl *client.Client) (api.TaskResult, error) {
				return cl.CreateTask(actx, cmd)
			})
		sleepOrDone(ctx, randBetween(r, minCreatePause, maxCreatePause))
	}
}

// retry runs call through the op's nodes (tw.node: a worker's home, the
// creator's random ones), recording each attempt as op, until
// it is acknowledged, a final error answers, or retryFor has passed since
// the first attempt. It outlives ctx, like sendOne: ctx only shortens the
// pauses. It returns the last attempt's result and error.
func (tw *taskWorkload) retry(ctx context.Context, r *rand.Rand, op Op, retryFor time.Duration,
	call func(context.Context, *client.Client) (api.TaskResult, error)) (api.TaskResult, error) {
	deadline := time.Now().Add(retryFor)
	last := ""
	var res api.TaskResult
	err := errors.New("chaos: no node to try")
	for attempt := 0; attempt == 0 || time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			sleepOrDone(context.Background(), randBetween(r, minBackoff, maxBackoff))
		}
		node, cl := tw.node(r, op.Client, last)
		if node == nil {
			continue
		}
		last = node.APIAddr()
		o := op
		o.Node = last
		handle := tw.w.h.Invoke(o)
		actx, cancel := context.WithTimeout(context.Background(), tw.w.cfg.AttemptTimeout)
		res, err = call(actx, cl)
		cancel()
		outcome, again := classify(err)
		tw.w.h.Complete(handle, func(op *Op) {
			op.Outcome = outcome
			if err != nil {
				op.Err, op.Code = err.Error(), api.ErrorKind(err)
				return
			}
			op.Seq = res.Seq
			if op.Kind == KindTaskClaim {
				op.Fence = res.Fence
			}
		})
		if err == nil || !again {
			return res, err
		}
	}
	return res, err
}

// node picks the node an attempt of client's goes through: a worker's
// home, the creator's (client -1) a random live node other than last.
func (tw *taskWorkload) node(r *rand.Rand, clientID int, last string) (*harness.Node, *client.Client) {
	if clientID < 0 {
		return tw.w.pick(r, last)
	}
	return tw.home(clientID)
}

// home is worker i's node and its client; nil while that node is not live
// (down or paused), as an agent's host would be.
func (tw *taskWorkload) home(i int) (*harness.Node, *client.Client) {
	ms := tw.members()
	if len(ms) == 0 {
		return nil, nil
	}
	n := ms[i%len(ms)]
	if !n.Live() {
		return nil, nil
	}
	if cl := n.Client(); cl != nil {
		return n, cl
	}
	return nil, nil
}

// worker is one task worker's loop: list the ready tasks of the queue
// through its home node, claim one of them, then (by the worker's rng)
// abandon it, stall past its lease and report, or work: progress, then
// complete with a result naming the worker and the fence.
func (tw *taskWorkload) worker(ctx context.Context, i int) {
	r := rand.New(rand.NewPCG(uint64(tw.w.cfg.Seed), 0x776f726b+uint64(i)))
	agent := TaskWorkerID(i)
	for ctx.Err() == nil {
		_, cl := tw.home(i)
		if cl == nil {
			sleepOrDone(ctx, noNodesPause)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, tw.w.cfg.AttemptTimeout)
		page, err := cl.Tasks(actx, api.TaskQuery{State: api.TaskReady, To: TaskQueue, Limit: taskListLimit})
		cancel()
		if err != nil || len(page.Tasks) == 0 {
			sleepOrDone(ctx, randBetween(r, minPollPause, maxPollPause))
			continue
		}
		t := page.Tasks[r.IntN(len(page.Tasks))]
		if t.ReadyAt != nil && time.Until(*t.ReadyAt) > 0 {
			sleepOrDone(ctx, randBetween(r, minPollPause, maxPollPause))
			continue // in its backoff: claimable later
		}
		tw.handle(ctx, r, i, agent, t.ID)
	}
}

// handle claims task id for agent and carries the claim to its end.
func (tw *taskWorkload) handle(ctx context.Context, r *rand.Rand, clientID int, agent, id string) {
	var res api.TaskResult
	var err error
	for attempt := 0; attempt < claimAttempts; attempt++ {
		res, err = tw.once(r, Op{Client: clientID, Kind: KindTaskClaim, ID: id, Agent: agent},
			func(actx context.Context, cl *client.Client) (api.TaskResult, error) {
				return cl.ClaimTask(actx, id, agent)
			})
		if o, again := classify(err); o != Unknown || !again {
			break
		}
	}
	if err != nil {
		return // taken by another, in its backoff, or unknown: it lapses if it was ours
	}
	// The claim's entry time is before its acknowledgement, so its lease
	// ends at the latest TaskLease after now.
	claimed := time.Now()
	fence := res.Fence
	switch {
	case tw.draining.Load():
	case r.IntN(abandonOneIn) == 0: // a crashed worker says nothing
		tw.abandoned.Add(1)
		return
	case r.IntN(stallOneIn) == 0: // a hung worker reports late
		past := stallPast
		if r.IntN(2) == 0 {
			past = longStallPast
		}
		sleepOrDone(context.Background(), time.Until(claimed.Add(TaskLease+past)))
		tw.complete(ctx, r, clientID, agent, id, fence, true)
		return
	}
	sleepOrDone(ctx, randBetween(r, minWork, maxWork))
	half := 0.5
	_, err = tw.once(r, Op{Client: clientID, Kind: KindTaskProgress, ID: id, Agent: agent, Fence: fence},
		func(actx context.Context, cl *client.Client) (api.TaskResult, error) {
			return cl.TaskProgress(actx, api.TaskProgressCommand{ID: id, Agent: agent, Fence: fence, Message: "half way", Progress: &half})
		})
	if errors.Is(err, api.ErrConflict) {
		return // the claim was lost: stop working on it
	}
	sleepOrDone(ctx, randBetween(r, minWork, maxWork))
	tw.complete(ctx, r, clientID, agent, id, fence, false)
}

// complete completes id under fence with a result naming agent and fence,
// retried with the same completion until acknowledged, refused, or the
// lease (plus an attempt) has passed: a retry of a completion that was
// applied answers the stored result.
func (tw *taskWorkload) complete(ctx context.Context, r *rand.Rand, clientID int, agent, id string, fence uint64, stale bool) {
	cmd := api.TaskCompleteCommand{ID: id, Agent: agent, Fence: fence, Completion: api.TaskCompletion{
		Status: api.TaskStatusSuccess, Result: TaskResultText(agent, fence)}}
	tw.retry(ctx, r, Op{Client: clientID, Kind: KindTaskComplete, ID: id, Agent: agent, Fence: fence, Stale: stale},
		TaskLease+tw.w.cfg.AttemptTimeout,
		func(actx context.Context, cl *client.Client) (api.TaskResult, error) {
			return cl.CompleteTask(actx, cmd)
		})
}

// TaskResultText is the result a worker completes a task with: who, under
// which fence, so the final state says which claim completed it.
func TaskResultText(agent string, fence uint64) string {
	return fmt.Sprintf("done by %s under fence %d", agent, fence)
}

// once is one recorded attempt of call through the op's node (none when a
// worker's home is not live: the error then says so).
func (tw *taskWorkload) once(r *rand.Rand, op Op, call func(context.Context, *client.Client) (api.TaskResult, error)) (api.TaskResult, error) {
	return tw.retry(context.Background(), r, op, 0, call)
}

// waitTasks polls the task list through the live nodes until no task of
// the workload is open (every one succeeded, failed or was cancelled), or
// wait has passed; it returns how long it waited. Call it after the
// creator stopped, with the workers still running.
func waitTasks(ctx context.Context, c *harness.Cluster, wait time.Duration) (time.Duration, error) {
	start := time.Now()
	i := 0
	err := harness.WaitForCtx(ctx, wait, "every chaos task to end", func() error {
		live := c.Live()
		if len(live) == 0 {
			return errors.New("no live node")
		}
		i++
		tasks, err := listTasks(ctx, live[i%len(live)].Client(), false)
		if err != nil {
			return err
		}
		var open []string
		for _, t := range tasks {
			if !t.State.Final() {
				open = append(open, t.ID+" "+string(t.State))
			}
		}
		if len(open) > 0 {
			return fmt.Errorf("%d tasks open: %s", len(open), idList(open))
		}
		return nil
	})
	return time.Since(start), err
}

// listTasks reads every task of TaskQueue through cl (strong reads), with
// each one's history when full.
func listTasks(ctx context.Context, cl *client.Client, full bool) ([]*api.Task, error) {
	var out []*api.Task
	var after uint64
	for page := 0; ; page++ {
		if page >= maxPages {
			return nil, fmt.Errorf("chaos: list tasks: more than %d pages", maxPages)
		}
		rctx, cancel := context.WithTimeout(ctx, pageTimeout)
		p, err := cl.Tasks(rctx, api.TaskQuery{To: TaskQueue, After: after, Limit: PageLimit})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("chaos: list tasks after %d: %w", after, err)
		}
		for _, t := range p.Tasks {
			after = t.Seq
			if !strings.HasPrefix(t.ID, taskPrefix) && !strings.HasPrefix(t.Title, taskPrefix) {
				continue
			}
			if full {
				rctx, cancel := context.WithTimeout(ctx, pageTimeout)
				ft, err := cl.Task(rctx, t.ID)
				cancel()
				if err != nil {
					return nil, fmt.Errorf("chaos: read task %s: %w", t.ID, err)
				}
				t = ft
			}
			out = append(out, t)
		}
		if !p.HasMore || len(p.Tasks) == 0 {
			return out, nil
		}
	}
}
