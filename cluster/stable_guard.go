package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// stableGuard is the stable store raft saves its term and vote to, closed
// to raft's writes before the store itself is closed. hashicorp/raft's
// network transport can still be inside a heartbeat it began before
// Shutdown after Shutdown returned (it does not wait for its connection
// goroutines); a higher term that heartbeat saves would reach a closed
// bolt file, and raft panics on a failed save ("failed to save current
// term: database not open"; hashicorp/raft#717, seen here in a test's
// Close). Once raft is shut down it never reads what it would write, so
// the guard drops those writes.
type stableGuard struct {
	raft.StableStore
	mu     sync.RWMutex
	closed bool
}

// close makes every later write a no-op; a write under way finishes first.
func (g *stableGuard) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Set stores k, unless the guard is closed.
func (g *stableGuard) Set(k, v []byte) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return g.StableStore.Set(k, v)
}

// SetUint64 stores k, unless the guard is closed.
func (g *stableGuard) SetUint64(k []byte, v uint64) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return g.StableStore.SetUint64(k, v)
}
