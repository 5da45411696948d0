package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/maos-project/maos/api"
)

// Membership changes as an operator makes them: remove a node from the
// Raft configuration through the API (DELETE /v1/cluster/nodes/{id}, what
// `maosctl cluster remove` calls), add a fresh node on a new address that
// joins through a member, and wait until a node has caught up with the
// leader. They use only the API and the Node lifecycle, so they work the
// same whatever network the nodes run on.

// removeTimeout bounds one remove request; a node forwards it to the
// leader and retries through an election itself.
const removeTimeout = 10 * time.Second

// joinAddrLocked is the API address a new node joins through: the first
// member that runs, else the first member. c.mu must be held and
// c.nodes not empty.
func (c *Cluster) joinAddrLocked() string {
	for _, n := range c.nodes {
		if n.Running() {
			return n.APIAddr()
		}
	}
	return c.nodes[0].APIAddr()
}

// argsID is the id whose Options.NodeArgs n runs: its own, or the
// original node's when n replaced one (a replacement of a replacement runs
// the original's too).
func (c *Cluster) argsID(n *Node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cmp.Or(c.argsOf[n.ID], n.ID)
}

// allNodes is the members and the removed nodes: what Close stops and
// reports on.
func (c *Cluster) allNodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(append([]*Node(nil), c.nodes...), c.removed...)
}

// Removed returns the nodes RemoveNode took out of the cluster, in the
// order it did.
func (c *Cluster) Removed() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.removed...)
}

// RemoveNode removes n from the Raft configuration through the API of the
// live members (any of them: a follower forwards to the leader), retrying
// through another member after a retryable error, until the member it
// asked no longer lists n among its voters (a follower may learn of the
// change a moment after the leader committed it: the next poll asks again)
// or the wait timeout passes.
// A 404 from a retry (an earlier attempt removed it, its answer lost)
// counts as done. Then n is no longer a member: Nodes, Live and the
// cluster-wide waits leave it out; Close still stops it and reports its
// exits. n is not stopped: kill or stop it first, as an operator
// replacing a dead host would (a removed node that still runs steps down
// and serves nothing the cluster counts on).
//
// Errors: n is not a member; no live member to ask; a final API error
// (4xx other than 404); the wait timeout (ErrTimeout) naming the last
// error or the voters still seen.
func (c *Cluster) RemoveNode(n *Node) error {
	if !slices.Contains(c.Nodes(), n) {
		return fmt.Errorf("harness: remove %s: not a member of the cluster", n.ID)
	}
	var last *Node
	err := WaitFor(c.opts.WaitTimeout, "the cluster to drop "+n.ID+" from its voters", func() error {
		others := c.Others(n)
		var via *Node
		for _, o := range others {
			if o.Live() && o != last {
				via = o
				break
			}
		}
		if via == nil {
			for _, o := range others {
				if o.Live() {
					via = o
					break
				}
			}
		}
		if via == nil {
			return fmt.Errorf("no live member to ask; %s", c.describe())
		}
		last = via
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
		err := via.Client().Remove(ctx, n.ID)
		cancel()
		switch {
		case err == nil, errors.Is(err, api.ErrNotFound):
		case api.Classify(err).Retry():
			return fmt.Errorf("via %s: %w", via.ID, err)
		default:
			return Permanent(fmt.Errorf("via %s: %w", via.ID, err))
		}
		st, err := via.Status(statusTimeout)
		if err != nil {
			return fmt.Errorf("status of %s: %w", via.ID, err)
		}
		if slices.ContainsFunc(st.Voters, func(v api.Voter) bool { return v.ID == n.ID }) {
			return fmt.Errorf("%s (leader %s) still lists %s among its voters", via.ID, st.LeaderID, n.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("harness: remove %s: %w", n.ID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.nodes, n); i >= 0 {
		c.nodes = slices.Delete(c.nodes, i, i+1)
		c.removed = append(c.removed, n)
	}
	return nil
}

// ReplaceNode replaces a dead (or stopped) member as an operator replaces
// a host: it removes old from the configuration (RemoveNode), then adds a
// fresh node (the next id, a new data dir and new addresses) that joins
// through a live member and runs what old ran (the Options.NodeArgs old
// ran with: its own, or those of the node it replaced; its watcher
// agents, say), and waits until the new node has caught up
// with the leader (WaitCaughtUp). It returns the new node, also on a
// catch-up timeout (with the error), so the caller can look at it.
//
// Errors: old still runs (kill or stop it first), or an error of
// RemoveNode, the start or WaitCaughtUp.
func (c *Cluster) ReplaceNode(old *Node) (*Node, error) {
	if old.Running() {
		return nil, fmt.Errorf("harness: replace %s: it still runs (pid %d): kill or stop it first", old.ID, old.PID())
	}
	if err := c.RemoveNode(old); err != nil {
		return nil, err
	}
	n, err := c.addNode(c.argsID(old))
	if err != nil {
		return n, fmt.Errorf("harness: replace %s: %w", old.ID, err)
	}
	if _, err := c.WaitCaughtUp(n, c.opts.WaitTimeout); err != nil {
		return n, fmt.Errorf("harness: replace %s by %s: %w", old.ID, n.ID, err)
	}
	return n, nil
}

// WaitCaughtUp waits until n has applied every entry the leader had
// committed when the wait began, up to timeout, and returns that commit
// index. It works under load: the target is fixed at the start, so a log
// that keeps growing does not move it. n must be live; the leader is the
// one the live members agree on (Leader).
//
// Errors: no leader within timeout; n's status unreadable or behind at the
// timeout (ErrTimeout, naming its applied index and the target).
func (c *Cluster) WaitCaughtUp(n *Node, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	var target uint64
	err := WaitFor(timeout, "the leader's commit index", func() error {
		l, err := c.waitLeader(time.Until(deadline), "the live nodes", c.Live)
		if err != nil {
			return Permanent(err)
		}
		st, err := l.Status(statusTimeout)
		if err != nil {
			return fmt.Errorf("status of the leader %s: %w", l.ID, err)
		}
		if st.State != "leader" {
			return fmt.Errorf("%s is %s now", l.ID, st.State)
		}
		target = st.CommitIndex
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("harness: %s catching up: %w", n.ID, err)
	}
	err = WaitFor(time.Until(deadline), fmt.Sprintf("%s to apply the leader's commit index %d", n.ID, target), func() error {
		if !n.Live() {
			return Permanent(fmt.Errorf("%s is not live", n.ID))
		}
		st, err := n.Status(statusTimeout)
		if err != nil {
			return err
		}
		if st.AppliedIndex < target {
			return fmt.Errorf("%s applied %d of %d (commit index %d)", n.ID, st.AppliedIndex, target, st.CommitIndex)
		}
		return nil
	})
	if err != nil {
		return target, fmt.Errorf("harness: %w", err)
	}
	return target, nil
}

// WaitHealthy waits up to timeout until the live members agree on a
// leader, every member runs (none down or paused) and each answers
// /readyz: the state a rolling restart waits for before it takes the next
// node down.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, n := range c.Nodes() {
		if !n.Live() {
			return fmt.Errorf("harness: cluster not healthy: %s is %s", n.ID, c.nodeState(n))
		}
	}
	if _, err := c.WaitLeader(time.Until(deadline)); err != nil {
		return err
	}
	for _, n := range c.Nodes() {
		if err := n.WaitReady(time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}
