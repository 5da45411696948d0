package watcher

import (
	"strings"
	"time"
	"unicode"

	"github.com/maos-project/maos/api"
)

// taskStats are an agent's task counters since its watcher started, for
// its heartbeats (seed 004's agent_health_check): guarded by
// agentWatcher.mu.
type taskStats struct {
	running   int
	succeeded int
	failed    int // completed with failure, or the claim lost
	lastError string
	reported  int           // completions accepted, which the mean is over
	total     time.Duration // their durations, claim to report
}

// taskRunning counts a task run starting (+1) or ending (-1).
func (w *agentWatcher) taskRunning(delta int) {
	w.mu.Lock()
	w.stats.running += delta
	w.mu.Unlock()
	w.wakeHeartbeat()
}

// taskOutcome is how a task's run ended, for the counters.
type taskOutcome int

const (
	runFailed    taskOutcome = iota // completed with failure, or the claim lost
	runSucceeded                    // completed with success or partial_success
	// runAwaits completed with requires_approval: the task is not done
	// (its approver decides it), so it counts neither way; a modified
	// one runs again and that run counts.
	runAwaits
)

// taskEnded counts a task run's end by its outcome, failed with lastErr;
// d is the time from claim to a reported completion, 0 when nothing was
// reported (the claim was lost).
func (w *agentWatcher) taskEnded(outcome taskOutcome, d time.Duration, lastErr string) {
	w.mu.Lock()
	switch outcome {
	case runSucceeded:
		w.stats.succeeded++
	case runFailed:
		w.stats.failed++
	}
	if lastErr != "" {
		w.stats.lastError = lastErr
	}
	if d > 0 {
		w.stats.reported++
		w.stats.total += d
	}
	w.mu.Unlock()
	w.wakeHeartbeat()
}

// health is the counters now, as a heartbeat carries them: the last
// error on one line, cut to what presence keeps.
func (w *agentWatcher) health() api.AgentHealth {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := api.AgentHealth{TasksRunning: w.stats.running, TasksSucceeded: w.stats.succeeded, TasksFailed: w.stats.failed,
		LastError: oneLine(w.stats.lastError, api.MaxPresenceLastError)}
	if w.stats.reported > 0 {
		h.MeanDurationMS = (w.stats.total / time.Duration(w.stats.reported)).Milliseconds()
	}
	return h
}

// oneLine is s with each run of control characters (newlines, tabs) and
// spaces made one space, trimmed, cut to at most n bytes of whole runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	return truncate(s, n)
}
