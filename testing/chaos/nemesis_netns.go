package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/maos-project/maos/testing/harness"
)

// The nemeses of network splits beyond partition-leader. Those marked
// NetnsOnly need a namespace-mode cluster (Config.Netns), where a cut
// stops every plane (Raft, forwarding, gossip): on loopback only Raft is
// cut, so an isolated or bridged node would still forward and gossip,
// and a one-way cut cannot be made at all. They are appended to Nemeses
// after the ones every mode runs.
var netNemeses = []Nemesis{
	{Name: "split-minority", Doc: "cut a random minority of followers off from the leader's majority, heal after the hold", inject: splitMinority},
	{Name: "isolate-node", Doc: "cut a random node off from every other on every plane (--netns), heal after the hold", inject: isolateNode, NetnsOnly: true},
	{Name: "bridge", Doc: "cut the leader from every follower but one, which still sees both sides (non-transitive; --netns)", inject: bridgeLeader, NetnsOnly: true},
	{Name: "one-way-leader", Doc: "drop every packet the leader sends to the others, not theirs to it (--netns)", inject: oneWayLeader, NetnsOnly: true},
}

func init() { Nemeses = append(Nemeses, netNemeses...) }

// NemesesFor lists the nemeses a cluster of the given mode can run, in
// Nemeses' order: every one in namespace mode, all but the NetnsOnly ones
// on loopback.
func NemesesFor(netns bool) []Nemesis {
	var out []Nemesis
	for _, n := range Nemeses {
		if netns || !n.NetnsOnly {
			out = append(out, n)
		}
	}
	return out
}

// splitMinority cuts ⌊n/2⌋ random followers off from the leader and the
// rest: the majority keeps its leader and commits, the minority must
// commit nothing.
func splitMinority(_ context.Context, c *harness.Cluster, r *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	fs := c.Others(l)
	r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	minority := fs[:len(c.Nodes())/2]
	if err := c.Partition(minority); err != nil {
		return nil, nil, err
	}
	return minority, c.Heal, nil
}

// isolateNode cuts one random node, leader or follower, off from every
// other node.
func isolateNode(_ context.Context, c *harness.Cluster, r *rand.Rand) ([]*harness.Node, func() error, error) {
	if _, err := c.Leader(); err != nil {
		return nil, nil, err
	}
	nodes := c.Nodes()
	n := nodes[r.IntN(len(nodes))]
	if err := c.Partition([]*harness.Node{n}); err != nil {
		return nil, nil, err
	}
	return []*harness.Node{n}, c.Heal, nil
}

// bridgeLeader leaves the leader one follower, the bridge, and cuts it
// from every other follower; the bridge sees both sides. The leader keeps
// a quorum through the bridge (on 3 nodes: itself and the bridge), while
// the others, cut from the leader but not from the bridge, time out and
// call elections the bridge may answer.
func bridgeLeader(_ context.Context, c *harness.Cluster, r *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	fs := c.Others(l)
	if len(fs) < 2 {
		return nil, nil, fmt.Errorf("bridge needs at least 3 nodes, the cluster has %d", len(c.Nodes()))
	}
	b := fs[r.IntN(len(fs))]
	far := c.Others(l, b)
	if err := c.CutBetween([]*harness.Node{l}, far); err != nil {
		return nil, nil, err
	}
	return append([]*harness.Node{l, b}, far...), c.Heal, nil
}

// oneWayLeader drops what the leader sends to every other node; theirs
// reach it. No TCP connection works either way (its handshake needs
// both), so the others elect a leader; gossip's UDP still flows to the
// old leader.
func oneWayLeader(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	if err := c.CutOneWay([]*harness.Node{l}, c.Others(l)); err != nil {
		return nil, nil, err
	}
	return []*harness.Node{l}, c.Heal, nil
}
