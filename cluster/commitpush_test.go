package cluster_test

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/fsm"
)

// After a lone write the leader pushes the commit index with one no-op
// entry, which every follower applies along with the write; then the
// cluster is idle again: the no-op's own apply proposes nothing more.
// The commit timeout is the longest allowed, so a follower that had only
// raft's tick to learn from would still trail (the speed itself is a
// figure in docs/PERFORMANCE.md, not an assertion).
func TestLeaderPushesTheCommitIndexOnce(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.WithConfig(func(cfg *cluster.Config) {
		cfg.CommitTimeout = cluster.MaxCommitTimeout
	}))
	ctx := clustertest.Context(t)
	l := c.Leader()
	res, err := l.Client.Send(ctx, clustertest.Msg("codex", "push", "hello"))
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	write := res.Seq
	var last uint64
	clustertest.WaitFor(t, 10*time.Second, "a no-op behind the write, applied on every node", func() bool {
		last, _, _ = l.RaftIndexes()
		for _, n := range c.Nodes {
			if n.FSM().AppliedIndex() < last {
				return false
			}
		}
		e, err := l.RaftEntry(last)
		return err == nil && last > write && entryOp(t, e) == api.OpNoop
	})
	cmd := l.FSM().CommandIndex()
	if cmd < write || cmd >= last {
		t.Fatalf("last command %d, want the write's %d or later and before the no-op at %d", cmd, write, last)
	}
	for _, n := range c.Nodes {
		if got := n.FSM().CommandIndex(); got != cmd {
			t.Errorf("%s: last command index %d, want %d (a no-op is not a command)", n.ID(), got, cmd)
		}
	}
	// Give a loop that answers its own no-op the time of many round trips
	// to show itself.
	time.Sleep(300 * time.Millisecond)
	if now, _, _ := l.RaftIndexes(); now != last || l.FSM().CommandIndex() != cmd {
		t.Fatalf("leader's last index went from %d to %d (last command %d → %d) while idle: no-ops beget no-ops", last, now, cmd, l.FSM().CommandIndex())
	}
}

func entryOp(t *testing.T, e *raft.Log) api.Op {
	t.Helper()
	if e.Type != raft.LogCommand {
		return api.Op(e.Type.String())
	}
	cmd, err := fsm.DecodeCommand(e.Data)
	if err != nil {
		t.Fatalf("decode entry %d: %v", e.Index, err)
	}
	return cmd.Op
}
