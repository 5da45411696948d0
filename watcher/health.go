package watcher

import "time"

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

// Health is a snapshot of an agent's task counters.
type Health struct {
	TasksRunning   int
	TasksSucceeded int
	TasksFailed    int
	LastError      string // the last failure's words, "" for none yet
	MeanDurationMS int64  // over the reported completions, 0 before one
}

// taskRunning counts a task run starting (+1) or ending (-1).
func (w *agentWatcher) taskRunning(delta int) {
	w.mu.Lock()
	w.stats.running += delta
	w.mu.Unlock()
	w.wakeHeartbeat()
}

// taskEnded counts a task's end: succeeded, else failed with lastErr; d
// is the time from claim to a reported completion, 0 when nothing was
// reported (the claim was lost).
func (w *agentWatcher) taskEnded(succeeded bool, d time.Duration, lastErr string) {
	w.mu.Lock()
	if succeeded {
		w.stats.succeeded++
	} else {
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

// health is the counters now.
func (w *agentWatcher) health() Health {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := Health{TasksRunning: w.stats.running, TasksSucceeded: w.stats.succeeded, TasksFailed: w.stats.failed,
		LastError: w.stats.lastError}
	if w.stats.reported > 0 {
		h.MeanDurationMS = (w.stats.total / time.Duration(w.stats.reported)).Milliseconds()
	}
	return h
}
