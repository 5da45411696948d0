package system

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// isolatedSendTimeout bounds a send to the isolated old leader: longer
// than the node's own 10 s forwarding retry loop, so the node itself gives
// up and says so.
const isolatedSendTimeout = 20 * time.Second

// TestPartitionedLeaderIsReplaced cuts the leader of a 3-node cluster off
// from the two others (Raft traffic only, through the harness's proxies):
// the two elect a new leader and take sends, the isolated old leader
// acknowledges none of the sends it gets, and after the partition heals it
// follows the new leader and every node holds the same log -- without the
// old leader's unacknowledged entries. A restart of a partitionable node
// then keeps its addresses.
func TestPartitionedLeaderIsReplaced(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, Partitionable: true})
	for _, n := range c.Nodes() {
		host, _, err := net.SplitHostPort(n.RaftBindAddr())
		if err != nil || host != n.RaftIP() || n.RaftAddr() != n.Proxy().Addr() || n.Proxy().Target() != n.RaftBindAddr() {
			t.Fatalf("%s: raft advertised %s, bound %s, ip %s, proxy %s -> %s: want bound on its ip, advertising its proxy",
				n.ID, n.RaftAddr(), n.RaftBindAddr(), n.RaftIP(), n.Proxy().Addr(), n.Proxy().Target())
		}
	}
	const ch = "partition"
	batch := func(tag string, n int) []*api.Message { return taggedBatch("msg", ch, "alice", "bob", tag, n) }
	sends := sendAll(t, c, batch("before", 10), 30*time.Second, harness.SendOptions{})

	old, err := c.Leader()
	harness.NoErr(t, err)
	majority := c.Others(old)
	start := time.Now()
	harness.NoErr(t, c.Partition([]*harness.Node{old}, majority))
	if got, want := c.Partitions(), [][]string{{old.ID}, {majority[0].ID, majority[1].ID}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Partitions() = %v, want %v", got, want)
	}
	if !c.Cut(old, majority[0]) || c.Cut(majority[0], majority[1]) {
		t.Fatalf("Cut: old-%s %v, %s-%s %v", majority[0].ID, c.Cut(old, majority[0]),
			majority[0].ID, majority[1].ID, c.Cut(majority[0], majority[1]))
	}

	// Sends through the old leader, at once, while it may still think it
	// leads: none may be acknowledged.
	type result struct {
		id  string
		err error
	}
	isolated := batch("isolated", 3)
	results := make(chan result, len(isolated))
	for _, m := range isolated {
		sends[m.ID] = &sent{msg: m}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), isolatedSendTimeout)
			defer cancel()
			_, err := old.Client().Send(ctx, m)
			results <- result{m.ID, err}
		}()
	}

	// The majority elects a leader of its own and takes sends.
	next, err := c.LeaderAmong(30*time.Second, majority...)
	harness.NoErr(t, err)
	elected := time.Since(start)
	for id, s := range sendAll(t, c, batch("majority", 20), 30*time.Second, harness.SendOptions{Nodes: majority}) {
		sends[id] = s
	}

	// Every send through the old leader fails; wait for all of them before
	// healing, so none is still being retried by the old leader then.
	kinds := map[string]int{}
	serverGaveUp := true
	timeout := time.NewTimer(isolatedSendTimeout + 10*time.Second)
	defer timeout.Stop()
	for range isolated {
		var r result
		select {
		case r = <-results:
		case <-timeout.C:
			t.Fatal("a send through the isolated old leader did not return")
		}
		if r.err == nil {
			t.Errorf("the isolated old leader %s acknowledged %s", old.ID, r.id)
			continue
		}
		kinds[api.ErrorKind(r.err)]++
		var apiErr *api.APIError
		if !errors.As(r.err, &apiErr) {
			serverGaveUp = false
		} else if apiErr.Code != api.CodeOutcomeUnknown && apiErr.Code != api.CodeNoLeader {
			t.Errorf("send %s through the isolated old leader: %v; want outcome_unknown or no_leader", r.id, r.err)
		}
	}
	st, err := old.Status(5 * time.Second)
	harness.NoErr(t, err)
	if st.State == "leader" {
		t.Errorf("the isolated old leader %s still says it leads (term %d)", old.ID, st.Term)
	}
	var refused, cut int
	for _, n := range c.Nodes() {
		s := n.Proxy().Stats()
		refused, cut = refused+s.Refused, cut+s.Cut
	}
	if refused+cut == 0 {
		t.Error("no proxy refused or cut a connection during the partition")
	}
	t.Logf("partition of %s: %s elected in %s; isolated sends failed with %s; proxies refused %d and cut %d connections",
		old.ID, next.ID, elected.Round(time.Millisecond), countsLine(kinds), refused, cut)

	// Heal: the old leader follows and catches up.
	harness.NoErr(t, c.Heal())
	if c.Partitions() != nil || c.Cut(old, next) {
		t.Fatalf("after Heal: Partitions() = %v, cut %v", c.Partitions(), c.Cut(old, next))
	}
	leader, err := c.Leader()
	harness.NoErr(t, err)
	if leader == old {
		t.Fatalf("the old leader %s leads again after the heal, though its log is behind", old.ID)
	}
	harness.NoErr(t, c.WaitReady())
	index, err := c.WaitConverged()
	harness.NoErr(t, err)
	if st, err = old.Status(5 * time.Second); err != nil || st.State != "follower" || st.LeaderID != leader.ID {
		t.Fatalf("old leader %s after the heal: %+v, %v; want a follower of %s", old.ID, st, err, leader.ID)
	}
	rep := checkStored(t, c, []string{ch}, sends)
	if serverGaveUp && rep.unacked != 0 {
		t.Errorf("%d sends the isolated old leader failed are stored", rep.unacked)
	}
	if want := 30; rep.perChannel[ch] < want {
		t.Errorf("channel %s holds %d messages, want at least the %d acknowledged", ch, rep.perChannel[ch], want)
	}

	// A restarted partitionable node keeps its bind and proxy addresses.
	raftAddr, bind := old.RaftAddr(), old.RaftBindAddr()
	harness.NoErr(t, old.Restart())
	if old.RaftAddr() != raftAddr || old.RaftBindAddr() != bind {
		t.Fatalf("restart moved %s: raft %s bound on %s, was %s on %s", old.ID, old.RaftAddr(), old.RaftBindAddr(), raftAddr, bind)
	}
	harness.NoErr(t, c.WaitReady())
	for id, s := range sendAll(t, c, batch("after", 10), 30*time.Second, harness.SendOptions{}) {
		sends[id] = s
	}
	index, err = c.WaitConverged()
	harness.NoErr(t, err)
	rep = checkStored(t, c, []string{ch}, sends)
	t.Logf("%d messages stored identically on 3 nodes (applied index %d) after %s was partitioned, healed and restarted; leader %s",
		rep.perChannel[ch], index, old.ID, leader.ID)
}
