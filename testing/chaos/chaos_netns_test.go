package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/harness"
)

// TestChaosShortNetns is the short namespace-mode chaos run of make test:
// one 3-node cluster whose nodes are hosts of their own (network
// namespaces on a private bridge, auth, TLS and a gossip key), every
// nemesis once in turn (the NetnsOnly ones too), under load, with a
// watcher agent on every node and task workers, and the full checks: no acknowledged send
// lost, none stored twice, linearizable, every watcher request answered
// exactly once, every task stored and completed once. It fails, not skips, where namespaces cannot be made.
func TestChaosShortNetns(t *testing.T) {
	harness.RequireNetns(t)
	nemeses := NemesesFor(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Maosd: maosdBin, Nodes: 3, Netns: true, Nemeses: nemeses,
		Clients: 6, Readers: 2, Watchers: 1, StubModel: stubmodelBin, Tasks: DefaultTaskWorkers,
		Warmup: time.Second, Hold: 1500 * time.Millisecond, Gap: 500 * time.Millisecond,
		Quiet: 300 * time.Millisecond, Seed: 2000, OutDir: t.TempDir(), Logf: t.Logf,
	})
	if rep != nil {
		t.Log("\n" + rep.Text())
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !rep.Pass || !rep.Netns {
		t.Fatalf("broke a promise (netns %v); cluster kept in %s", rep.Netns, rep.ClusterDir)
	}
	if len(rep.Faults) != len(nemeses) {
		t.Fatalf("%d faults injected, want %d: %+v", len(rep.Faults), len(nemeses), rep.Faults)
	}
	for i, f := range rep.Faults {
		if f.Name != nemeses[i].Name || len(f.Nodes) == 0 {
			t.Errorf("fault %d = %+v, want %s on some node", i, f, nemeses[i].Name)
		}
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
	for _, f := range rep.Faults {
		if n, _ := NemesisByName(f.Name); n.Available && f.Refusal == nil {
			t.Errorf("%s promises availability, but the refusal window was not measured: %+v", f.Name, f)
		}
	}
}

// A nemesis that needs namespaces is refused on loopback before any
// cluster starts, naming it.
func TestRunRefusesNetnsOnlyOnLoopback(t *testing.T) {
	n, err := NemesisByName("one-way-leader")
	if err != nil || !n.NetnsOnly {
		t.Fatalf("one-way-leader: %+v, %v; want a NetnsOnly nemesis", n, err)
	}
	_, err = Run(context.Background(), Config{Maosd: maosdBin, Nemeses: []Nemesis{n}, OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "one-way-leader needs a namespace-mode cluster") {
		t.Fatalf("Run(one-way-leader on loopback) = %v", err)
	}
	for _, m := range NemesesFor(false) {
		if m.NetnsOnly {
			t.Errorf("NemesesFor(false) lists %s, which needs namespaces", m.Name)
		}
	}
	if all, lo := len(NemesesFor(true)), len(NemesesFor(false)); all != len(Nemeses) || lo >= all {
		t.Errorf("NemesesFor(true) has %d, NemesesFor(false) %d, Nemeses %d", all, lo, len(Nemeses))
	}
}
