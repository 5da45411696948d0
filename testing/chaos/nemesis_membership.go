package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/maos-project/maos/testing/harness"
)

// Membership nemeses: what an operator does to a live cluster, under load.
// A majority stays up throughout, so besides the usual checks they promise
// availability (Nemesis.Available): no send refused for longer than an
// election (ElectionBound).

// membershipWait bounds each wait of a membership nemesis: a node caught
// up, the cluster healthy again.
const membershipWait = 30 * time.Second

// replaceNode SIGKILLs the leader, the node whose loss costs the most (an
// election before the cluster can even be asked to remove it), as a host
// dies; its heal is the operator's answer after the hold: remove the dead
// node from the configuration through the API, add a fresh node (new id,
// new data dir, new addresses; the dead node's watcher agents) that joins
// through a live member, and wait until it has caught up with the
// leader's commit index.
func replaceNode(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	victim, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	if err := victim.Kill(); err != nil {
		return nil, nil, err
	}
	heal := func() error {
		n, err := c.ReplaceNode(victim)
		if err != nil {
			return fmt.Errorf("replace-node: %w", err)
		}
		if _, err := c.WaitLeader(membershipWait); err != nil {
			return fmt.Errorf("replace-node: after adding %s: %w", n.ID, err)
		}
		return nil
	}
	return []*harness.Node{victim}, heal, nil
}

// rollingRestart restarts every node, one at a time, as an operator
// upgrading the cluster does: the followers first, the leader last; each
// a clean stop (SIGTERM), a start from its data dir, then a wait until it
// has caught up with the leader and the cluster is healthy (a leader, every
// node ready) before the next. The whole roll is the fault: its heal has
// nothing left to undo.
func rollingRestart(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	order := append(c.Others(l), l)
	for _, n := range order {
		if err := n.Restart(); err != nil {
			return nil, nil, fmt.Errorf("rolling-restart: %w", err)
		}
		if _, err := c.WaitCaughtUp(n, membershipWait); err != nil {
			return nil, nil, fmt.Errorf("rolling-restart: %w", err)
		}
		if err := c.WaitHealthy(membershipWait); err != nil {
			return nil, nil, fmt.Errorf("rolling-restart: after %s: %w", n.ID, err)
		}
	}
	return order, func() error { return nil }, nil
}

// RollingUpgrade is rolling-restart onto another build: every node in
// turn, followers first and the leader last, is stopped (SIGTERM), set to
// run the maosd binary at maosd (harness.Node.SetMaosd) and started on
// its data dir, then waited for until it caught up and the cluster is
// healthy; the first node upgraded then takes the leadership (with more
// than two nodes), so a leader of the new build runs beside nodes of the
// old one. It also checks the cluster's state version (fsm's, in each
// node's status; a build before versions reports none, which is 1): no
// node may report a version above 1 while any node still runs the old
// build, and once the last one is upgraded every node must report
// wantVersion within membershipWait. It is not in Nemeses: it needs the
// new build's path, and the cluster must start on the old one
// (Config.Maosd).
func RollingUpgrade(maosd string, wantVersion int) Nemesis {
	return Nemesis{
		Name: "rolling-upgrade", Available: true,
		Doc: "restart every node in turn onto another maosd build, leader last; the cluster's state version rises only after the last",
		inject: func(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
			l, err := c.Leader()
			if err != nil {
				return nil, nil, err
			}
			order := append(c.Others(l), l)
			for i, n := range order {
				if err := versionsAtMost(c, 1); err != nil {
					return nil, nil, fmt.Errorf("rolling-upgrade: before upgrading %s: %w", n.ID, err)
				}
				if err := n.Stop(); err != nil {
					return nil, nil, fmt.Errorf("rolling-upgrade: %w", err)
				}
				n.SetMaosd(maosd)
				if err := n.Start(); err != nil {
					return nil, nil, fmt.Errorf("rolling-upgrade: %w", err)
				}
				if _, err := c.WaitCaughtUp(n, membershipWait); err != nil {
					return nil, nil, fmt.Errorf("rolling-upgrade: %w", err)
				}
				if err := c.WaitHealthy(membershipWait); err != nil {
					return nil, nil, fmt.Errorf("rolling-upgrade: after %s: %w", n.ID, err)
				}
				if i == 0 && len(order) > 2 {
					// A leader of the new build while the others still
					// run the old one: it is the one that must keep the
					// version down.
					if err := transferTo(c, n); err != nil {
						return nil, nil, fmt.Errorf("rolling-upgrade: %w", err)
					}
				}
			}
			err = harness.WaitFor(membershipWait, fmt.Sprintf("every node to run state version %d", wantVersion), func() error {
				return versionsAre(c, wantVersion)
			})
			if err != nil {
				return nil, nil, fmt.Errorf("rolling-upgrade: after the last node: %w", err)
			}
			return order, func() error { return nil }, nil
		},
	}
}

// versionsAtMost fails when a live node reports a committed state version
// above v (a build before versions reports 0).
func versionsAtMost(c *harness.Cluster, v int) error {
	for _, n := range c.Live() {
		st, err := n.Status(5 * time.Second)
		if err != nil {
			return err
		}
		if st.ClusterVersion > v {
			return fmt.Errorf("%s runs state version %d while a node of the old build is a voter, want at most %d", n.ID, st.ClusterVersion, v)
		}
	}
	return nil
}

// versionsAre fails unless every node reports the committed state version v.
func versionsAre(c *harness.Cluster, v int) error {
	for _, n := range c.Nodes() {
		st, err := n.Status(5 * time.Second)
		if err != nil {
			return err
		}
		if st.ClusterVersion != v || st.StateVersion != v {
			return fmt.Errorf("%s: cluster version %d, its build's %d, want %d", n.ID, st.ClusterVersion, st.StateVersion, v)
		}
	}
	return nil
}

// transferTo hands the leadership to n and waits until the live nodes
// agree it leads.
func transferTo(c *harness.Cluster, n *harness.Node) error {
	return harness.WaitFor(membershipWait, "leadership to move to "+n.ID, func() error {
		l, err := c.Leader()
		if err != nil {
			return err
		}
		if l == n {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := l.Client().TransferLeadership(ctx, n.ID); err != nil {
			return fmt.Errorf("transfer from %s to %s: %w", l.ID, n.ID, err)
		}
		return fmt.Errorf("%s led when asked", l.ID)
	})
}
