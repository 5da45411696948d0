package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// The clean-close marker exists only while the node is stopped after a
// clean Close: a crash while it runs leaves none, so the next start reads
// every page.
func TestCleanMarkerLifecycle(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, cleanMarkerFile)
	exists := func() bool {
		_, err := os.Stat(marker)
		return err == nil
	}
	n := startNode(t, "n1", dir, "", nil)
	if exists() {
		t.Fatal("a fresh node wrote the clean marker while running")
	}
	n.stop()
	if !exists() {
		t.Fatal("Close left no clean marker")
	}
	n = startNode(t, "n1", dir, "", nil, sameRaftAddr(n))
	if exists() {
		t.Fatal("the clean marker survived the restart: a crash now would skip the full check")
	}
	n.stop()
	if !exists() {
		t.Fatal("the second Close left no clean marker")
	}
}

func TestTakeCleanMarker(t *testing.T) {
	dir := t.TempDir()
	if clean, err := takeCleanMarker(dir); clean || err != nil {
		t.Fatalf("empty dir: %v, %v; want false, nil", clean, err)
	}
	if err := putCleanMarker(dir); err != nil {
		t.Fatal(err)
	}
	if clean, err := takeCleanMarker(dir); !clean || err != nil {
		t.Fatalf("after put: %v, %v; want true, nil", clean, err)
	}
	if clean, err := takeCleanMarker(dir); clean || err != nil {
		t.Fatalf("taken twice: %v, %v; want false, nil", clean, err)
	}
	if err := putCleanMarker(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("put into a missing dir succeeded")
	}
}
