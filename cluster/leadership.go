package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// watchLeadership reacts to leadership changes. When this node wins an
// election it commits a command of its own term at once: a registration of
// its API address, which is how followers find the leader (a follower's own
// address is registered when it joins). And raft's own no-op entry never
// reaches the FSM, so until
// a command of the new term is applied the FSM's applied index trails the
// commit index, strong reads would have nothing to wait for, and followers
// could not tell they are caught up.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	n.wg.Add(2) // legal here: this goroutine is itself counted
	go n.trimLoop()
	go n.taskTickLoop()
	obsCh := make(chan raft.Observation, 16)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	// The observer can drop events when its channel is full; a slow tick
	// makes sure a missed election is still acted on.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-n.shutdown:
			return
		case o := <-obsCh:
			if _, ok := o.Data.(raft.LeaderObservation); ok {
				n.beats.reset()
				n.signalLeaderChange()
			}
			n.beats.observe(o, time.Now())
		case <-tick.C:
		}
		if n.raft.State() == raft.Leader && n.readyTerm.v.Load() != n.raft.CurrentTerm() {
			if err := n.establishLeadership(); err != nil {
				n.logger.Warn("committing the first entry of the term failed", "error", err)
			}
		} else if n.raft.State() == raft.Leader && time.Since(time.Unix(0, n.lastIDTry.Load())) >= clusterIDRetry {
			n.fixClusterID()
		}
		if n.versionDue() {
			n.raiseClusterVersion()
		}
	}
}

// establishLeadership commits this node's registration in the current term
// and, once applied, marks the term ready for strong reads.
func (n *Node) establishLeadership() error {
	term := n.raft.CurrentTerm()
	data, err := fsm.Encode(api.OpRegisterNode, n.cfg.Now().UnixNano(),
		api.RegisterNodeCommand{NodeID: n.cfg.NodeID, APIAddr: n.cfg.APIAddr, RaftAddr: n.cfg.RaftAdvertise})
	if err != nil {
		return err
	}
	if _, err := applyAs[*fsm.NodeInfo](n, data); err != nil {
		return err
	}
	n.readyTerm.v.CompareAndSwap(n.readyTerm.v.Load(), term)
	n.logger.Info("leading", "term", term)
	n.fixClusterID()
	n.raiseClusterVersion()
	if n.cfg.AdminToken != "" {
		n.requireAuth()
	}
	return nil
}

// fixClusterID commits the cluster's id (api.OpClusterID) if the state has
// none: at the first term of a new cluster, and, for a cluster whose data
// dirs predate cluster ids, once every voter runs a build that applies it
// (votersWithoutClusterIDs): a node of an older build would skip the entry
// and, upgraded, hold no id while the others hold one. The first applied
// wins (apply refuses another). Best effort: it runs in the background,
// and the leader tries again every clusterIDRetry while the state has no
// id (watchLeadership).
func (n *Node) fixClusterID() {
	if n.fsm.ClusterID() != "" || !n.fixingID.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.fixingID.Store(false)
		n.lastIDTry.Store(time.Now().UnixNano())
		if who := n.votersWithoutClusterIDs(); who != "" {
			n.logger.Info("the cluster id waits until every voter applies cluster ids", "voter", who)
			return
		}
		var b [16]byte
		_, _ = rand.Read(b[:])
		id := "c" + hex.EncodeToString(b[:])
		data, err := fsm.Encode(api.OpClusterID, n.cfg.Now().UnixNano(), api.ClusterIDCommand{ClusterID: id})
		if err == nil {
			_, err = applyAs[*api.ClusterIDCommand](n, data)
		}
		if err != nil {
			n.logger.Warn("could not fix the cluster id", "error", err)
			return
		}
		n.logger.Info("cluster id fixed", "cluster_id", id)
	}()
}

// clusterIDRetry is how often a leader whose state has no cluster id tries
// again to fix one.
const clusterIDRetry = 10 * time.Second

// votersWithoutClusterIDs is the first voter, other than this node, that
// does not say (in its status, at its registered address) that its build
// applies cluster ids; "" when every one does.
func (n *Node) votersWithoutClusterIDs() string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "(configuration unreadable)"
	}
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			continue
		}
		addr := n.apiAddrOf(id)
		if addr == "" {
			return id
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := n.client(addr).Status(ctx)
		cancel()
		if err != nil || !st.ClusterIDs {
			return id
		}
	}
	return ""
}

// requireAuth records in the cluster config that the cluster runs with
// authentication, once: a member restarted without --auth then refuses to
// start. Best effort: a failure is logged and retried next term.
func (n *Node) requireAuth() {
	if cfg, err := n.fsm.Config(); err != nil || cfg.AuthRequired {
		return
	}
	data, err := fsm.Encode(api.OpSetConfig, n.cfg.Now().UnixNano(),
		api.SetConfigCommand{Key: "auth_required", Value: []byte("true")})
	if err == nil {
		_, err = applyAs[*api.ClusterConfig](n, data)
	}
	if err != nil {
		n.logger.Warn("could not record auth_required in the cluster config", "error", err)
		return
	}
	n.logger.Info("cluster config: auth_required=true (members restarted without --auth will refuse to start)")
}

// leaderChange returns a channel closed at the next leader change this node
// observes.
func (n *Node) leaderChange() <-chan struct{} {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.leaderChanged
}

func (n *Node) signalLeaderChange() {
	n.leaderMu.Lock()
	close(n.leaderChanged)
	n.leaderChanged = make(chan struct{})
	n.leaderMu.Unlock()
}
