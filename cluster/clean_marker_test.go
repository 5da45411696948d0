package cluster

import (
	"path/filepath"
	"testing"
)

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
