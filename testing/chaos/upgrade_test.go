package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// previousBuild is the commit of main before state versions (issue 28):
// the build a cluster is upgraded from. Every build before versions
// reports none and runs version 1.
const previousBuild = "f57ddca15b12ae30557ed63f5a435f10de1c64b3"

// thisBuildsVersion is fsm.MaxStateVersion, which this package may not
// import (its row of the layout table): the version a cluster of this
// build runs.
const thisBuildsVersion = 3

// TestRollingUpgradeFromThePreviousBuild starts three nodes of the
// previous build, runs the chaos workload (sends and strong reads through
// every node, a watcher agent per node, task workers) and replaces each
// node in turn by this build on its data dir, leader last. The history
// must hold every promise of the chaos checker (no acknowledged send lost
// or stored twice, linearizable reads, no send refused longer than an
// election, every watcher request answered once, every task stored and
// completed once), and the cluster's state version must
// stay at 1 while any node runs the previous build and reach this build's
// once the last one is upgraded (RollingUpgrade).
func TestRollingUpgradeFromThePreviousBuild(t *testing.T) {
	testenv.Slow(t, "builds the previous maosd and upgrades a cluster of it under load")
	testenv.Tool(t, "git", "git archive extracts the previous build's source from the repository's history")
	old, err := harness.BuildMaosdOf(previousBuild, t.TempDir())
	if err != nil {
		t.Fatalf("the previous build: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Maosd: old, Nodes: 3, Nemeses: []Nemesis{RollingUpgrade(maosdBin, thisBuildsVersion)},
		Clients: 6, Readers: 2, Watchers: 1, StubModel: stubmodelBin, Tasks: DefaultTaskWorkers,
		Warmup: time.Second, Hold: time.Second, Gap: 500 * time.Millisecond,
		Quiet: 300 * time.Millisecond, Seed: 2800, OutDir: t.TempDir(), Logf: t.Logf,
	})
	if rep != nil {
		t.Log("\n" + rep.Text())
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !rep.Pass {
		t.Fatalf("the rolling upgrade broke a promise; cluster kept in %s", rep.ClusterDir)
	}
	if len(rep.Faults) != 1 || len(rep.Faults[0].Nodes) != 3 {
		t.Fatalf("faults = %+v, want one rolling-upgrade of the three nodes", rep.Faults)
	}
	if f := rep.Faults[0]; f.Refusal == nil {
		t.Fatalf("the refusal window of the upgrade was not measured: %+v", f)
	}
	if rep.Ops.SendOK == 0 || rep.Ops.ReadOK == 0 || !rep.Check.LinearizabilityChecked {
		t.Fatalf("the run proved nothing: ops %+v, linearizability checked %v", rep.Ops, rep.Check.LinearizabilityChecked)
	}
	if w := rep.Watchers; w == nil || w.Acked == 0 || w.Answered < w.Acked || w.Agents != 3 {
		t.Fatalf("the watcher check proved nothing: %+v", w)
	}
	if tc := rep.Tasks; tc == nil || tc.Created == 0 || tc.Claimed == 0 || tc.Completed == 0 || tc.Stored < tc.Created {
		t.Fatalf("the task check proved nothing: %+v", tc)
	}
}
