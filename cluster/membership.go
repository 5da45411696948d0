package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// A Node is what the API serves (transport.NewServer): its proposer
// (apply.go), its state, its membership (here) and its presence
// (presence.go).
var _ transport.Backend = (*Node)(nil)

// Status is this node's view of the cluster.
func (n *Node) Status(ctx context.Context) (api.Status, error) {
	leaderID := n.leaderID()
	st := api.Status{
		NodeID:         n.cfg.NodeID,
		Version:        n.cfg.Version,
		ClusterID:      n.fsm.ClusterID(),
		ClusterIDs:     true,
		StateVersion:   n.fsm.MaxStateVersion(),
		ClusterVersion: n.fsm.ClusterVersion(),
		State:          stateName(n.raft.State()),
		LeaderID:       leaderID,
		Term:           n.raft.CurrentTerm(),
		CommitIndex:    max(n.raft.CommitIndex(), n.fsm.AppliedIndex()),
		AppliedIndex:   n.fsm.AppliedIndex(),
		LastIndex:      n.raft.LastIndex(),
		APIAddr:        n.cfg.APIAddr,
		RaftAddr:       n.cfg.RaftAdvertise,
		Voters:         []api.Voter{},

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
	// Voters' API addresses from the registry only: clients (the console's
	// cluster view) call them with their tokens, and what gossip
	// advertises is anyone's to claim (GET /v1/cluster/members shows it).
	apiAddrs := make(map[string]string, len(nodes))
	for _, info := range nodes {
		apiAddrs[info.NodeID] = info.APIAddr
	}
	state, now := n.raft.State(), time.Now()
	for _, s := range f.Configuration().Servers {
		v := api.Voter{ID: string(s.ID), RaftAddr: string(s.Address), APIAddr: apiAddrs[string(s.ID)],
			Suffrage: suffrageName(s.Suffrage)}
		n.reach(&v, state, leaderID, now)
		st.Voters = append(st.Voters, v)
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
		return fmt.Errorf("%w: no leader known", api.ErrNotReady)
	}
	if a, c := n.fsm.AppliedIndex(), n.raft.CommitIndex(); a < c {
		return fmt.Errorf("%w: catching up: applied index %d, commit index %d", api.ErrNotReady, a, c)
	}
	return nil
}

// Join adds a voter (on the leader; a follower forwards), and records its
// API address. Joining a node that is already a voter at the same address
// only refreshes its registration, so a retried join (or a node restarted
// at the same id and address) is harmless. A join whose id is a voter at
// another Raft address, or whose Raft address is another voter's, is
// refused with an error wrapping api.ErrConflict (409) naming that voter,
// unless req.Replace says it takes the voter's place on purpose, and even
// then while the old voter's Raft address still answers (checkReplaced).
// Every change is audited (NODE_JOIN, NODE_REPLACE).
func (n *Node) Join(ctx context.Context, req api.JoinRequest) error {
	_, err := leaderDo(ctx, n, true, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, n.addVoter(ctx, req)
	}, func(ctx context.Context, c *client.Client) (struct{}, error) {
		return struct{}{}, c.Join(ctx, req)
	})
	return err
}

// replaceProbeTimeout bounds the dial that tells whether a voter a join
// would replace still answers on its Raft address.
const replaceProbeTimeout = time.Second

func (n *Node) addVoter(ctx context.Context, req api.JoinRequest) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	id, addr := raft.ServerID(req.NodeID), raft.ServerAddress(req.RaftAddr)
	member := false
	var replaced []raft.Server
	for _, s := range f.Configuration().Servers {
		switch {
		case s.ID == id && s.Address == addr:
			member = true
		case s.ID == id || s.Address == addr:
			replaced = append(replaced, s)
		}
	}
	for _, s := range replaced {
		if err := n.checkReplaced(ctx, req, s); err != nil {
			return err
		}
	}
	if !member {
		// No version entry commits between the check and the AddVoter
		// (raiseClusterVersion holds the lock from its question to its
		// entry), so the node cannot miss a rise it could not apply.
		n.versionMu.Lock()
		defer n.versionMu.Unlock()
		if err := n.checkJoinVersion(ctx, req); err != nil {
			return err
		}
	}
	for _, s := range replaced {
		if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return fmt.Errorf("cluster: join %s: remove the voter it replaces, %s: %w", req.NodeID, s.ID, err)
		}
		n.logger.Warn("replaced a voter on request", "old_id", s.ID, "old_raft_addr", s.Address, "id", req.NodeID, "raft_addr", req.RaftAddr)
		n.auditMembership(ctx, api.NodeEventReplace, req.NodeID,
			fmt.Sprintf("replaced voter %s at raft %s with raft %s, api %s", s.ID, s.Address, req.RaftAddr, req.APIAddr))
	}
	if !member {
		if err := n.raft.AddVoter(id, addr, 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return fmt.Errorf("cluster: join %s: %w", req.NodeID, err)
		}
		n.logger.Info("added voter", "id", req.NodeID, "raft_addr", req.RaftAddr, "api_addr", req.APIAddr)
		n.auditMembership(ctx, api.NodeEventJoin, req.NodeID,
			fmt.Sprintf("added as a voter at raft %s, api %s", req.RaftAddr, req.APIAddr))
	}
	data, err := fsm.Encode(api.OpRegisterNode, n.cfg.Now().UnixNano(),
		api.RegisterNodeCommand{NodeID: req.NodeID, APIAddr: req.APIAddr, RaftAddr: req.RaftAddr})
	if err != nil {
		return err
	}
	if _, err = applyAs[*fsm.NodeInfo](n, data); err != nil {
		return err
	}
	if len(replaced) > 0 {
		n.raiseClusterVersion() // the server replaced may have held it down
	}
	return nil
}

// checkReplaced decides whether the join req may take the place of voter
// old, which has its id or its Raft address: only with req.Replace, and
// only once old's Raft address no longer accepts connections (an address
// the joining node itself now holds cannot be asked, and is not). The
// refusal wraps api.ErrConflict and says how to replace a dead node.
func (n *Node) checkReplaced(ctx context.Context, req api.JoinRequest, old raft.Server) error {
	what := fmt.Sprintf("node id %s is already a voter at raft address %s", old.ID, old.Address)
	if string(old.ID) != req.NodeID {
		what = fmt.Sprintf("raft address %s is already voter %s's", old.Address, old.ID)
	}
	if !req.Replace {
		return &api.ConflictError{Reason: fmt.Sprintf(
			"join of %s (raft %s) refused: %s. Give each node its own --node-id and addresses; "+
				"to replace a dead node on purpose, start the new one with --replace (maosd) or run "+
				"maosctl cluster join --replace, which is refused while %s still answers", req.NodeID, req.RaftAddr, what, old.Address)}
	}
	if old.Address == raft.ServerAddress(req.RaftAddr) {
		return nil
	}
	d := net.Dialer{Timeout: replaceProbeTimeout}
	conn, err := d.DialContext(ctx, "tcp", string(old.Address))
	if cerr := ctx.Err(); cerr != nil {
		return cerr // the caller gave up: no answer is no proof the voter is gone
	}
	if err != nil {
		return nil // gone: the replacement may go ahead
	}
	_ = conn.Close()
	return &api.ConflictError{Reason: fmt.Sprintf(
		"join of %s --replace refused: %s and it still answers there; stop that node "+
			"(or remove it: maosctl cluster remove %s) before replacing it", req.NodeID, what, old.ID)}
}

// auditMembership records a change of the Raft configuration this leader
// made in the audit trail (api.OpNodeEvent). The change is done whatever
// happens to its audit line, so a failure to record it is logged, not
// returned.
func (n *Node) auditMembership(ctx context.Context, event, nodeID, reason string) {
	if id := transport.IdentityFrom(ctx); id != nil && id.TokenID != "" && !transport.IsForwarded(ctx) {
		reason += ", by " + id.TokenID
	}
	if len(reason) > api.MaxNodeEventReason {
		reason = reason[:api.MaxNodeEventReason]
	}
	cmd := api.NodeEventCommand{ID: fmt.Sprintf("%s-%s-%s-%d", n.cfg.NodeID, nodeID, event, n.cfg.Now().UnixNano()),
		NodeID: nodeID, Event: event, Reason: strings.ToValidUTF8(reason, "")}
	if err := n.proposeNodeEvent(cmd); err != nil {
		n.logger.Warn("could not record a membership change in the audit trail", "node", nodeID, "event", event, "error", err)
	}
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
					n.raiseClusterVersion() // the server removed may have held it down
					n.auditMembership(ctx, api.NodeEventRemove, nodeID, fmt.Sprintf("removed from the voters (raft %s)", s.Address))
				}
				return struct{}{}, err
			}
		}
		return struct{}{}, fmt.Errorf("cluster: remove: node %s is not in the configuration: %w", nodeID, api.ErrNotFound)
	}, func(ctx context.Context, c *client.Client) (struct{}, error) {
		return struct{}{}, c.Remove(ctx, nodeID)
	})
	return err
}

// Snapshot makes this node snapshot its state now and returns the snapshot
// that covers the latest applied entry (the existing one when nothing was
// applied since).
func (n *Node) Snapshot(ctx context.Context) (api.SnapshotResponse, error) {
	out := api.SnapshotResponse{NodeID: n.cfg.NodeID}
	err := n.raft.Snapshot().Error()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return out, fmt.Errorf("cluster: snapshot: %w", err)
	}
	metas, lerr := n.snaps.List()
	if lerr != nil {
		return out, fmt.Errorf("cluster: snapshot: list: %w", lerr)
	}
	if len(metas) == 0 {
		return out, fmt.Errorf("%w: nothing to snapshot yet: %v", api.ErrBadRequest, err)
	}
	out.ID, out.Index, out.Term = metas[0].ID, metas[0].Index, metas[0].Term
	return out, nil
}

// TransferLeadership hands leadership to nodeID ("" for the most
// up-to-date follower) and waits, up to RetryTimeout, until a new leader is
// known.
func (n *Node) TransferLeadership(ctx context.Context, nodeID string) (api.TransferResponse, error) {
	return leaderDo(ctx, n, true, func(ctx context.Context) (api.TransferResponse, error) {
		if nodeID == n.cfg.NodeID {
			// Already there: a transfer to the current leader is a no-op.
			return api.TransferResponse{LeaderID: nodeID}, nil
		}
		var f raft.Future
		if nodeID == "" {
			f = n.raft.LeadershipTransfer()
		} else {
			addr, ok := n.serverAddr(nodeID)
			if !ok {
				return api.TransferResponse{}, fmt.Errorf("cluster: transfer: node %s is not a voter: %w", nodeID, api.ErrNotFound)
			}
			f = n.raft.LeadershipTransferToServer(raft.ServerID(nodeID), addr)
		}
		if err := f.Error(); err != nil {
			return api.TransferResponse{}, &applyError{err: fmt.Errorf("cluster: transfer: %w", err)}
		}
		from := n.cfg.NodeID
		for {
			if id := n.leaderID(); id != "" && id != from {
				n.auditTransfer(from, id)
				return api.TransferResponse{LeaderID: id}, nil
			}
			select {
			case <-ctx.Done():
				return api.TransferResponse{}, &applyError{err: fmt.Errorf("cluster: transfer: no new leader yet: %w", ctx.Err())}
			case <-time.After(20 * time.Millisecond):
			}
		}
	}, func(ctx context.Context, c *client.Client) (api.TransferResponse, error) {
		return c.TransferLeadership(ctx, nodeID)
	})
}

// auditTransfer records, in the background, a leadership transfer this
// node handed over: the new leader proposes it, so it goes through
// forwarding (bounded by RetryTimeout) like any write of a follower.
func (n *Node) auditTransfer(from, to string) {
	cmd := api.NodeEventCommand{ID: fmt.Sprintf("%s-%s-%s-%d", from, to, api.NodeEventTransfer, n.cfg.Now().UnixNano()),
		NodeID: to, Event: api.NodeEventTransfer, Reason: "leadership transferred from " + from + " on request"}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RetryTimeout)
		defer cancel()
		go func() {
			select {
			case <-n.shutdown:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := n.Apply(ctx, api.OpNodeEvent, cmd); err != nil {
			n.logger.Warn("could not record a leadership transfer in the audit trail", "to", to, "error", err)
		}
	}()
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
