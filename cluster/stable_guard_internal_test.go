package cluster

import (
	"errors"
	"testing"
)

// countingStable is a raft.StableStore that counts writes and fails them
// once closed, as a closed bolt file does.
type countingStable struct {
	writes int
	closed bool
}

var errClosedStore = errors.New("database not open")

func (s *countingStable) Set(k, v []byte) error {
	if s.closed {
		return errClosedStore
	}
	s.writes++
	return nil
}
func (s *countingStable) Get(k []byte) ([]byte, error) { return nil, nil }
func (s *countingStable) SetUint64(k []byte, v uint64) error {
	return s.Set(k, nil)
}
func (s *countingStable) GetUint64(k []byte) (uint64, error) { return 0, nil }

// Before close the guard writes through; after it, a write (a heartbeat
// raft's transport was still handling) is dropped instead of reaching the
// closed store, whose error raft would panic on.
func TestStableGuardDropsWritesAfterClose(t *testing.T) {
	s := &countingStable{}
	g := &stableGuard{StableStore: s}
	if err := g.SetUint64([]byte("CurrentTerm"), 2); err != nil || s.writes != 1 {
		t.Fatalf("open guard: %v, %d writes", err, s.writes)
	}
	g.close()
	s.closed = true
	if err := g.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatalf("a term saved after close reached the closed store: %v", err)
	}
	if err := g.Set([]byte("LastVoteCand"), []byte("n2")); err != nil || s.writes != 1 {
		t.Fatalf("closed guard: %v, %d writes", err, s.writes)
	}
}
