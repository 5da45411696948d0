package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Reachability of the voters as the answering node sees it (Status, issue
// 29), from what Raft and gossip already know, so a status costs no probe
// of other nodes:
//
//   - the leader, for each follower: Raft's heartbeats. A follower whose
//     heartbeats fail is unreachable since its last answer (raft's
//     FailedHeartbeatObservation carries it); one whose heartbeats go
//     through is reachable, without a time (raft does not export it).
//   - a follower, for its leader: raft's LastContact, unreachable once it
//     is older than the heartbeat timeout (when the follower would start
//     an election).
//   - any other node: gossip's view (alive, or dead or left since when it
//     was declared so); "unknown" without gossip, since a follower hears
//     from no one but its leader.

// heartbeats is what the leader's Raft observer said of its followers:
// for each follower whose heartbeats fail, when it last answered one and
// when a failure was last seen.
type heartbeats struct {
	mu     sync.Mutex
	failed map[string]failedBeat
}

type failedBeat struct{ lastContact, seen time.Time }

// beatStale is how old the last failure seen of a follower may be before
// it no longer counts: raft tries again at least every half heartbeat
// timeout plus one RPC timeout (10 s), and the observer may drop the
// resumed observation that would have cleared it.
const beatStale = 30 * time.Second

// observe records a heartbeat observation; other observations are ignored.
func (h *heartbeats) observe(o raft.Observation, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		if h.failed == nil {
			h.failed = map[string]failedBeat{}
		}
		h.failed[string(d.PeerID)] = failedBeat{lastContact: d.LastContact, seen: now}
	case raft.ResumedHeartbeatObservation:
		delete(h.failed, string(d.PeerID))
	}
}

// reset forgets every failure, at a change of leader: a new leader's
// replication starts afresh.
func (h *heartbeats) reset() {
	h.mu.Lock()
	h.failed = nil
	h.mu.Unlock()
}

// failing reports whether id's heartbeats fail now, and its last answer.
func (h *heartbeats) failing(id string, now time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.failed[id]
	if !ok || now.Sub(f.seen) > beatStale {
		return time.Time{}, false
	}
	return f.lastContact, true
}

// reach fills v's reachability as this node sees it now.
func (n *Node) reach(v *api.Voter, state raft.RaftState, leaderID string, now time.Time) {
	switch {
	case v.ID == n.cfg.NodeID:
		v.Reach = api.ReachSelf
		return
	case state == raft.Leader:
		v.Via, v.Reach = api.ViaRaft, api.ReachReachable
		if last, ok := n.beats.failing(v.ID, now); ok {
			v.Reach, v.LastContact = api.ReachUnreachable, last
		}
		return
	case v.ID == leaderID && state == raft.Follower:
		last := n.raft.LastContact()
		if !last.IsZero() {
			v.Via, v.Reach, v.LastContact = api.ViaRaft, api.ReachReachable, last.UTC()
			if now.Sub(last) > n.heartbeatTimeout() {
				v.Reach = api.ReachUnreachable
			}
			return
		}
	}
	v.Reach = api.ReachUnknown
	if n.gossip == nil {
		return
	}
	switch status, since := n.gossip.statusSince(v.ID); status {
	case transport.MemberAlive:
		v.Via, v.Reach = api.ViaGossip, api.ReachReachable
	case transport.MemberDead, transport.MemberLeft:
		v.Via, v.Reach, v.LastContact = api.ViaGossip, api.ReachUnreachable, since.UTC()
	}
}

// heartbeatTimeout is raft's: how long a follower goes without hearing
// from its leader before it starts an election.
func (n *Node) heartbeatTimeout() time.Duration {
	if n.cfg.HeartbeatTimeout > 0 {
		return n.cfg.HeartbeatTimeout
	}
	return raft.DefaultConfig().HeartbeatTimeout
}
