package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/fsm"
)

// asBuild makes the node id behave as a build that applies state versions
// up to v (cluster.Config.MaxStateVersion); other nodes keep the build's.
func asBuild(id string, v int) clustertest.Option {
	return clustertest.WithConfig(func(c *cluster.Config) {
		if c.NodeID == id {
			c.MaxStateVersion = v
		}
	})
}

// sendNeedsV2 gates send on state version 2 on every node's proposals:
// the write the version must allow (no op of this build needs 2 yet).
var sendNeedsV2 = clustertest.WithConfig(func(c *cluster.Config) {
	c.OpVersions = map[api.Op]int{api.OpSend: 2}
})

// clusterVersions is each running node's committed version, as its status
// says.
func clusterVersions(c *clustertest.Cluster) map[string]int {
	out := map[string]int{}
	for _, n := range c.Running() {
		st, err := n.Status(context.Background())
		if err != nil {
			return nil
		}
		out[n.ID()] = st.ClusterVersion
	}
	return out
}

// TestClusterVersionWaitsForTheLastOldVoter: a cluster with a voter of an
// older build (version 1) stays at version 1, and a write that needs 2 is
// refused before it is proposed, through any node; once that voter is
// restarted on the newer build the leader raises the version and the write
// goes through. A node of the older build can then no longer join, nor
// restart on a data dir that applied version 2.
func TestClusterVersionWaitsForTheLastOldVoter(t *testing.T) {
	c := clustertest.New(t, 3, asBuild("n1", 1), sendNeedsV2)
	ctx := clustertest.Context(t)
	old := c.Nodes[0]
	// A leader of the newer build: it is the one that asks, and n1 keeps
	// the version down.
	leader := c.Nodes[1]
	clustertest.WaitFor(t, 30*time.Second, "n2 leads", func() bool {
		if leader.IsLeader() {
			return true
		}
		// Blocks until raft is done with it; a failed one is asked again.
		_, _ = old.Client.TransferLeadership(ctx, "n2")
		return leader.IsLeader()
	})
	checks := leader.VersionChecks()
	clustertest.WaitFor(t, 30*time.Second, "the leader asked the servers twice", func() bool {
		return leader.VersionChecks() >= checks+2
	})
	st, err := old.Status(ctx)
	if err != nil || st.StateVersion != 1 || st.ClusterVersion != 1 {
		t.Fatalf("n1 status: state version %d, cluster version %d (%v), want 1 and 1", st.StateVersion, st.ClusterVersion, err)
	}
	for id, v := range clusterVersions(c) {
		if v != 1 {
			t.Errorf("%s runs cluster version %d while n1's build applies 1 only, want 1", id, v)
		}
	}
	for _, n := range c.Running() {
		_, err := n.Client.Send(ctx, clustertest.Msg("a", "c", "needs v2 via "+n.ID()))
		want := "op send needs cluster version 2; the cluster runs 1 until every voter is upgraded"
		var apiErr *api.APIError
		if !errors.Is(err, api.ErrClusterVersion) || !errors.As(err, &apiErr) || apiErr.Status != 409 ||
			apiErr.Message != want || api.Classify(err) != api.Refused {
			t.Errorf("send through %s at version 1: %v, want 409 cluster_version %q, refused", n.ID(), err, want)
		}
	}
	if p, _ := leader.FSM().ChannelPage("c", 0, 10); len(p.Messages) != 0 {
		t.Errorf("%d refused sends reached the log", len(p.Messages))
	}

	// Upgrade n1: the same data dir and addresses, the newer build.
	old.Stop()
	up := clustertest.Start(t, "n1", old.Dir, old.Addr, nil, clustertest.SameRaftAddr(old), sendNeedsV2)
	c.Replace(old, up)
	v := fsm.MaxStateVersion // 2 or more: the build's
	clustertest.WaitFor(t, 60*time.Second, "every node runs this build's cluster version", func() bool {
		vs := clusterVersions(c)
		return len(vs) == 3 && vs["n1"] == v && vs["n2"] == v && vs["n3"] == v
	})
	for _, n := range c.Running() {
		if _, err := n.Client.Send(ctx, clustertest.Msg("a", "c", "v2 via "+n.ID())); err != nil {
			t.Errorf("send through %s at version 2: %v", n.ID(), err)
		}
	}

	// An older build can no longer join, and is refused by its words.
	_, err = clustertest.StartJoin(t, "n4", filepath.Join(t.TempDir(), "n4"), "", []string{up.Addr}, asBuild("n4", 1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("join of n4 refused: its build applies state versions up to 1 and the cluster runs %d", v)) {
		t.Errorf("join of a version-1 build to a version-2 cluster: %v, want it refused naming both versions", err)
	}

	// Nor restart on a data dir that applied version 2.
	f := c.Nodes[2]
	f.Stop()
	cfg := clustertest.Config(f.ID(), f.Dir, f.Addr)
	cfg.RaftAddr, cfg.MaxStateVersion = f.RaftAddr(), 1
	n, err := cluster.Open(cfg)
	var sve *fsm.StateVersionError
	if err == nil {
		n.Close()
	}
	if !errors.As(err, &sve) || sve.Cluster != v || sve.Build != 1 {
		t.Errorf("a version-1 build opening a data dir at version %d: %v, want a *fsm.StateVersionError naming %d and 1", v, err, v)
	}
}

// TestNewClusterRunsTheBuildsVersion: a cluster of this build's nodes runs
// its version from the first term (the bootstrapping node is its only
// voter), every node says so, and an ungated write goes through.
func TestNewClusterRunsTheBuildsVersion(t *testing.T) {
	c := clustertest.New(t, 3)
	clustertest.WaitFor(t, 30*time.Second, "every node runs the build's version", func() bool {
		for _, v := range clusterVersions(c) {
			if v != fsm.MaxStateVersion {
				return false
			}
		}
		return true
	})
	for _, n := range c.Running() {
		st, err := n.Status(context.Background())
		if err != nil || st.StateVersion != fsm.MaxStateVersion {
			t.Errorf("%s: state version %d (%v), want %d", n.ID(), st.StateVersion, err, fsm.MaxStateVersion)
		}
	}
}

func TestConfigRefusesBadVersions(t *testing.T) {
	for _, tc := range []struct {
		set  func(*cluster.Config)
		want string
	}{
		{func(c *cluster.Config) { c.MaxStateVersion = fsm.MaxStateVersion + 1 }, "MaxStateVersion"},
		{func(c *cluster.Config) { c.MaxStateVersion = -1 }, "MaxStateVersion"},
		{func(c *cluster.Config) { c.OpVersions = map[api.Op]int{api.OpSend: 0} }, "OpVersions"},
	} {
		cfg := clustertest.Config("n1", t.TempDir(), "127.0.0.1:7070")
		tc.set(&cfg)
		err := cfg.Validate()
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.want {
			t.Errorf("Validate: %v, want a *FieldError naming %s", err, tc.want)
		}
	}
}

// TestJoinOnAnOldBuildsBehalfIsRefused: a join that says no version (an
// older maosd, or maosctl cluster join on a node's behalf) is judged on
// what the node's own status says.
func TestJoinOnAnOldBuildsBehalfIsRefused(t *testing.T) {
	c := clustertest.New(t, 1)
	ctx := clustertest.Context(t)
	clustertest.WaitFor(t, 30*time.Second, "the cluster runs this build's version", func() bool {
		return clusterVersions(c)["n1"] == fsm.MaxStateVersion
	})
	// A node of the older build, serving its API (a cluster of its own,
	// as an unjoined maosd is none: what matters is its status).
	old := clustertest.Start(t, "n9", filepath.Join(t.TempDir(), "n9"), "", nil, asBuild("n9", 1))
	err := c.Nodes[0].Client.Join(ctx, api.JoinRequest{NodeID: "n9", RaftAddr: old.RaftAddr(), APIAddr: old.Addr})
	want := fmt.Sprintf("join of n9 refused: its build applies state versions up to 1 and the cluster runs %d", fsm.MaxStateVersion)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), want) {
		t.Fatalf("join of a version-1 node saying no version: %v, want a conflict %q", err, want)
	}
	if n := c.Nodes[0].Voters(); n != 1 {
		t.Errorf("%d voters after the refused join, want 1", n)
	}
}

// TestRegisterWithA2AWaitsForVersion3: in a cluster whose builds apply
// version 2 only, registering an agent with an A2A remote (which a build
// of 2 would drop when it applies the entry) is refused with 409
// cluster_version before it is proposed, while a plain registration
// passes; a cluster of this build takes both.
func TestRegisterWithA2AWaitsForVersion3(t *testing.T) {
	old := clustertest.New(t, 1, asBuild("n1", 2))
	ctx := clustertest.Context(t)
	n := old.Nodes[0]
	clustertest.WaitFor(t, 30*time.Second, "the cluster runs version 2", func() bool {
		return clusterVersions(old)["n1"] == 2
	})
	remote := api.RegisterAgentCommand{ID: "ext", A2A: &api.A2ARemote{URL: "http://127.0.0.1:9/agent", Credential: "tok"}}
	_, err := n.Client.RegisterAgent(ctx, remote)
	var apiErr *api.APIError
	if !errors.Is(err, api.ErrClusterVersion) || !errors.As(err, &apiErr) || apiErr.Status != 409 ||
		!strings.Contains(apiErr.Message, "needs cluster version 3; the cluster runs 2") {
		t.Fatalf("register with a2a at version 2: %v, want 409 cluster_version naming 3 and 2", err)
	}
	if _, err := n.FSM().Agent("ext"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("the refused registration reached the log: %v", err)
	}
	if _, err := n.Client.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "plain"}); err != nil {
		t.Errorf("plain register at version 2: %v", err)
	}

	cur := clustertest.New(t, 1)
	clustertest.WaitFor(t, 30*time.Second, "the cluster runs this build's version", func() bool {
		return clusterVersions(cur)["n1"] == fsm.MaxStateVersion
	})
	a, err := cur.Nodes[0].Client.RegisterAgent(ctx, remote)
	if err != nil || a.A2A == nil || a.A2A.URL != remote.A2A.URL || !a.A2A.Credential {
		t.Fatalf("register with a2a at version %d: %+v, %v", fsm.MaxStateVersion, a.A2A, err)
	}
}
