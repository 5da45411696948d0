package watcher

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// runs is a Recorder that keeps what it was told.
type runs struct {
	mu  sync.Mutex
	got []string
}

func (r *runs) WatcherRun(agent, outcome string, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if took < 0 {
		outcome += " (negative time)"
	}
	r.got = append(r.got, agent+" "+outcome)
}

// Every run of an agent's command, each retry included, is told to the
// Recorder with its outcome.
func TestInvokeRecordsEachRun(t *testing.T) {
	rec := &runs{}
	w := &agentWatcher{cfg: agent(t, "agents:\n- id: w\n  command: [sh, -c, 'exit 3']\n  retries: 1\n"),
		log: slog.New(slog.DiscardHandler), opts: Options{Metrics: rec, BackoffBase: time.Millisecond}}
	w.invoke(context.Background(), Invocation{Argv: []string{"sh", "-c", "exit 3"}, Timeout: 10 * time.Second}, "m1", nil)
	w.invoke(context.Background(), Invocation{Argv: []string{"echo", "hi"}, Timeout: 10 * time.Second}, "m2", nil)
	w.invoke(context.Background(), Invocation{Argv: []string{"sleep", "5"}, Timeout: 50 * time.Millisecond}, "m3", nil)
	want := []string{"w " + RunError, "w " + RunError, "w " + RunOK, "w " + RunTimeout, "w " + RunTimeout}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != len(want) {
		t.Fatalf("recorded %q, want %q", rec.got, want)
	}
	for i := range want {
		if rec.got[i] != want[i] {
			t.Fatalf("recorded %q, want %q", rec.got, want)
		}
	}
}
