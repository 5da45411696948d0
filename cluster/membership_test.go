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
