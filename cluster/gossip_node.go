package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// How a node joins gossip, keeps it whole, and audits membership changes.
//
//   - JoinVia (node.go) asks the member it was given for its status, which
//     carries the member's gossip address and whether its gossip is
//     encrypted, and joins gossip there before it asks to join Raft: a node
//     the cluster's gossip refuses (a wrong or missing --gossip-key) is
//     never added as a voter. Given a gossip address instead of an API
//     address, it joins gossip directly and takes the API address of a
//     member from the gossip metadata.
//   - reconnectGossip reaches, every GossipReconnectInterval, the Raft
//     members that gossip does not count as alive, through their API
//     addresses in the node registry. That is how a restarted node rejoins
//     gossip with no --join and how a gossip partition heals after memberlist
//     has given up on the other side.
//   - Node events (join, leave, dead) are proposed to the log by the leader
//     only, so each is audited once.

// maxGossipJoinFailures is how many failed gossip joins, with the member's
// API answering and both sides encrypted, make JoinVia give up: the key
// must differ.
const maxGossipJoinFailures = 5

// gossipStatusTimeout bounds the status request that finds a member's
// gossip address.
const gossipStatusTimeout = 5 * time.Second

// joinGossipVia joins gossip through the member at addr (an API or a
// gossip address) and returns the API address to join Raft through. An
// error wrapping ErrGossipRefused is final; any other is worth a retry.
// fails counts failed joins across calls.
func (n *Node) joinGossipVia(ctx context.Context, addr string, fails *int) (string, error) {
	g := n.gossip
	if g == nil {
		return addr, nil
	}
	sctx, cancel := context.WithTimeout(ctx, gossipStatusTimeout)
	st, serr := n.client(addr).Status(sctx)
	cancel()
	if serr != nil {
		// An HTTP(S) server answered: no gossip member listens there, and
		// asking memberlist would only wait for its timeout. The caller
		// names the mismatch (notAnAPI).
		if httpMismatch(serr.Error()) != "" {
			return "", serr
		}
		// Not an API that answers: perhaps a gossip address.
		if _, jerr := g.join([]string{addr}); jerr != nil {
			return "", fmt.Errorf("no maos API answers at %s (%v), and no gossip member either (%v)", addr, serr, jerr)
		}
		apiAddr := g.apiAddrVia(addr)
		if apiAddr == "" {
			return "", fmt.Errorf("joined gossip at %s, but no member there gossips an API address yet", addr)
		}
		n.logger.Info("joined gossip through a gossip address", "via", addr, "api_addr", apiAddr)
		return apiAddr, nil
	}
	if st.GossipAddr == "" {
		n.logger.Warn("the member joined through runs without gossip; joining Raft only", "via", addr, "member", st.NodeID)
		return addr, nil
	}
	switch mine := len(n.cfg.GossipKey) > 0; {
	case st.GossipEncrypted && !mine:
		return "", fmt.Errorf("%w: the cluster's gossip (node %s at %s) is encrypted and this node has no gossip key: start it with the cluster's --gossip-key",
			ErrGossipRefused, st.NodeID, st.GossipAddr)
	case !st.GossipEncrypted && mine:
		return "", fmt.Errorf("%w: this node has a gossip key but the cluster's gossip (node %s at %s) is not encrypted: drop --gossip-key, or give every node the same key",
			ErrGossipRefused, st.NodeID, st.GossipAddr)
	}
	if _, err := g.join([]string{st.GossipAddr}); err != nil {
		*fails++
		if st.GossipEncrypted && *fails >= maxGossipJoinFailures {
			return "", fmt.Errorf("%w: node %s's API at %s answers but its gossip at %s refused this node %d times: this node's --gossip-key differs from the cluster's (last error: %v)",
				ErrGossipRefused, st.NodeID, addr, st.GossipAddr, *fails, err)
		}
		return "", fmt.Errorf("join gossip at %s (node %s): %w", st.GossipAddr, st.NodeID, err)
	}
	return addr, nil
}

// reconnectGossip runs until shutdown: at once, then every
// GossipReconnectInterval, it joins the Raft members gossip does not count
// as alive.
func (n *Node) reconnectGossip() {
	defer n.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-n.shutdown:
			return
		case <-t.C:
		}
		n.rejoinMissing()
		t.Reset(n.cfg.GossipReconnectInterval)
	}
}

// rejoinMissing asks each Raft member that gossip counts as dead, left or
// unknown for its gossip address (through its registered API) and joins
// it there.
func (n *Node) rejoinMissing() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			continue
		}
		if n.gossip.statusOf(id) == transport.MemberAlive {
			continue
		}
		apiAddr := n.apiAddrOf(id)
		if apiAddr == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := n.client(apiAddr).Status(ctx)
		cancel()
		if err != nil || st.NodeID != id || st.GossipAddr == "" {
			continue
		}
		if _, err := n.gossip.join([]string{st.GossipAddr}); err != nil {
			n.logger.Debug("cannot reach a Raft member over gossip", "member", id, "gossip_addr", st.GossipAddr, "error", err)
			continue
		}
		n.logger.Info("joined gossip with a Raft member it was missing", "member", id, "gossip_addr", st.GossipAddr)
	}
}

// nodeEventWait bounds how long a node event waits for a leader to record
// it; nodeEventApplyTimeout bounds one proposal.
const (
	nodeEventWait         = 5 * time.Second
	nodeEventApplyTimeout = 3 * time.Second
)

// recordNodeEvent writes a membership change to the audit trail if this
// node leads. Every node sees every change, so a follower leaves it to the
// leader; when no leader is known (or the known one is the node that just
// died or left) it waits, bounded, for one. If none comes the event is
// dropped with a log line: the audit of membership is best effort, never a
// reason to block gossip.
func (n *Node) recordNodeEvent(ev nodeEvent) {
	// The id is fixed before the first proposal: one that timed out may
	// have committed, and the state machine audits an id once.
	cmd := api.NodeEventCommand{ID: fmt.Sprintf("%s-%s-%s-%d", n.cfg.NodeID, ev.node, ev.event, n.cfg.Now().UnixNano()),
		NodeID: ev.node, Event: ev.event, Reason: nodeEventReason(ev)}
	if cmd.Validate() != nil {
		return // a gossip member that is not a valid node id: not ours to audit
	}
	deadline := time.Now().Add(nodeEventWait)
	backoff := newBackoff()
	failures := 0
	for {
		leader := n.leaderID()
		switch {
		case n.raft.State() == raft.Leader:
			err := n.proposeNodeEvent(cmd)
			if err == nil {
				if ev.event == api.NodeEventDead {
					n.releaseLocksOf(ev.node)
				}
				return
			}
			failures++
			var refused *applyError
			if errors.As(err, &refused) || failures >= 3 {
				n.logger.Warn("could not record a node event in the audit trail", "member", ev.node, "event", ev.event, "error", err)
				return
			}
		case leader != "" && (leader != ev.node || ev.event == api.NodeEventJoin):
			return // the leader records it
		}
		if time.Now().After(deadline) {
			n.logger.Warn("no leader to record a node event in the audit trail; dropping it", "member", ev.node, "event", ev.event)
			return
		}
		if backoff.wait(context.Background(), n.shutdown) != nil {
			return
		}
	}
}

func (n *Node) proposeNodeEvent(cmd api.NodeEventCommand) error {
	data, err := fsm.Encode(api.OpNodeEvent, n.cfg.Now().UnixNano(), cmd)
	if err != nil {
		return err
	}
	f := n.raft.Apply(data, nodeEventApplyTimeout)
	if err := f.Error(); err != nil {
		return err
	}
	if err, ok := f.Response().(error); ok {
		return &applyError{err: err}
	}
	return nil
}

// nodeEventReason is the text of a node event's audit line.
func nodeEventReason(ev nodeEvent) string {
	switch ev.event {
	case api.NodeEventJoin:
		if ev.api != "" {
			return fmt.Sprintf("joined gossip at %s (api %s)", ev.addr, ev.api)
		}
		return "joined gossip at " + ev.addr
	case api.NodeEventLeave:
		return "left gossip (shut down) from " + ev.addr
	default:
		return "declared dead by gossip failure detection at " + ev.addr
	}
}

// releaseLocksOf releases the advisory locks held by the agents of a node
// declared dead, through a proposed command so every node agrees; an agent
// that comes back takes its locks again. Best effort, like the audit of the
// death itself.
func (n *Node) releaseLocksOf(node string) {
	if n.gossip == nil {
		return
	}
	holders := n.gossip.store.agentsOf(node)
	if len(holders) == 0 {
		return
	}
	cmd := api.ReleaseHolderLocksCommand{Holders: holders, Reason: "node " + node + " declared dead"}
	if cmd.Validate() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeEventWait)
	defer cancel()
	if _, err := n.Apply(ctx, api.OpReleaseHolderLocks, cmd); err != nil {
		n.logger.Warn("could not release the locks of a dead node's agents", "node", node, "agents", holders, "error", err)
	}
}
