package fsm

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestRestartKeepsStateAndSkipsReplayedEntries(t *testing.T) {
	logs := mixedLog(t, 3, 1, 120)
	path := filepath.Join(t.TempDir(), "state.db")

	f := openAt(t, path)
	applyChunks(f, logs[:80], func() int { return 16 })
	before := dump(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f = openAt(t, path)
	defer func() { _ = f.Close() }()
	if got := f.AppliedIndex(); got != 80 {
		t.Fatalf("AppliedIndex after reopen = %d, want 80", got)
	}
	if got := dump(t, f); got != before {
		t.Fatalf("Dump after reopen differs from before Close")
	}

	// raft replays the log from its last snapshot (here: from the start),
	// first one by one, then in a batch.
	for i, l := range logs[:80] {
		if r := applyOne(f, l); r != nil {
			t.Fatalf("replayed entry %d: result %v, want nil", i+1, resultString(r))
		}
	}
	for i, r := range f.ApplyBatch(logs[:80]) {
		if r != nil {
			t.Fatalf("replayed entry %d in a batch: result %v, want nil", i+1, resultString(r))
		}
	}
	if got := dump(t, f); got != before {
		t.Errorf("replaying applied entries changed the state")
	}
	if got := f.AppliedIndex(); got != 80 {
		t.Errorf("AppliedIndex after replay = %d, want 80", got)
	}

	// A batch straddling the stored index applies only the new part.
	results := f.ApplyBatch(logs[70:100])
	for i, r := range results[:10] {
		if r != nil {
			t.Errorf("entry %d (≤ applied): result %s, want nil", 71+i, resultString(r))
		}
	}
	newResults := 0
	for _, r := range results[10:] {
		if r != nil {
			newResults++
		}
	}
	if newResults == 0 {
		t.Errorf("entries 81..100 gave no results; they were not applied")
	}
	applyChunks(f, logs[100:], func() int { return 7 })
	if got := f.AppliedIndex(); got != 120 {
		t.Errorf("AppliedIndex = %d, want 120", got)
	}

	// The outcome equals a node that never restarted.
	ref, _ := openTemp(t)
	applyChunks(ref, logs, func() int { return 1 })
	if got, want := dump(t, f), dump(t, ref); got != want {
		t.Errorf("restarted node's Dump differs from a node that never restarted")
	}
}

func TestRestartKeepsTimestampsMonotonic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f := openAt(t, path)
	first := mustSendResult(t, applyOne(f, sendEntry(t, 1, baseTS+int64(time.Second), testMessage(msgID(1), "general", "one"))))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openAt(t, path)
	defer func() { _ = f.Close() }()
	// Proposed by a node whose clock is a minute behind.
	second := mustSendResult(t, applyOne(f, sendEntry(t, 2, baseTS-int64(time.Minute), testMessage(msgID(2), "general", "two"))))
	if !second.Timestamp.After(first.Timestamp) {
		t.Errorf("timestamp after restart %s is not after %s", second.Timestamp, first.Timestamp)
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	f, path := openTemp(t)
	mustSendResult(t, applyOne(f, sendEntry(t, 1, baseTS, testMessage(msgID(1), "general", "hi"))))

	g, err := Open(path, Options{Logger: quietLogger, LockTimeout: 100 * time.Millisecond})
	if err == nil {
		_ = g.Close()
		t.Fatal("second Open of a held state file succeeded")
	}
	if g != nil {
		t.Errorf("second Open returned a non-nil FSM with its error")
	}
	if !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("error = %q, want it to say the file is locked by another process", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error = %q, want it to name the file", err)
	}

	// The first holder is unaffected.
	if _, err := f.Message(msgID(1)); err != nil {
		t.Errorf("first FSM after the failed Open: %v", err)
	}
	// Once released, the file opens and keeps its state.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Open(path, Options{Logger: quietLogger, LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	defer h.Close()
	if h.AppliedIndex() != 1 {
		t.Errorf("AppliedIndex = %d, want 1", h.AppliedIndex())
	}
}

func TestOpenBadPath(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing-dir", "state.db"), Options{Logger: quietLogger})
	if err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
	if errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "state.db") {
		t.Errorf("error = %v, want one naming the file", err)
	}
}

func TestApplyAfterClosePanics(t *testing.T) {
	f, _ := openTemp(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("ApplyBatch after Close did not panic")
		}
	}()
	f.ApplyBatch([]*raft.Log{{Type: raft.LogNoop, Index: 1}})
}
