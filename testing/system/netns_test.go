package system

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// gossipStatus is what n's memberlist says of the node id ("" if it lists
// no such member).
func gossipStatus(n *harness.Node, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.Client().Members(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range res.Members {
		if m.NodeID == id {
			return m.Status, nil
		}
	}
	return "", nil
}

// waitGossip waits until every node of seers says status of every node of
// seen (or, with status "alive", until they do; with anything else, until
// they say anything but alive).
func waitGossip(t *testing.T, seers, seen []*harness.Node, alive bool) {
	t.Helper()
	what := "dead or suspect"
	if alive {
		what = "alive"
	}
	harness.NoErr(t, harness.WaitFor(60*time.Second, fmt.Sprintf("the gossip of %v to call %v %s", ids(seers), ids(seen), what), func() error {
		for _, a := range seers {
			for _, b := range seen {
				st, err := gossipStatus(a, b.ID)
				if err != nil {
					return fmt.Errorf("%s: %v", a.ID, err)
				}
				if (st == "alive") != alive {
					return fmt.Errorf("%s says %s is %q", a.ID, b.ID, st)
				}
			}
		}
		return nil
	}))
}

func ids(nodes []*harness.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// TestNetnsPartitionCutsEveryPlane runs three nodes as hosts of their own
// (network namespaces on a private bridge, with auth, TLS and a gossip
// key) and isolates a follower: unlike the loopback harness's Raft-only
// cut, each plane is cut. Raft: the follower replicates nothing the
// majority commits. HTTP forwarding: a send through it, which it would
// forward to the leader it knows, is not acknowledged. Gossip: the
// majority's memberlist calls it dead and it calls them dead. The test
// process, a client on another host, reaches every node throughout. Heal
// restores all three: it catches up, its sends are forwarded, gossip says
// alive. Then a fourth node joins on an address of its own.
func TestNetnsPartitionCutsEveryPlane(t *testing.T) {
	harness.RequireNetns(t)
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, Netns: true})
	for _, n := range c.Nodes() {
		for what, addr := range map[string]string{"api": n.APIAddr(), "raft": n.RaftAddr(), "gossip": n.GossipAddr()} {
			if host, _, err := net.SplitHostPort(addr); err != nil || host != n.IP() || net.ParseIP(host).IsLoopback() {
				t.Fatalf("%s's %s address is %s, want one on its own non-loopback address %s", n.ID, what, addr, n.IP())
			}
		}
		st, err := n.Status(5 * time.Second)
		harness.NoErr(t, err)
		if !st.GossipEncrypted || c.Security() == nil {
			t.Fatalf("%s runs without a gossip key or security: %+v", n.ID, st)
		}
	}
	leader, err := c.Leader()
	harness.NoErr(t, err)
	followers := c.Others(leader)
	cut, other := followers[0], followers[1]
	majority := []*harness.Node{leader, other}
	const ch = "netns"
	sends := sendAll(t, c, taggedBatch("msg", ch, "alice", "bob", "before", 5), 30*time.Second, harness.SendOptions{})

	harness.NoErr(t, c.Partition([]*harness.Node{cut}))
	if got, want := c.Partitions(), [][]string{{cut.ID}, ids(majority)}; !slices.EqualFunc(got, want, func(a, b []string) bool {
		return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	}) {
		t.Fatalf("Partitions() = %v, want %v", got, want)
	}

	// HTTP forwarding: the isolated follower knows the leader's API
	// address, but cannot reach it. Sent at once, while it still knows a
	// leader: with Raft alone cut, it would forward and succeed.
	fwd := taggedBatch("msg", ch, "alice", "bob", "isolated", 1)[0]
	// Its outcome is unknown: bytes already in an open connection's send
	// queue are retransmitted until the cut heals, and may commit then.
	sends[fwd.ID] = &sent{msg: fwd}
	fwdErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), isolatedSendTimeout)
		defer cancel()
		_, err := cut.Client().Send(ctx, fwd)
		fwdErr <- err
	}()

	// Raft: the majority commits, the isolated follower gets none of it.
	for id, s := range sendAll(t, c, taggedBatch("msg", ch, "alice", "bob", "majority", 5), 30*time.Second, harness.SendOptions{Nodes: majority}) {
		sends[id] = s
	}
	select {
	case err := <-fwdErr:
		if err == nil {
			t.Fatalf("the isolated follower %s acknowledged %s: it forwarded through the cut", cut.ID, fwd.ID)
		}
		t.Logf("a send through the isolated follower %s: %v", cut.ID, err)
	case <-time.After(isolatedSendTimeout + 10*time.Second):
		t.Fatal("a send through the isolated follower did not return")
	}
	local, err := readChannel(cut.Client(), ch, api.Local)
	harness.NoErr(t, err)
	for _, m := range local {
		if s := sends[m.ID]; s == nil || m.ID == fwd.ID || strings.Contains(m.ID, "majority") {
			t.Errorf("the isolated follower %s stores %s", cut.ID, m.ID)
		}
	}
	if len(local) != 5 {
		t.Errorf("the isolated follower %s stores %d messages, want the 5 sent before the cut", cut.ID, len(local))
	}
	st, err := cut.Status(5 * time.Second)
	harness.NoErr(t, err)
	if st.State == "leader" {
		t.Errorf("the isolated follower %s leads (term %d)", cut.ID, st.Term)
	}

	// Nor did it reach the leader another way while cut.
	onLeader, err := readChannel(leader.Client(), ch, api.Strong)
	harness.NoErr(t, err)
	for _, m := range onLeader {
		if m.ID == fwd.ID {
			t.Errorf("%s, sent through the isolated follower, is on the leader %s during the cut (seq %d)", fwd.ID, leader.ID, m.Seq)
		}
	}

	// Gossip: each side calls the other dead.
	waitGossip(t, majority, []*harness.Node{cut}, false)
	waitGossip(t, []*harness.Node{cut}, majority, false)

	// Heal restores every plane.
	harness.NoErr(t, c.Heal())
	if c.Cut(cut, leader) || c.Partitions() != nil {
		t.Fatalf("after Heal: cut %v, partitions %v", c.Cut(cut, leader), c.Partitions())
	}
	waitGossip(t, c.Nodes(), c.Nodes(), true)
	_, err = c.Leader()
	harness.NoErr(t, err)
	harness.NoErr(t, c.WaitReady())
	after := taggedBatch("msg", ch, "alice", "bob", "healed", 3)
	for id, s := range sendAll(t, c, after, 30*time.Second, harness.SendOptions{Nodes: []*harness.Node{cut}}) {
		sends[id] = s
	}
	// A fresh node joins on an address of its own, as a replacement
	// host would, and takes sends.
	n4, err := c.AddNode()
	harness.NoErr(t, err)
	if host, _, _ := net.SplitHostPort(n4.APIAddr()); host != n4.IP() ||
		slices.ContainsFunc(c.Others(n4), func(n *harness.Node) bool { return n.IP() == n4.IP() }) {
		t.Fatalf("the added node %s serves on %s with address %s, want an address of its own", n4.ID, n4.APIAddr(), n4.IP())
	}
	harness.NoErr(t, c.WaitReady())
	for id, s := range sendAll(t, c, taggedBatch("msg", ch, "alice", "bob", "n4", 3), 30*time.Second, harness.SendOptions{Nodes: []*harness.Node{n4}}) {
		sends[id] = s
	}
	index, err := c.WaitConverged()
	harness.NoErr(t, err)
	rep := checkStored(t, c, []string{ch}, sends)
	t.Logf("%d messages stored identically on 4 nodes (applied index %d) after %s was cut off on every plane and healed, and %s joined",
		rep.perChannel[ch], index, cut.ID, n4.ID)
}
