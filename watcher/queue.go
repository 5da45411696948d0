package watcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/maos-project/maos/api"
)

// tmuxQueue is the scheduler's state of a tmux agent's delivery: messages wait
// while the agent works and go as one batch when it is idle (see
// DESIGN.md, "tmux delivery waits for idle"). The scheduler's goroutine owns it.
type tmuxQueue struct {
	typing int    // items of the batch being typed, not yet finished
	after  uint64 // a batch ended at this many readings: judge only on a newer one
	bg     sync.WaitGroup
}

// batchEnded records that the batch being typed finished: the next one
// waits for a newer reading, and a hook's WORKING counts again (the
// typing started a turn of its own; the interrupted one is over).
func (q *tmuxQueue) batchEnded(w *agentWatcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q.after = w.reads
	w.hookStale = false
}

// readsBegun is how many rounds of reading pane and hook have begun.
func (w *agentWatcher) readsBegun() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

// tmuxMessageLine is how one message reads in a pane: "[FROM: sender]
// title — text".
func tmuxMessageLine(m *api.Message) string {
	line := "[FROM: " + m.From + "] "
	if m.Title != "" {
		line += m.Title + " — "
	}
	return line + m.Content.Text
}

// BatchText is what a tmux agent's watcher types for ms (in seq order):
// one message as tmuxMessageLine; several as one line that starts with a
// summary, "3 messages while you worked: (1) [FROM: a] … (2) …" (waited
// is false when they came while the agent was idle: "3 messages: …"), so
// the agent takes them in one turn, not three.
func BatchText(ms []*api.Message, waited bool) string {
	if len(ms) == 1 {
		return tmuxMessageLine(ms[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages", len(ms))
	if waited {
		b.WriteString(" while you worked")
	}
	b.WriteString(":")
	for i, m := range ms {
		fmt.Fprintf(&b, " (%d) %s", i+1, tmuxMessageLine(m))
	}
	return b.String()
}

// interrupts reports whether it is mail the agent is interrupted for: an
// urgent message, or one an override gives mode interrupt, whose sender
// may interrupt. That authority is not the watcher's to decide: apply
// decided it by the interrupt rule and carried it on the message
// (api.Message.MayInterrupt); without it the message waits for the agent
// to be idle, like any other.
func (w *agentWatcher) interrupts(it *item) bool {
	return it.m.MayInterrupt && (it.m.Priority == api.PriorityUrgent || (it.mode == PolicyInterrupt && w.cfg.Policy.Mode != PolicyInterrupt))
}

// agentSubstate is what delivery goes by: the hook's word (the node's
// record when its source is hook), unless it is a WORKING the watcher
// interrupted since; else what the pane shows; "" when neither tells
// (delivery then types, as a person would into a pane it cannot read).
// n is how many readings (paneLoop's rounds) made it.
func (w *agentWatcher) agentSubstate() (sub string, n uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hook != "" && !(w.hookStale && w.hook == api.SubstateWorking) {
		return w.hook, w.reads
	}
	return w.pane, w.reads
}

// readHook reads the agent's presence from the node and records the
// substate a hook reported ("" when the record's source is not hook, or
// it cannot be read). A hook report other than WORKING ends the
// staleness an interrupt set.
func (w *agentWatcher) readHook(ctx context.Context) {
	hook := ""
	if p, err := w.c.AgentPresence(ctx, w.cfg.ID); err == nil && p.State == api.PresenceAwake && p.Source == api.SourceHook {
		hook = p.Substate
	}
	w.mu.Lock()
	w.hook = hook
	if hook != api.SubstateWorking {
		w.hookStale = false
	}
	w.mu.Unlock()
}

// scheduleTmux is the scheduler's scheduling of a tmux agent: with no batch
// being typed, the waiting messages go as one batch if the agent is not
// WORKING (and a reading newer than the last batch says so); else each is
// reported queued once, and if one interrupts, the interrupt key goes to
// the pane once. start marks an item running; the batch's results come
// back on done. It reports whether messages wait, so the scheduler asks again
// after a pane poll.
func (w *agentWatcher) scheduleTmux(ctx context.Context, q *tmuxQueue, items []*item, start func(*item), done chan<- finished) bool {
	if q.typing > 0 {
		return false
	}
	var pending []*item
	for _, it := range items {
		// quiet: held, the cursor stays before it; fork: a fork of the
		// agent runs it, never the pane (fork.go).
		if !it.done && !it.running && it.forUs && it.mode != PolicyQuiet && it.mode != PolicyFork {
			pending = append(pending, it)
		}
	}
	if len(pending) == 0 {
		return false
	}
	// Judge on a reading that began after the newest waiting message came
	// (a hook's WORKING reported just before it must count) and after the
	// last batch was typed (a pane still showing the old prompt must not
	// take a second batch).
	need := q.after
	for _, it := range pending {
		need = max(need, it.readFrom)
	}
	sub, n := w.agentSubstate()
	if n <= need {
		return true
	}
	if sub != api.SubstateWorking {
		waited := false
		for _, it := range pending {
			waited = waited || it.queued
			start(it)
		}
		q.typing = len(pending)
		go func() {
			for _, f := range w.deliverBatch(ctx, pending, waited) {
				done <- f
			}
		}()
		return false
	}
	var interrupt []uint64
	for _, it := range pending {
		if !it.queued {
			it.queued = true
			q.bg.Add(1)
			go func() {
				defer q.bg.Done()
				w.reportReceipt(ctx, it.m, api.ReceiptQueued)
			}()
		}
		if w.interrupts(it) && !it.interruptAsked {
			it.interruptAsked = true
			interrupt = append(interrupt, it.m.Seq)
		}
	}
	if len(interrupt) > 0 {
		q.bg.Add(1)
		go func() {
			defer q.bg.Done()
			if err := w.opts.Tmux.InterruptWith(ctx, w.cfg.TmuxTarget, w.cfg.InterruptKey); err != nil {
				if ctx.Err() == nil {
					w.log.Warn("watcher: cannot interrupt the agent; its urgent mail waits for idle", "target", w.cfg.TmuxTarget, "err", err)
				}
				return
			}
			// Only now: nothing is typed before the key went. A turn
			// interrupted does not end with the hook's Stop, so its
			// WORKING no longer counts; the pane tells.
			w.mu.Lock()
			w.hookStale = true
			for _, seq := range interrupt {
				w.interruptedFor[seq] = true
			}
			w.mu.Unlock()
			w.log.Info("watcher: interrupted the agent for urgent mail", "target", w.cfg.TmuxTarget, "key", w.cfg.InterruptKey)
		}()
	}
	return true
}

// deliverBatch types its (in seq order) into the pane as one BatchText,
// then, for each, reports the receipt (interrupted for those the agent was
// interrupted for, delivered for the others) and marks it read. A message
// already answered (an incident of an earlier try) or in a chain too deep
// is left out. A delivery tmux cannot confirm is reported to each sender
// as an incident, never as delivered. ctx ending before the text was
// typed hands every message back (again).
func (w *agentWatcher) deliverBatch(ctx context.Context, its []*item, waited bool) []finished {
	out := make([]finished, 0, len(its))
	var send []*item
	for _, it := range its {
		m := it.m
		if _, err := w.c.Message(ctx, ReplyID(w.cfg.ID, m), api.Local); err == nil {
			w.log.Info("watcher: already answered", "id", m.ID)
			w.takeInterrupted(m.Seq)
			out = append(out, finished{it: it})
			continue
		} else if ctx.Err() != nil {
			return again(its)
		}
		if depth := w.threadDepth(ctx, m); depth > w.cfg.MaxThreadDepth {
			w.log.Warn("watcher: not delivering: reply chain too deep", "id", m.ID, "depth", depth, "max_thread_depth", w.cfg.MaxThreadDepth)
			w.takeInterrupted(m.Seq)
			out = append(out, finished{it: it})
			continue
		}
		send = append(send, it)
	}
	if len(send) == 0 {
		return out
	}
	ms := make([]*api.Message, len(send))
	for i, it := range send {
		ms[i] = it.m
	}
	err := w.opts.Tmux.Deliver(ctx, w.cfg.TmuxTarget, BatchText(ms, waited))
	if ctx.Err() != nil {
		return again(its)
	}
	for _, it := range send {
		m := it.m
		if err != nil {
			w.log.Warn("watcher: tmux delivery failed; posting an incident", "id", m.ID, "target", w.cfg.TmuxTarget, "err", err)
			if w.post(ctx, incident(m, w.cfg.ID, "could not deliver", fmt.Sprintf("tmux delivery to %s failed: %v", w.cfg.TmuxTarget, err))) != nil {
				return again(its)
			}
			w.takeInterrupted(m.Seq)
			out = append(out, finished{it: it})
			continue
		}
		state := api.ReceiptDelivered
		if w.takeInterrupted(m.Seq) {
			state = api.ReceiptInterrupted
		}
		w.reportReceipt(ctx, m, state)
		if !w.retry(ctx, "mark read", func() error {
			_, err := w.c.MarkRead(ctx, w.cfg.ID, m.ID, 0)
			return err
		}) {
			// Typed already: the cursor may pass it; only the read mark is lost.
			out = append(out, finished{it: it})
			continue
		}
		w.log.Info("watcher: delivered to tmux", "id", m.ID, "target", w.cfg.TmuxTarget, "state", state, "batch", len(send))
		out = append(out, finished{it: it})
	}
	return out
}

// takeInterrupted reports whether the interrupt key went for the message
// at seq, and forgets it: the message is finished.
func (w *agentWatcher) takeInterrupted(seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := w.interruptedFor[seq]
	delete(w.interruptedFor, seq)
	return ok
}

// again hands every item back to be delivered later.
func again(its []*item) []finished {
	out := make([]finished, len(its))
	for i, it := range its {
		out[i] = finished{it: it, again: true}
	}
	return out
}

// reportReceipt records state (queued, delivered, interrupted) of m for
// the agent, retrying transient errors until ctx ends; a refusal (the
// message is not in the inbox, the rules blocked it, a node that has no
// such route) is logged, not retried: the receipt is a report, delivery
// does not wait on it.
func (w *agentWatcher) reportReceipt(ctx context.Context, m *api.Message, state string) {
	w.retry(ctx, "report receipt "+state, func() error {
		_, err := w.c.ReportReceipt(ctx, w.cfg.ID, m.ID, state)
		if err != nil && (errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrConflict) || errors.Is(err, api.ErrForbidden) || errors.Is(err, api.ErrInvalid)) {
			w.log.Warn("watcher: receipt report refused", "id", m.ID, "state", state, "err", err)
			return nil
		}
		return err
	})
}
