package cluster

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// Commit push. hashicorp/raft tells a follower that an entry is committed
// only in the next AppendEntries it sends it: the next write's, or, with
// no further write, the one its CommitTimeout tick sends. A follower
// applies an entry, and wakes its streams, only then. A short commit
// timeout made delivery to a follower's stream fast but kept an idle
// leader sending each follower an empty AppendEntries every few
// milliseconds forever (a tenth of a core per node at 2 ms).
//
// With a long commit timeout (at least CommitPushAbove; maosd
// --raft-commit-timeout 500ms) the tick is a fallback and the leader
// pushes the commit index when it moves: once it has
// applied a command and its log holds nothing newer that would carry the
// index, it proposes an api.OpNoop, whose AppendEntries tells every
// follower the command is committed. At most one no-op is in flight;
// under load the writes that follow carry the index and none is
// proposed; an idle cluster proposes none.
//
// A no-op costs one log append (and its fsyncs) on each node, and a
// write that follows at once waits behind them: measured on the 2-core
// machine, c=1 p50 3.6-3.9 ms → 5.5 ms and delivery to a follower's
// stream no faster than the 2 ms tick (docs/PERFORMANCE.md). So the
// default stays the 2 ms tick (fast delivery, ~10% of a core per idle
// node) and the push is the choice of a farm that idles: the idle cost
// falls under 1% of a core. Raft gives no way to send the commit index
// without an entry while the tick is long. Raft's own entries (an
// election's no-op, a barrier) never reach the FSM, so a command
// committed behind one of them waits for the commit timeout.

// CommitPushAbove is the commit timeout from which the leader pushes the
// commit index (below it raft's own tick is soon enough).
const CommitPushAbove = 50 * time.Millisecond

// commitPushLoop runs on every node for its life and acts while it leads,
// when the commit timeout is at least CommitPushAbove.
func (n *Node) commitPushLoop() {
	defer n.wg.Done()
	if n.cfg.CommitTimeout < CommitPushAbove {
		return
	}
	noop, err := fsm.Encode(api.OpNoop, 0, struct{}{})
	if err != nil {
		panic(err) // a constant op and body
	}
	var pushed uint64 // the last command a no-op was proposed behind
	for {
		// Taken before the check, so an apply during it (or during the
		// no-op's own round trip) wakes the next one.
		changed := n.fsm.Changed()
		if cmd := n.fsm.CommandIndex(); cmd > pushed && n.needsCommitPush() {
			pushed = cmd
			if err := n.raft.Apply(noop, n.cfg.ApplyTimeout).Error(); err != nil {
				n.logger.Debug("pushing the commit index failed; followers learn it at the commit timeout", "error", err)
			}
		}
		select {
		case <-n.shutdown:
			return
		case <-changed:
		}
	}
}

// needsCommitPush reports whether this node leads and every entry of its
// log is applied: nothing in flight will carry the commit index.
func (n *Node) needsCommitPush() bool {
	return n.raft.State() == raft.Leader && n.raft.LastIndex() <= n.raft.AppliedIndex()
}
