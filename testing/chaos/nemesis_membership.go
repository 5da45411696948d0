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
