package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// clusterVersionRetry is how often a leader whose cluster runs a lower
// state version than its own build's asks the servers again whether it may
// raise it (besides at the start of its term and after it changed the
// configuration): the status calls that answer it cost one request per
// server, and only while a rolling upgrade is under way.
const clusterVersionRetry = 3 * time.Second

// statusTimeout bounds one status call of the version check.
const statusTimeout = 2 * time.Second

// raiseClusterVersion commits the cluster's state version
// (api.OpClusterVersion) when it would rise: to the lowest of the
// versions the servers of the Raft configuration report (this node's
// build's for itself, Status.StateVersion for the others; a build before
// versions reports none, which is 1). Every server, not only the voters,
// since every one applies the log: a server whose build would not know a
// version's ops keeps the version down, so the entry never reaches a node
// that cannot apply it. A server that does not answer keeps it where it is
// until the next try. Apply never lowers it. Best effort and bounded: it
// runs in the background, one at a time, and the leader tries again every
// clusterVersionRetry while the version is below its own
// (watchLeadership).
func (n *Node) raiseClusterVersion() {
	if n.fsm.ClusterVersion() >= n.fsm.MaxStateVersion() || !n.raisingVersion.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.raisingVersion.Store(false)
		defer n.versionChecks.Add(1)
		n.lastVersionTry.Store(time.Now().UnixNano())
		n.versionMu.Lock() // against a join admitted meanwhile (addVoter)
		defer n.versionMu.Unlock()
		runs := n.fsm.ClusterVersion()
		lowest, who := n.lowestServerVersion()
		if lowest <= runs {
			if who != n.lastVersionHold.Swap(who) {
				n.logger.Info("the cluster's state version waits for a server", "version", runs, "server", who)
			}
			return
		}
		data, err := fsm.Encode(api.OpClusterVersion, n.cfg.Now().UnixNano(), api.ClusterVersionCommand{Version: lowest})
		if err == nil {
			_, err = applyAs[*api.ClusterVersionCommand](n, data)
		}
		if err != nil {
			n.logger.Warn("could not raise the cluster's state version", "from", runs, "to", lowest, "error", err)
			return
		}
		n.lastVersionHold.Store("")
		n.logger.Info("cluster state version raised", "from", runs, "to", lowest)
	}()
}

// lowestServerVersion is the lowest state version the servers of the
// Raft configuration report, and who reports it ("id (why)"); 0 when one
// cannot be asked.
func (n *Node) lowestServerVersion() (int, string) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0, "(configuration unreadable)"
	}
	lowest, who := n.fsm.MaxStateVersion(), n.cfg.NodeID
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			continue
		}
		v, err := n.serverVersion(id)
		if err != nil {
			return 0, fmt.Sprintf("%s (%v)", id, err)
		}
		if v < lowest {
			lowest, who = v, fmt.Sprintf("%s (its build applies version %d)", id, v)
		}
	}
	return lowest, who
}

// serverVersion asks the node id, at its registered API address, which
// state version its build applies: 1 for a build that says nothing.
func (n *Node) serverVersion(id string) (int, error) {
	addr := n.apiAddrOf(id)
	if addr == "" {
		return 0, fmt.Errorf("no registered API address")
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	st, err := n.client(addr).Status(ctx)
	if err != nil {
		return 0, err
	}
	if st.NodeID != id {
		return 0, fmt.Errorf("its address %s answers as node %q", addr, st.NodeID)
	}
	return max(st.StateVersion, 1), nil
}

// versionDue reports whether the leader should ask again whether the
// cluster's version may rise (watchLeadership).
func (n *Node) versionDue() bool {
	return n.raft.State() == raft.Leader &&
		n.fsm.ClusterVersion() < n.fsm.MaxStateVersion() &&
		time.Since(time.Unix(0, n.lastVersionTry.Load())) >= clusterVersionRetry
}

// checkJoinVersion refuses a join of a node whose build cannot apply the
// cluster's committed version: it would refuse or misapply the ops the
// cluster now allows. The node says its version in the request; one that
// says nothing (a build before versions, or maosctl cluster join on its
// behalf) is asked at its API address, and admitted if it does not answer
// (a node that is not serving yet).
func (n *Node) checkJoinVersion(ctx context.Context, req api.JoinRequest) error {
	runs := n.fsm.ClusterVersion()
	if runs <= 1 {
		return nil
	}
	v := req.StateVersion
	if v == 0 {
		ctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		st, err := n.client(req.APIAddr).Status(ctx)
		if err != nil || st.NodeID != req.NodeID {
			n.logger.Warn("join: could not ask the node which state version its build applies; admitting it",
				"id", req.NodeID, "api_addr", req.APIAddr, "error", err)
			return nil
		}
		v = max(st.StateVersion, 1)
	}
	if v < runs {
		return &api.ConflictError{Reason: fmt.Sprintf(
			"join of %s refused: its build applies state versions up to %d and the cluster runs %d; "+
				"run a build of version %d or later on it", req.NodeID, v, runs, runs)}
	}
	return nil
}
