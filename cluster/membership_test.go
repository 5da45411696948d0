package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
)

// Every node of a cluster reports the same cluster id, fixed by its first
// leader and replicated.
func TestClusterIDSameOnEveryNode(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	var id string
	clustertest.WaitFor(t, 10*time.Second, "every node to report one cluster id", func() bool {
		id = ""
		for _, n := range c.Nodes {
			st, err := n.Client.Status(ctx)
			if err != nil || st.ClusterID == "" || id != "" && st.ClusterID != id {
				return false
			}
			id = st.ClusterID
		}
		return true
	})
	if !api.ValidClusterID(id) || !strings.HasPrefix(id, "c") {
		t.Fatalf("cluster id %q", id)
	}
}

// A join with a live voter's id at another address is refused, naming the
// voter, with or without replace (the voter answers); the voter keeps its
// address. The same id at the same address is a harmless retry.
func TestJoinWithALiveVotersIDRefused(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	f := c.Follower()
	before := f.RaftAddr()
	for _, replace := range []bool{false, true} {
		err := c.Leader().Client.Join(ctx, api.JoinRequest{NodeID: f.ID(), RaftAddr: "127.0.0.1:9", APIAddr: "127.0.0.1:9", Replace: replace})
		want := "--replace"
		if replace {
			want = "still answers"
		}
		if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "node id "+f.ID()+" is already a voter at raft address "+before) ||
			!strings.Contains(err.Error(), want) {
			t.Fatalf("replace=%v: join of a live voter's id: %v; want 409 naming it and %q", replace, err, want)
		}
	}
	if err := c.Leader().Client.Join(ctx, api.JoinRequest{NodeID: f.ID(), RaftAddr: before, APIAddr: f.Addr}); err != nil {
		t.Fatalf("a retried join at the same address: %v", err)
	}
	st, err := c.Leader().Client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range st.Voters {
		if v.ID == f.ID() && v.RaftAddr != before {
			t.Fatalf("%s's raft address is %s, want %s", f.ID(), v.RaftAddr, before)
		}
	}
}

// voterIn is the voter id of st, zero if st has none.
func voterIn(st api.Status, id string) api.Voter {
	for _, v := range st.Voters {
		if v.ID == id {
			return v
		}
	}
	return api.Voter{}
}

// Status says, per voter, whether the answering node hears from it: the
// leader from its heartbeats (a stopped follower is unreachable since its
// last answer), a follower from its last contact with the leader.
func TestStatusReach(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	leader := c.Leader()
	var fs []*clustertest.Node
	for _, n := range c.Nodes {
		if n != leader {
			fs = append(fs, n)
		}
	}
	gone, up := fs[0], fs[1]
	clustertest.WaitFor(t, 10*time.Second, "the follower to report its leader reachable by Raft", func() bool {
		st, err := up.Client.Status(ctx)
		v := voterIn(st, leader.ID())
		return err == nil && voterIn(st, up.ID()).Reach == api.ReachSelf && v.Reach == api.ReachReachable && v.Via == api.ViaRaft && !v.LastContact.IsZero()
	})
	gone.Stop()
	var st api.Status
	clustertest.WaitFor(t, 10*time.Second, "the leader to report the stopped follower unreachable", func() bool {
		var err error
		st, err = leader.Client.Status(ctx)
		v := voterIn(st, gone.ID())
		return err == nil && v.Reach == api.ReachUnreachable && v.Via == api.ViaRaft && !v.LastContact.IsZero()
	})
	if v := voterIn(st, up.ID()); v.Reach != api.ReachReachable || v.Via != api.ViaRaft {
		t.Errorf("the leader's view of the live follower: %+v", v)
	}
	if v := voterIn(st, leader.ID()); v.Reach != api.ReachSelf {
		t.Errorf("the leader's view of itself: %+v", v)
	}
}

// A node restarted with no leader to tell it the commit index reports at
// least what it applied, not raft's 0.
func TestStatusCommitIndexAtLeastApplied(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	if _, err := c.Leader().Client.Send(ctx, clustertest.Msg("a", "general", "x")); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		clustertest.WaitFor(t, 10*time.Second, "every node to apply the send", func() bool {
			st, err := n.Client.Status(ctx)
			return err == nil && st.AppliedIndex > 0 && st.AppliedIndex == st.CommitIndex
		})
	}
	for _, n := range c.Nodes {
		n.Stop()
	}
	// Alone, it has no quorum: no leader tells it what is committed.
	old := c.Nodes[0]
	back := clustertest.Start(t, old.ID(), old.Dir, "", nil, clustertest.SameRaftAddr(old))
	st, err := back.Client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderID != "" || st.AppliedIndex == 0 || st.CommitIndex < st.AppliedIndex {
		t.Errorf("restarted alone: leader %q, commit index %d, applied index %d; want no leader and the commit index at least the applied one",
			st.LeaderID, st.CommitIndex, st.AppliedIndex)
	}
}
