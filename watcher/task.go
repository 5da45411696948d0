package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
)

// Tasks. Besides answering mail, a watcher does the tasks of its agent's
// queues: those addressed to the agent and those of its claim entries
// (AgentConfig.Queues). It learns of them from the stream (task events,
// and the task_delegation and handoff messages in the inbox) and, at
// start, from a list of the ready ones; it claims one when a slot is free
// (losing the race to another agent is normal), runs the model CLI with
// the task as the prompt while it renews the lease, and reports the
// completion under the claim's fence. Exactly-once comes from the fence:
// a report from a claim that lapsed is refused, and the watcher drops
// that work.

// taskAPI is what a watcher needs of the API to do tasks;
// *transport.Client implements it.
type taskAPI interface {
	Task(ctx context.Context, id string) (*api.Task, error)
	Tasks(ctx context.Context, q api.TaskQuery) (api.TaskPage, error)
	// ClaimTaskFenced claims under the agent lease's fence (agentlease.go).
	ClaimTaskFenced(ctx context.Context, id, agent string, agentFence uint64) (api.TaskResult, error)
	TaskProgress(ctx context.Context, cmd api.TaskProgressCommand) (api.TaskResult, error)
	CompleteTask(ctx context.Context, cmd api.TaskCompleteCommand) (api.TaskResult, error)
	// HandoffTask gives a queue's task back to its queue when the watcher
	// stops mid-task, so another agent need not wait for the lease.
	HandoffTask(ctx context.Context, cmd api.TaskHandoffCommand) (api.TaskResult, error)
}

// taskOffer is a task the watcher may claim: as a task update showed it
// (which the loop filters on), or only its id (from a message). It is
// read again before the claim.
type taskOffer struct {
	id   string
	task *api.Task
	// resume: a task this agent holds (from the start's list), offered
	// though it is not ready; claiming it again answers the current claim.
	resume    bool
	notBefore time.Time
	tries     int // re-offers after a refused claim or a failed read
}

// maxTaskTries bounds the re-offers of one task; a later event offers it
// again.
const maxTaskTries = 6

// taskMessageID returns the task a message hands to its recipients: the
// task_id in the metadata of a task_delegation or handoff message, or of
// the hitl_decision on the approval a task's requires_approval
// completion opened (to its claimant: a modify gives the task back to
// it), "" for any other message. Such messages belong to the task path,
// never answered as mail (a reply would reach the creator or approver as
// chat, and a modified task's action would be carried out twice); the
// task's completion and incidents, reports to its creator, are mail.
func taskMessageID(m *api.Message) string {
	if (m.Type != api.TypeTaskDelegation && m.Type != api.TypeTaskHandoff && m.Type != api.TypeHITLDecision) || len(m.Metadata) == 0 {
		return ""
	}
	var md map[string]json.RawMessage
	var id string
	if json.Unmarshal(m.Metadata, &md) != nil || json.Unmarshal(md[api.MetaTaskID], &id) != nil {
		return ""
	}
	return id
}

// offerTask hands o to the task loop; false when ctx ended first.
func (w *agentWatcher) offerTask(ctx context.Context, o taskOffer) bool {
	select {
	case w.taskOffers <- o:
		return true
	case <-ctx.Done():
		return false
	}
}

// taskSlots is how many tasks the agent runs at once: max_forks with the
// fork policy, else one.
func (w *agentWatcher) taskSlots() int {
	if w.cfg.Policy.Mode == PolicyFork {
		return w.cfg.Policy.MaxForks
	}
	return 1
}

// listTasks offers every ready task of the agent's queues and every task
// it still holds from before a restart: what the stream after the cursor
// may not show again.
func (w *agentWatcher) listTasks(ctx context.Context) {
	queries := []api.TaskQuery{{State: api.TaskRunning, ClaimedBy: w.cfg.ID}}
	for _, q := range w.cfg.Queues() {
		queries = append(queries, api.TaskQuery{State: api.TaskReady, To: q})
	}
	for _, q := range queries {
		q.Limit = api.MaxPageLimit
		for {
			var page api.TaskPage
			if !w.retry(ctx, "list tasks", func() (err error) {
				page, err = w.tasks.Tasks(ctx, q)
				return err
			}) {
				return
			}
			for _, t := range page.Tasks {
				if !w.offerTask(ctx, taskOffer{id: t.ID, task: t, resume: q.ClaimedBy != ""}) {
					return
				}
			}
			if !page.HasMore || len(page.Tasks) == 0 {
				break
			}
			q.After = page.Tasks[len(page.Tasks)-1].Seq
		}
	}
}

// taskLoop keeps the offered tasks and runs up to taskSlots of them,
// oldest offer first, each not before its notBefore. It returns when ctx
// ends and every run has.
//
// It runs a task at most once under each fence: ran is the last fence
// each task ran under (kept until an offer shows the task ended), so
// a task that comes back running for this agent under a newer fence (an
// approver modified the action its requires_approval completion
// proposed) runs again, and the replayed update of a claim already run
// does not. An offer that comes while its task runs is kept, and looked
// at once the run ended, when ran knows the run's fence.
func (w *agentWatcher) taskLoop(ctx context.Context) {
	type ended struct {
		id    string
		fence uint64 // the claim's the run had; 0 when it claimed nothing
		again *taskOffer
	}
	var pending []taskOffer
	running := map[string]bool{}
	later := map[string]taskOffer{} // the newest offer of a running task
	ran := map[string]uint64{}
	done := make(chan ended)
	admit := func(o taskOffer) {
		i := slices.IndexFunc(pending, func(p taskOffer) bool { return p.id == o.id })
		if o.task != nil && o.task.State.Final() {
			delete(ran, o.id)
		}
		switch {
		case o.task != nil && !o.resume && !w.claimable(o.task) && !w.cameBack(o.task, ran[o.id]):
			if i >= 0 {
				pending = slices.Delete(pending, i, i+1) // claimed by another, waiting, ended
			}
		case i >= 0:
			pending[i] = o // the newer word on it, in its place
		default:
			pending = append(pending, o)
		}
	}
	for {
		now := time.Now()
		var next time.Time
		for i := 0; i < len(pending) && len(running) < w.taskSlots(); {
			o := pending[i]
			if o.notBefore.After(now) {
				if next.IsZero() || o.notBefore.Before(next) {
					next = o.notBefore
				}
				i++
				continue
			}
			pending = slices.Delete(pending, i, i+1)
			running[o.id] = true
			ranFence := ran[o.id]
			go func() {
				fence, again := w.takeTask(ctx, o, ranFence)
				done <- ended{id: o.id, fence: fence, again: again}
			}()
		}
		var timer <-chan time.Time
		if !next.IsZero() {
			timer = time.After(time.Until(next))
		}
		select {
		case <-ctx.Done():
			for range running {
				<-done
			}
			return
		case o := <-w.taskOffers:
			if running[o.id] {
				later[o.id] = o // the run's own doing, or news for after it
				continue
			}
			admit(o)
		case e := <-done:
			delete(running, e.id)
			if e.fence > ran[e.id] {
				ran[e.id] = e.fence
			}
			if e.again != nil {
				pending = append(pending, *e.again)
			}
			if o, ok := later[e.id]; ok {
				delete(later, e.id)
				admit(o)
			}
		case <-timer:
		}
	}
}

// mine reports whether the agent claims tasks assigned to to.
func (w *agentWatcher) mine(to string) bool {
	return slices.Contains(w.cfg.Queues(), to)
}

// claimable reports whether t, as shown, is one to claim: ready, of the
// agent's queues.
func (w *agentWatcher) claimable(t *api.Task) bool {
	return t.State == api.TaskReady && w.mine(t.To)
}

// cameBack reports whether t, as shown, is running for this agent under
// a fence newer than ran, the last it ran t under: given back to it (a
// modified approval) or claimed before a restart; claiming it again
// answers that claim.
func (w *agentWatcher) cameBack(t *api.Task, ran uint64) bool {
	return t.State == api.TaskRunning && t.ClaimedBy == w.cfg.ID && t.Fence > ran && w.mine(t.To)
}

// takeTask reads the offered task, claims it and does it, unless it is
// running for this agent under a fence no newer than ran (the last it
// ran the task under). It returns the fence of the claim it ran (0 for
// none) and the offer to try again later (a read that failed, a claim
// refused while the task still looked ready, a task not claimable
// before its ReadyAt), else nil.
func (w *agentWatcher) takeTask(ctx context.Context, o taskOffer, ran uint64) (uint64, *taskOffer) {
	// Read it whole (an update on the stream lacks the description and
	// context) and as it is now (a replayed update may be long stale).
	t, err := w.tasks.Task(ctx, o.id)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, api.ErrNotFound) {
			return 0, nil
		}
		return 0, w.reoffer(o, "read task", err)
	}
	switch {
	case !w.mine(t.To):
		w.log.Debug("watcher: task not of our queues", "task", t.ID, "to", t.To)
		return 0, nil
	case w.cameBack(t, ran):
		// Claimed before a restart, by a claim whose answer was lost (this
		// watcher runs no task twice at once), or given back by a modified
		// approval: claiming again answers the current claim.
	case t.State == api.TaskRunning && t.ClaimedBy == w.cfg.ID:
		w.log.Debug("watcher: task already run under its fence", "task", t.ID, "fence", t.Fence)
		return 0, nil
	case t.State == api.TaskRunning:
		w.log.Info("watcher: task claimed by another agent", "task", t.ID, "claimed_by", t.ClaimedBy)
		return 0, nil
	case t.State != api.TaskReady:
		w.log.Debug("watcher: task not ready", "task", t.ID, "state", t.State)
		return 0, nil
	case t.ReadyAt != nil && time.Until(*t.ReadyAt) > 0:
		return 0, &taskOffer{id: t.ID, task: t, notBefore: *t.ReadyAt, tries: o.tries}
	}
	claim, err := w.tasks.ClaimTaskFenced(ctx, t.ID, w.cfg.ID, w.agentFence())
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return 0, nil
	case errors.Is(err, api.ErrConflict):
		// Another agent won (the usual case), or our clock ran ahead of the
		// leader's past a backoff: read it again to know which.
		return 0, w.reoffer(o, "claim", err)
	case errors.Is(err, api.ErrForbidden), errors.Is(err, api.ErrNotFound), errors.Is(err, api.ErrInvalid):
		w.log.Warn("watcher: claim refused", "task", t.ID, "to", t.To, "err", err)
		return 0, nil
	default:
		return 0, w.reoffer(o, "claim", err)
	}
	w.runTask(ctx, t, claim)
	return claim.Fence, nil
}

// reoffer is o again after a delay that doubles with its tries, or nil
// once maxTaskTries were spent.
func (w *agentWatcher) reoffer(o taskOffer, what string, err error) *taskOffer {
	if o.tries >= maxTaskTries {
		w.log.Warn("watcher: giving up on the task until it is offered again", "task", o.id, "after", what, "err", err)
		return nil
	}
	w.log.Debug("watcher: task offered again later", "task", o.id, "after", what, "err", err)
	return &taskOffer{id: o.id, resume: o.resume, notBefore: time.Now().Add(100 * time.Millisecond << o.tries), tries: o.tries + 1}
}

// runTask does the claimed task t: the CLI runs while the lease is
// renewed, then the completion is reported under the claim's fence. A
// claim found lost drops the work; a watcher stopping hands a queue's
// task back to its queue.
func (w *agentWatcher) runTask(ctx context.Context, t *api.Task, claim api.TaskResult) {
	start := time.Now()
	label := "doing task " + t.ID
	w.setWorking(label, true)
	w.taskRunning(1)
	defer func() {
		w.taskRunning(-1)
		w.setWorking(label, false)
	}()
	w.log.Info("watcher: claimed task", "task", t.ID, "to", t.To, "attempt", claim.Attempt, "fence", claim.Fence)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &lease{w: w, t: t, fence: claim.Fence, every: renewEvery(t), cancel: cancel, wake: make(chan struct{}, 1)}
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		l.keep(runCtx)
	}()
	comp, ok := w.work(runCtx, t, claim, l, start)
	cancel()
	<-kept
	switch {
	case l.isLost():
		w.taskEnded(runFailed, 0, "lost the claim of task "+t.ID+": its lease lapsed")
	case !ok:
		w.handBack(t, claim)
	default:
		w.complete(ctx, t, claim, comp, start)
	}
}

// renewEvery is how often the lease of t is renewed: a third of its
// timeout, so two renewals may fail before it lapses.
func renewEvery(t *api.Task) time.Duration {
	return time.Duration(t.TimeoutSeconds) * time.Second / 3
}

// work runs the CLI on t until it has a completion (ok) or runCtx ended.
// A run whose dependency lines name tasks (and that printed no complete
// line) waits until they end, renewing the lease, and runs again with
// their results in the prompt; one that failed or was cancelled fails t.
func (w *agentWatcher) work(ctx context.Context, t *api.Task, claim api.TaskResult, l *lease, start time.Time) (api.TaskCompletion, bool) {
	deps := w.readTasks(ctx, t.DependsOn)
	waited := map[string]bool{}
	for {
		prompt, err := w.taskPrompt(ctx, t, deps)
		if err != nil {
			if ctx.Err() != nil {
				return api.TaskCompletion{}, false
			}
			return api.TaskCompletion{Status: api.TaskStatusFailure, ExecutionTimeMS: msSince(start),
				Error: &api.TaskError{ErrorType: ErrorTypePrompt, ErrorMessage: cutRunes(err.Error(), api.MaxTaskNoteRunes),
					SuggestedAction: "fix the agent's prompt template"}}, true
		}
		inv := w.invocation(prompt, "MAOS_MESSAGE_ID="+t.MessageID, "MAOS_SESSION_ID="+t.Channel, "MAOS_TASK_ID="+t.ID,
			"MAOS_TASK_FENCE="+strconv.FormatUint(claim.Fence, 10), "MAOS_TASK_ATTEMPT="+strconv.Itoa(claim.Attempt))
		inv.OnLine = l.line
		var rep TaskReport
		res, attempts := w.invoke(ctx, inv, t.ID, func(r *Result) {
			rep = ParseTaskReport(r.Stdout)
			if r.Err == nil && rep.empty() {
				r.Err = errNoReport
			}
		})
		if ctx.Err() != nil {
			return api.TaskCompletion{}, false
		}
		if res.Err != nil {
			w.log.Warn("watcher: task failed", "task", t.ID, "attempts", attempts, "err", res.Err)
			return failedRun(res, attempts, msSince(start)), true
		}
		if rep.Complete != nil || len(rep.Dependencies) == 0 {
			c := rep.completion(msSince(start))
			w.uploadOutputs(ctx, &c, inv.Workdir)
			return c, true
		}
		var onAgents []Dependency
		rerun := false
		for _, d := range rep.Dependencies {
			if waited[d.WaitingFor] {
				continue // met before this run
			}
			dt, found, ok := w.readDependency(ctx, d.WaitingFor)
			if !ok {
				return api.TaskCompletion{}, false
			}
			if !found {
				l.note(cutRunes("waiting for agent "+d.WaitingFor+": "+d.Reason, api.MaxTaskNoteRunes))
				onAgents = append(onAgents, d)
				continue
			}
			l.note(cutRunes("waiting for task "+d.WaitingFor+": "+d.Reason, api.MaxTaskNoteRunes))
			w.log.Info("watcher: task waits for another", "task", t.ID, "waiting_for", dt.ID, "reason", d.Reason)
			if dt, ok = w.waitTask(ctx, dt, l.every); !ok {
				return api.TaskCompletion{}, false
			}
			if !api.DependencyMet(dt) {
				c := *api.DependencyFailed(dt)
				c.ExecutionTimeMS = msSince(start)
				return c, true
			}
			waited[dt.ID] = true
			deps = append(deps, dt)
			rerun = true
		}
		switch {
		case rerun:
			continue
		case rep.Text != "" || len(rep.Outputs) > 0:
			c := rep.completion(msSince(start))
			w.uploadOutputs(ctx, &c, inv.Workdir)
			return c, true
		}
		return blocked(onAgents, msSince(start)), true
	}
}

// ErrorTypePrompt is a task whose prompt the agent's template cannot
// render.
const ErrorTypePrompt = "prompt_error"

func msSince(t time.Time) int64 { return time.Since(t).Milliseconds() }

// readTasks reads the tasks of ids for the prompt; one that cannot be
// read is left out.
func (w *agentWatcher) readTasks(ctx context.Context, ids []string) []*api.Task {
	var out []*api.Task
	for _, id := range ids {
		t, err := w.tasks.Task(ctx, id)
		if err != nil {
			w.log.Warn("watcher: dependency not read for the prompt", "task", id, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out
}

// readDependency reads the task a dependency line names: found false when
// there is no such task (the name is an agent's); ok false when ctx ended.
func (w *agentWatcher) readDependency(ctx context.Context, id string) (t *api.Task, found, ok bool) {
	ok = w.retry(ctx, "read dependency "+id, func() error {
		var err error
		t, err = w.tasks.Task(ctx, id)
		if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrInvalid) {
			t, err = nil, nil
		}
		return err
	})
	return t, t != nil, ok
}

// waitTask reads t every poll until it is met or can no longer be
// (failed, cancelled); ok false when ctx ended first.
func (w *agentWatcher) waitTask(ctx context.Context, t *api.Task, poll time.Duration) (*api.Task, bool) {
	poll = min(poll, time.Second)
	for !api.DependencyMet(t) && !api.DependencyBroken(t) {
		if !sleepCtx(ctx, poll) {
			return nil, false
		}
		if nt, err := w.tasks.Task(ctx, t.ID); err == nil {
			t = nt
		} else if ctx.Err() == nil {
			w.log.Warn("watcher: reading a dependency failed; retrying", "task", t.ID, "err", err)
		}
	}
	return t, true
}

// taskPrompt renders the agent's prompt for t, with the channel's recent
// messages before it and the tasks it depends on.
func (w *agentWatcher) taskPrompt(ctx context.Context, t *api.Task, deps []*api.Task) (string, error) {
	m := taskMessage(t)
	var ctxMsgs []*api.Message
	if n := *w.cfg.ContextMessages; n > 0 {
		var err error
		if ctxMsgs, err = recentContext(ctx, w.c, m, n); err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			w.log.Warn("watcher: no channel context", "task", t.ID, "err", err)
		}
	}
	files := w.fetchAttachments(ctx, t.ID, taskRefs(t))
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return w.cfg.Render(PromptData{Agent: w.cfg.ID, Role: w.cfg.Role, Guardrails: w.cfg.Guardrails, Context: ctxMsgs,
		Message: m, Task: t, Dependencies: deps, Artifacts: files})
}

// taskMessage is t's task_delegation message as the prompt shows it:
// stored at t's seq, from its creator, titled as t, its description as
// the text.
func taskMessage(t *api.Task) *api.Message {
	return &api.Message{ID: t.MessageID, Seq: t.Seq, Timestamp: t.Created, Channel: t.Channel, From: t.From,
		To: api.Recipients{t.To}, Type: api.TypeTaskDelegation, Priority: t.Priority, Title: t.Title,
		Content: api.Content{Text: t.Description}}
}

// complete reports comp under the claim's fence, retrying transient
// errors. A completion the fsm would refuse, or the node does (too large),
// becomes a failure naming why; a conflict means the claim lapsed and
// another attempt owns the task now: the work is dropped. A
// requires_approval completion leaves the task awaiting its approval,
// with no lease: the run is over, the task not done.
func (w *agentWatcher) complete(ctx context.Context, t *api.Task, claim api.TaskResult, comp api.TaskCompletion, start time.Time) {
	cmd := api.TaskCompleteCommand{ID: t.ID, Agent: w.cfg.ID, Fence: claim.Fence, Completion: comp, AgentFence: w.agentFence()}
	if err := cmd.Validate(); err != nil {
		w.log.Warn("watcher: the CLI's completion is invalid; reporting a failure", "task", t.ID, "err", err)
		cmd.Completion = invalidCompletion(comp, err)
	}
	delay := 100 * time.Millisecond
	fellBack := false // once: a failure in place of a refused completion
	for {
		_, err := w.tasks.CompleteTask(ctx, cmd)
		switch {
		case err == nil:
			c := cmd.Completion
			w.log.Info("watcher: task completed", "task", t.ID, "status", c.Status, "fence", claim.Fence)
			outcome, lastErr := runSucceeded, ""
			switch c.Status {
			case api.TaskStatusRequiresApproval:
				outcome = runAwaits
			case api.TaskStatusFailure:
				outcome, lastErr = runFailed, "task "+t.ID+" failed"
				if c.Error != nil {
					lastErr += ": " + c.Error.ErrorType + ": " + c.Error.ErrorMessage
				}
			}
			w.taskEnded(outcome, time.Since(start), lastErr)
			return
		case errors.Is(err, api.ErrConflict):
			w.log.Warn("watcher: completion refused: the claim lapsed and the task is another attempt's; dropping the work",
				"task", t.ID, "fence", claim.Fence, "err", err)
			w.taskEnded(runFailed, 0, "completion of task "+t.ID+" refused: "+err.Error())
			return
		case !fellBack && (errors.Is(err, api.ErrInvalid) || errors.Is(err, api.ErrTooLarge)):
			// What the CLI reported does not fit (over the node's body
			// limit, say): report that, small, rather than leave the task
			// to lapse and run again.
			w.log.Warn("watcher: the completion was refused; reporting a failure", "task", t.ID, "err", err)
			cmd.Completion, fellBack = invalidCompletion(comp, err), true
			continue
		case errors.Is(err, api.ErrInvalid), errors.Is(err, api.ErrForbidden), errors.Is(err, api.ErrNotFound):
			w.log.Warn("watcher: completion refused; dropping the work", "task", t.ID, "err", err)
			w.taskEnded(runFailed, 0, "completion of task "+t.ID+" refused: "+err.Error())
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("watcher: reporting the completion failed; retrying", "task", t.ID, "err", err)
		if !sleepCtx(ctx, delay) {
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// handBack gives a queue's task back to its queue when the watcher stops
// mid-task, so another agent takes it now rather than after the lease; a
// task addressed to the agent stays claimed, and the agent's next start
// claims it again (or, once the lease lapsed, anew).
func (w *agentWatcher) handBack(t *api.Task, claim api.TaskResult) {
	if t.To == w.cfg.ID {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := w.tasks.HandoffTask(ctx, api.TaskHandoffCommand{ID: t.ID, Agent: w.cfg.ID, Fence: claim.Fence, To: t.To,
		Reason: "the watcher of " + w.cfg.ID + " stopped", AgentFence: w.agentFence()})
	if err != nil {
		w.log.Warn("watcher: handing the task back failed; its lease will lapse", "task", t.ID, "err", err)
		return
	}
	w.log.Info("watcher: stopped mid-task; handed it back to its queue", "task", t.ID, "to", t.To)
}

// lease renews a claim while its task runs: every `every`, and at once
// when the CLI reports a status line. A renewal refused with a conflict
// means the claim is lost (its lease lapsed, another agent may hold the
// task): the run is cancelled.
type lease struct {
	w      *agentWatcher
	t      *api.Task
	fence  uint64
	every  time.Duration
	cancel context.CancelFunc
	wake   chan struct{}

	mu       sync.Mutex
	message  string
	progress *float64
	lost     bool
}

// line takes a stdout line of the CLI: a status line is the progress.
func (l *lease) line(s string) {
	if sl, ok := ParseStatusLine(s); ok && sl.Type == LineStatus {
		p := sl.Progress
		if p != nil && !(*p >= 0 && *p <= 1) {
			p = nil // out of 0..1: the words still count
		}
		l.set(cutRunes(sl.Message, api.MaxTaskNoteRunes), p, true)
	}
}

// note is a progress message from the watcher itself, keeping the
// progress.
func (l *lease) note(msg string) { l.set(msg, nil, false) }

func (l *lease) set(msg string, p *float64, setProgress bool) {
	l.mu.Lock()
	l.message = msg
	if setProgress {
		l.progress = p
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a renewal is due already; it sends the latest
	}
}

func (l *lease) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// keep renews the lease until ctx ends or the claim is found lost. One
// request at a time: status lines that come faster are coalesced.
func (l *lease) keep(ctx context.Context) {
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-l.wake:
		}
		l.mu.Lock()
		cmd := api.TaskProgressCommand{ID: l.t.ID, Agent: l.w.cfg.ID, Fence: l.fence, Message: l.message, Progress: l.progress, AgentFence: l.w.agentFence()}
		l.mu.Unlock()
		_, err := l.w.tasks.TaskProgress(ctx, cmd)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, api.ErrConflict):
			l.w.log.Warn("watcher: the claim is lost (its lease lapsed); stopping the task's run", "task", l.t.ID, "fence", l.fence, "err", err)
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			l.cancel()
			return
		default:
			l.w.log.Warn("watcher: renewing the lease failed; retried", "task", l.t.ID, "err", err)
		}
	}
}
