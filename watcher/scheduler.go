package watcher

import (
	"context"
	"errors"
	"time"

	"github.com/maos-project/maos/api"
)

// scheduler is one agent's message loop (run): it tracks the inbox
// messages after the cursor, starts each by its mode (policy.go) and moves
// the cursor past every contiguous finished message. Each turn of run is
// one schedule (remode, startForks, then a tmux batch or startSerial),
// one wait for an event (arrive, finish, the idle timer, a policy poll;
// drain when ctx ends) and one advance of the cursor.
//
// Threading: the goroutine that calls run owns every field; no other
// goroutine reads or writes them. start runs handle or handleFork on a
// worker goroutine that reads only its item's m and fork (both set before
// it starts, left alone until it reports) and reports exactly once on
// done; a tmux batch (scheduleTmux) reports each of its items on done the
// same way. running counts the reports still to come, and run does not
// return before it has received them all.
type scheduler struct {
	w    *agentWatcher
	done chan finished // workers' reports, one per started item

	items       []*item // seq order; the head is the first unfinished
	serial      *item   // the queue/interrupt invocation running
	forks       forkSlots
	running     int       // items started whose report has not come
	lastSeen    uint64    // the highest seq received: lower ones are repeats
	lastArrival time.Time // when the last new message came (idle_after)
	cursor      uint64    // the seq the cursor is moved to
	acked       uint64    // the seq the cluster last took for the cursor
	rt          runtimePolicy
	tmux        *tmuxQueue // a tmux agent's delivery state, nil for others
}

// newScheduler is w's scheduler with the cursor at cursor.
func (w *agentWatcher) newScheduler(cursor uint64) *scheduler {
	s := &scheduler{w: w, done: make(chan finished), forks: make(forkSlots, w.cfg.Policy.MaxForks),
		lastSeen: cursor, cursor: cursor, acked: cursor}
	if w.cfg.Delivery == DeliveryTmux {
		s.tmux = &tmuxQueue{}
	}
	return s
}

// run schedules the messages of msgs until ctx ends, then waits for every
// started item's report.
func (s *scheduler) run(ctx context.Context, msgs <-chan *api.Message) {
	s.w.refreshPolicy(ctx, &s.rt)
	poll := time.NewTicker(policyPoll)
	defer poll.Stop()
	if s.tmux != nil {
		defer s.tmux.bg.Wait()
	}
	for {
		var timer, repoll <-chan time.Time
		if wait := s.schedule(ctx); wait > 0 {
			timer = time.After(wait)
		}
		// A policy decides only the mode of messages the loop holds; with
		// none, the next arrival reads it anyway (arrive), so a watcher
		// at rest asks nothing (1,000 agents polled 2,000 times a second).
		if len(s.items) > 0 {
			repoll = poll.C
		}
		select {
		case <-ctx.Done():
			s.drain()
			return
		case m := <-msgs:
			if !s.arrive(ctx, m) {
				continue
			}
		case f := <-s.done:
			if !s.finish(ctx, f) {
				continue
			}
		case <-timer:
		case <-repoll:
			s.w.refreshPolicy(ctx, &s.rt)
		}
		s.advance(ctx)
	}
}

// start runs it on a worker goroutine (in its fork slot, if it has one),
// which reports on done: again when it was cancelled before its reply was
// posted, to be handled again later.
func (s *scheduler) start(ctx context.Context, it *item) {
	it.running = true
	s.running++
	ictx, cancel := context.WithCancel(ctx)
	it.cancel = cancel
	go func() {
		defer cancel()
		var err error
		if it.fork > 0 {
			err = s.w.handleFork(ictx, it.m, it.fork)
		} else {
			err = s.w.handle(ictx, it.m)
		}
		s.done <- finished{it: it, again: err != nil}
	}()
}

// waiting reports whether it is still to be started.
func (it *item) waiting() bool { return !it.done && !it.running }

// schedule starts what may start now and returns how long to wait before
// scheduling again when nothing else happens (0: until an event).
func (s *scheduler) schedule(ctx context.Context) time.Duration {
	s.remode(time.Now())
	s.startForks(ctx)
	if s.tmux != nil {
		if s.w.scheduleTmux(ctx, s.tmux, s.items, func(it *item) { it.running = true; s.running++ }, s.done) {
			return s.w.opts.PanePoll
		}
		return 0
	}
	return s.startSerial(ctx)
}

// remode decides again the mode of every message not started (policy.go):
// a run-time policy may have changed or ended since it came.
func (s *scheduler) remode(now time.Time) {
	for _, it := range s.items {
		if it.waiting() {
			it.mode = s.w.modeOf(it.m, &s.rt, now)
		}
	}
}

// startForks starts fork-mode messages while a slot is free: forks never
// wait for the agent (nor type into a pane), so they go first.
func (s *scheduler) startForks(ctx context.Context) {
	for _, it := range s.items {
		if it.waiting() && it.forUs && it.mode == PolicyFork {
			if it.fork = s.forks.take(); it.fork == 0 {
				break
			}
			s.start(ctx, it)
		}
	}
}

// startSerial is a command agent's serial invocation: the first waiting
// queue/interrupt message, or the first urgent interrupt, which preempts
// the running one. With none running it starts the pick, unless a queue
// message waits for the agent's idle_after since the last arrival, which
// it returns.
func (s *scheduler) startSerial(ctx context.Context) time.Duration {
	var pick, urgent *item
	for _, it := range s.items {
		if !it.waiting() || !it.forUs || it.mode == PolicyFork || it.mode == PolicyQuiet {
			continue
		}
		if pick == nil {
			pick = it
		}
		if urgent == nil && it.urgentInterrupt() {
			urgent = it
		}
	}
	if urgent != nil {
		pick = urgent
		s.preempt(urgent)
	}
	if s.serial != nil || pick == nil {
		return 0
	}
	idle := time.Duration(s.w.cfg.Policy.IdleAfter)
	if pick.mode == PolicyQueue && idle > 0 && time.Since(s.lastArrival) < idle {
		return idle - time.Since(s.lastArrival)
	}
	s.serial = pick
	s.start(ctx, pick)
	return 0
}

// preempt cancels the running serial invocation for urgent, unless it is
// an urgent interrupt itself or was preempted already.
func (s *scheduler) preempt(urgent *item) {
	if s.serial != nil && !s.serial.urgentInterrupt() && !s.serial.preempted {
		s.w.log.Info("watcher: urgent message preempts the running invocation",
			"id", urgent.m.ID, "preempted", s.serial.m.ID)
		s.serial.preempted = true
		s.serial.cancel()
	}
}

// drain waits for the report of every started item.
func (s *scheduler) drain() {
	for s.running > 0 {
		<-s.done
		s.running--
	}
}

// arrive tracks m, come from the stream, as an item: done at once when it
// is malformed, a task's hand-over (offered to the task loop) or not for
// the agent. In a dry run it only reports. It returns false when the
// cursor need not move: a repeat after a reconnect, a dry run, or ctx
// ended while the task loop was offered m.
func (s *scheduler) arrive(ctx context.Context, m *api.Message) bool {
	w := s.w
	if m.Seq <= s.lastSeen {
		return false // a repeat after a reconnect
	}
	s.lastSeen = m.Seq
	s.lastArrival = time.Now()
	// Read the policy again first: one set before m was sent is before m
	// in the log, so this node has applied it, and m must not start in
	// the mode it replaced.
	w.refreshPolicy(ctx, &s.rt)
	it := &item{m: m, mode: w.modeOf(m, &s.rt, time.Now())}
	if w.opts.DryRun != nil {
		w.dryRun(it)
		return false
	}
	if err := malformed(m); err != nil {
		w.log.Warn("watcher: skipping malformed message", "seq", m.Seq, "id", m.ID, "err", err)
		it.done = true
	} else if id := taskMessageID(m); id != "" && w.cfg.DoesTasks() {
		// The task's state, not the cursor, says whether it is done.
		w.log.Debug("watcher: a task handed over; offered to the task loop", "id", m.ID, "task", id)
		it.done = true
		if !w.offerTask(ctx, taskOffer{id: id}) {
			return false
		}
	} else {
		var reason string
		it.forUs, reason = w.cfg.ForUs(m)
		if !it.forUs {
			w.log.Debug("watcher: not for us", "id", m.ID, "reason", reason)
			it.done = true
		}
	}
	if s.tmux != nil {
		it.readFrom = w.readsBegun()
	}
	s.items = append(s.items, it)
	return true
}

// finish takes a worker's report: it frees the item's fork slot, batch
// or serial place, and marks it done unless it must run again. It
// returns false when the cursor need not move: ctx ended and it must run
// again.
func (s *scheduler) finish(ctx context.Context, f finished) bool {
	it := f.it
	s.running--
	it.running = false
	switch {
	case it.fork > 0:
		s.forks.free(it.fork)
		it.fork = 0
	case s.tmux != nil:
		if s.tmux.typing--; s.tmux.typing == 0 {
			s.tmux.batchEnded(s.w)
		}
	case s.serial == it:
		s.serial = nil
	}
	it.preempted = false
	if f.again {
		if ctx.Err() != nil {
			return false
		}
		s.w.log.Info("watcher: invocation cancelled; it runs again later", "id", it.m.ID)
	} else {
		it.done = true
	}
	return true
}

// advance drops the finished items at the head and moves the cursor past
// them, fenced by the agent's lease; a failed move is retried after the
// next event.
func (s *scheduler) advance(ctx context.Context) {
	n := 0
	for n < len(s.items) && s.items[n].done {
		n++
	}
	if n > 0 {
		s.cursor = s.items[n-1].m.Seq
		s.items = s.items[n:]
	}
	if s.cursor <= s.acked {
		return
	}
	w := s.w
	if _, err := w.c.SetCursorFenced(ctx, w.cfg.ID, s.cursor, w.agentFence()); errors.Is(err, api.ErrFenced) {
		w.leaseLost(err)
	} else if err != nil {
		w.log.Warn("watcher: set cursor failed; retried with the next message", "seq", s.cursor, "err", err)
	} else {
		s.acked = s.cursor
	}
}
