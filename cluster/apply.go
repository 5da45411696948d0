package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Apply proposes op with body through Raft: on the leader directly, from a
// follower as the encoded entry, batched with the other writes it forwards
// meanwhile, through the leader's /v1/internal/entries (ApplyEntries
// there; batch.go), retried through elections (leaderDo). The result is
// the state machine's answer as JSON. Every write of the API, sends
// included, comes this way.
//
// An op that needs a higher state version than the cluster committed is
// refused here, before anything is proposed (fsm.FSM.CheckVersion: an
// *api.ClusterVersionError, 409): the one gate of the versions, since
// every write of the API is proposed here. The node's own state decides;
// the version never goes down, so a node that has applied a version may
// propose what it allows, and one still behind refuses until it catches
// up.
func (n *Node) Apply(ctx context.Context, op api.Op, body any) (json.RawMessage, error) {
	if err := n.fsm.CheckVersion(op, body); err != nil {
		return nil, err
	}
	data, err := fsm.Encode(op, n.cfg.Now().UnixNano(), body)
	if err != nil {
		return nil, err
	}
	return leaderDo(ctx, n, true,
		func(context.Context) (json.RawMessage, error) { return n.applyJSON(data) },
		func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			res, err := n.batch.do(ctx, c.Addr(), c, data)
			n.metrics.Forward(err)
			return res, err
		})
}

// ApplyEntry commits an entry a follower encoded and forwarded: leader
// only, never forwarded again.
func (n *Node) ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error) {
	if n.raft.State() != raft.Leader {
		return nil, fmt.Errorf("%w: node %s (leader is %q)", api.ErrNotLeader, n.cfg.NodeID, n.leaderID())
	}
	return n.applyJSON(entry)
}

// ApplyEntries commits a batch of entries a follower encoded and forwarded
// in one request: leader only, never forwarded again. The entries go to
// raft together, so they share its log append and replication, and each
// gets its own index and result (see transport.Proposer).
func (n *Node) ApplyEntries(ctx context.Context, entries [][]byte) ([]api.EntryOutcome, error) {
	if n.raft.State() != raft.Leader {
		return nil, fmt.Errorf("%w: node %s (leader is %q)", api.ErrNotLeader, n.cfg.NodeID, n.leaderID())
	}
	start := time.Now()
	futures := make([]raft.ApplyFuture, len(entries))
	for i, e := range entries {
		futures[i] = n.raft.Apply(e, n.cfg.ApplyTimeout)
	}
	outs := make([]api.EntryOutcome, len(entries))
	for i, f := range futures {
		res, err := applyResult[any](n, f, start)
		var out json.RawMessage
		if err == nil {
			out, err = resultJSON(res)
		}
		outs[i] = api.EntryOutcome{Result: out, Err: err}
	}
	return outs, nil
}

// applyJSON commits an encoded entry on the leader and returns the state
// machine's result as JSON.
func (n *Node) applyJSON(data []byte) (json.RawMessage, error) {
	res, err := applyAs[any](n, data)
	if err != nil {
		return nil, err
	}
	return resultJSON(res)
}

// resultJSON encodes a state machine's result for the wire.
func resultJSON(res any) (json.RawMessage, error) {
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode an entry's result: %w", err)
	}
	return out, nil
}

// Linearize makes the next local read see every entry committed before the
// call (Strong); Local returns at once. On a follower it asks the leader for
// a read index (confirmed with a quorum) and waits until its own state has
// applied it, so strong reads are served by whichever node was asked.
func (n *Node) Linearize(ctx context.Context, c api.Consistency) error {
	if c != api.Strong {
		return nil
	}
	n.metrics.StrongRead()
	idx, err := leaderDo(ctx, n, false,
		func(ctx context.Context) (uint64, error) { return n.readIndex(ctx) },
		func(ctx context.Context, cl *client.Client) (uint64, error) { return cl.ReadIndex(ctx) })
	if err != nil {
		return err
	}
	return n.fsm.WaitApplied(ctx, idx)
}

// ReadIndex serves a follower's Linearize: leader only.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if n.raft.State() != raft.Leader {
		return 0, fmt.Errorf("%w: node %s (leader is %q)", api.ErrNotLeader, n.cfg.NodeID, n.leaderID())
	}
	return n.readIndex(ctx)
}

// readIndex confirms leadership and returns the commit index to wait for.
// A new leader first commits an entry of its own term (establishLeadership)
// so that index covers every earlier term.
func (n *Node) readIndex(context.Context) (uint64, error) {
	if n.readyTerm.v.Load() != n.raft.CurrentTerm() {
		if err := n.establishLeadership(); err != nil {
			return 0, err
		}
	}
	commit := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, err
	}
	return commit, nil
}

// State is the node's state machine as the API reads it: read-only, after
// Linearize. (FSM is the whole of it, for the node's owner.)
func (n *Node) State() transport.Reader { return n.fsm }

// IsLeader reports whether this node is the Raft leader now: what
// a2ahost's push Deliverer holds as its lease (one deliverer at a time; a
// new leader takes over from the replicated cursor).
func (n *Node) IsLeader() bool { return n.raft != nil && n.raft.State() == raft.Leader }
