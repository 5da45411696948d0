package fsm

import (
	"path/filepath"
	"testing"
)

// A state file opened with NoSync commits without fsync, keeps doing so
// after a restore swaps the file, and still reopens with everything
// applied after Close (whose free-list commit is synced, flushing the
// unsynced ones before it). Without NoSync every commit is synced.
func TestNoSyncStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := Open(path, Options{Logger: quietLogger, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.db.NoSync {
		t.Fatal("Open with NoSync: the bbolt file syncs every commit")
	}
	logs := mixedLog(t, 3, 1, 60)
	applyChunks(f, logs[:40], func() int { return 8 })
	snap := takeSnapshot(t, f) // syncs first; must not fail
	applyChunks(f, logs[40:], func() int { return 8 })
	if err := f.Restore(snap.Reader()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if !f.db.NoSync || f.AppliedIndex() != 40 {
		t.Fatalf("after Restore: NoSync %t, applied %d; want true, 40", f.db.NoSync, f.AppliedIndex())
	}
	applyChunks(f, logs[40:], func() int { return 8 })
	before := dump(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	g := openAt(t, path)
	defer func() { _ = g.Close() }()
	if g.db.NoSync {
		t.Fatal("Open without NoSync: the bbolt file skips fsync")
	}
	if got := g.AppliedIndex(); got != 60 {
		t.Fatalf("AppliedIndex after reopen = %d, want 60", got)
	}
	if dump(t, g) != before {
		t.Fatal("state after reopen differs from before Close")
	}
}
