package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// A Node is what the API serves (transport.NewServer): its proposer
// (apply.go), its state, its membership (here) and its presence
// (presence.go).
var _ transport.Backend = (*Node)(nil)

// Status is this node's view of the cluster.
func (n *Node) Status(ctx context.Context) (transport.Status, error) {
	leaderID := n.leaderID()
	st := transport.Status{
		NodeID:       n.cfg.NodeID,
		State:        stateName(n.raft.State()),
		LeaderID:     leaderID,
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.fsm.AppliedIndex(),
		LastIndex:    n.raft.LastIndex(),
		APIAddr:      n.cfg.APIAddr,
		RaftAddr:     n.cfg.RaftAdvertise,
		Voters:       []transport.Voter{},

		GossipAddr:      n.GossipAddr(),
		GossipEncrypted: n.gossip != nil && len(n.cfg.GossipKey) > 0,
	}
	if addr, err := n.leaderAPIAddr(); err == nil {
		st.LeaderAPIAddr = addr
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return st, fmt.Errorf("cluster: status: %w", err)
	}
	nodes, err := n.fsm.Nodes()
	if err != nil {
		return st, fmt.Errorf("cluster: status: %w", err)
	}
	api := make(map[string]string, len(nodes))
	for _, info := range nodes {
		api[info.NodeID] = info.APIAddr
	}
	if n.gossip != nil {
		for _, m := range n.gossip.members() {
			if api[m.NodeID] == "" {
				api[m.NodeID] = m.APIAddr
			}
		}
	}
	for _, s := range f.Configuration().Servers {
		st.Voters = append(st.Voters, transport.Voter{
			ID: string(s.ID), RaftAddr: string(s.Address), APIAddr: api[string(s.ID)],
			Suffrage: suffrageName(s.Suffrage),
		})
	}
	return st, nil
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	default:
		return "shutdown"
	}
}

func suffrageName(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	default:
		return "staging"
	}
}

// Ready returns nil once the node knows a leader and has applied every
// entry it knows to be committed.
func (n *Node) Ready(ctx context.Context) error {
	if n.leaderID() == "" {
		return fmt.Errorf("%w: no leader known", transport.ErrNotReady)
	}
	if a, c := n.fsm.AppliedIndex(), n.raft.CommitIndex(); a < c {
		return fmt.Errorf("%w: catching up: applied index %d, commit index %d", transport.ErrNotReady, a, c)
	}
	return nil
}

// Join adds a voter (on the leader; a follower forwards), and records its
// API address. Joining a node that is already a voter at the same address
// only refreshes its registration, so a retried join is harmless; a known
// id at a new address, or a new id at a known address, replaces the old
// entry.
func (n *Node) Join(ctx context.Context, req transport.JoinRequest) error {
	_, err := leaderDo(ctx, n, true, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, n.addVoter(req)
	}, func(ctx context.Context, c *transport.Client) (struct{}, error) {
		return struct{}{}, c.Join(ctx, req)
	})
	return err
}

func (n *Node) addVoter(req transport.JoinRequest) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	id, addr := raft.ServerID(req.NodeID), raft.ServerAddress(req.RaftAddr)
	member := false
	for _, s := range f.Configuration().Servers {
		switch {
		case s.ID == id && s.Address == addr:
			member = true
		case s.ID == id || s.Address == addr:
			n.logger.Info("replacing a server before join", "old_id", s.ID, "old_addr", s.Address)
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return fmt.Errorf("cluster: join %s: remove old entry %s: %w", req.NodeID, s.ID, err)
			}
		}
	}
	if !member {
		if err := n.raft.AddVoter(id, addr, 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return fmt.Errorf("cluster: join %s: %w", req.NodeID, err)
		}
		n.logger.Info("added voter", "id", req.NodeID, "raft_addr", req.RaftAddr, "api_addr", req.APIAddr)
	}
	data, err := fsm.Encode(fsm.OpRegisterNode, n.cfg.Now().UnixNano(),
		fsm.RegisterNodeCommand{NodeID: req.NodeID, APIAddr: req.APIAddr, RaftAddr: req.RaftAddr})
	if err != nil {
		return err
	}
	_, err = applyAs[*fsm.NodeInfo](n, data)
	return err
}

// Remove takes a server out of the Raft configuration.
func (n *Node) Remove(ctx context.Context, nodeID string) error {
	_, err := leaderDo(ctx, n, true, func(ctx context.Context) (struct{}, error) {
		f := n.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return struct{}{}, err
		}
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == nodeID {
				err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error()
				if err == nil {
					n.logger.Info("removed server", "id", nodeID)
				}
				return struct{}{}, err
			}
		}
		return struct{}{}, fmt.Errorf("cluster: remove: node %s is not in the configuration: %w", nodeID, fsm.ErrNotFound)
	}, func(ctx context.Context, c *transport.Client) (struct{}, error) {
		return struct{}{}, c.Remove(ctx, nodeID)
	})
	return err
}

// Snapshot makes this node snapshot its state now and returns the snapshot
// that covers the latest applied entry (the existing one when nothing was
// applied since).
func (n *Node) Snapshot(ctx context.Context) (transport.SnapshotResponse, error) {
	out := transport.SnapshotResponse{NodeID: n.cfg.NodeID}
	err := n.raft.Snapshot().Error()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return out, fmt.Errorf("cluster: snapshot: %w", err)
	}
	metas, lerr := n.snaps.List()
	if lerr != nil {
		return out, fmt.Errorf("cluster: snapshot: list: %w", lerr)
	}
	if len(metas) == 0 {
		return out, fmt.Errorf("%w: nothing to snapshot yet: %v", transport.ErrBadRequest, err)
	}
	out.ID, out.Index, out.Term = metas[0].ID, metas[0].Index, metas[0].Term
	return out, nil
}

// TransferLeadership hands leadership to nodeID ("" for the most
// up-to-date follower) and waits, up to RetryTimeout, until a new leader is
// known.
func (n *Node) TransferLeadership(ctx context.Context, nodeID string) (transport.TransferResponse, error) {
	return leaderDo(ctx, n, true, func(ctx context.Context) (transport.TransferResponse, error) {
		if nodeID == n.cfg.NodeID {
			// Already there: a transfer to the current leader is a no-op.
			return transport.TransferResponse{LeaderID: nodeID}, nil
		}
		var f raft.Future
		if nodeID == "" {
			f = n.raft.LeadershipTransfer()
		} else {
			addr, ok := n.serverAddr(nodeID)
			if !ok {
				return transport.TransferResponse{}, fmt.Errorf("cluster: transfer: node %s is not a voter: %w", nodeID, fsm.ErrNotFound)
			}
			f = n.raft.LeadershipTransferToServer(raft.ServerID(nodeID), addr)
		}
		if err := f.Error(); err != nil {
			return transport.TransferResponse{}, &applyError{err: fmt.Errorf("cluster: transfer: %w", err)}
		}
		for {
			if id := n.leaderID(); id != "" && id != n.cfg.NodeID {
				return transport.TransferResponse{LeaderID: id}, nil
			}
			select {
			case <-ctx.Done():
				return transport.TransferResponse{}, &applyError{err: fmt.Errorf("cluster: transfer: no new leader yet: %w", ctx.Err())}
			case <-time.After(20 * time.Millisecond):
			}
		}
	}, func(ctx context.Context, c *transport.Client) (transport.TransferResponse, error) {
		return c.TransferLeadership(ctx, nodeID)
	})
}

func (n *Node) serverAddr(id string) (raft.ServerAddress, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id && s.Suffrage == raft.Voter {
			return s.Address, true
		}
	}
	return "", false
}
