package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// TestChaosShort is the short chaos run of make test: every nemesis once
// that runs on loopback (NemesesFor(false); TestChaosShortNetns runs them
// all in namespace mode), each in its own 3-node cluster under load, with the full checker, with
// a watcher agent on every node whose requests must each get exactly one
// reply, and with task workers whose tasks must each be stored once and
// completed once by the claim they record. The membership nemeses must
// also refuse no send for longer than an election. The long run is make
// chaos (see docs/RELIABILITY.md).
func TestChaosShort(t *testing.T) {
	testenv.Slow(t, "every nemesis in turn against clusters of maosd processes")
	// Across the run, the task workers' lapsed and late claims must have
	// been exercised: one run may draw no stall, all of them together
	// draw dozens (so it is asked only when every nemesis ran, not of a
	// -run that picks a few).
	var stalled, refused, reclaimed, ran int
	defer func() {
		if !t.Failed() && ran == len(NemesesFor(false)) && (stalled == 0 || refused == 0 || reclaimed == 0) {
			t.Errorf("the task workload proved nothing about lapsed claims: %d completions sent after their lease, %d refused, %d tasks claimed again",
				stalled, refused, reclaimed)
		}
	}()
	for i, nem := range NemesesFor(false) {
		t.Run(nem.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out := t.TempDir()
			rep, err := Run(ctx, Config{
				Maosd: maosdBin, Nodes: 3, Nemeses: []Nemesis{nem},
				Clients: 6, Readers: 2, Watchers: 1, StubModel: stubmodelBin, Tasks: DefaultTaskWorkers,
				Warmup: time.Second, Hold: 1500 * time.Millisecond, Gap: 500 * time.Millisecond,
				Quiet: 300 * time.Millisecond, Seed: int64(1000 + i), OutDir: out, Logf: t.Logf,
			})
			if rep != nil {
				t.Log("\n" + rep.Text())
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !rep.Pass {
				t.Fatalf("%s broke a promise; cluster kept in %s", nem.Name, rep.ClusterDir)
			}
			if len(rep.Faults) != 1 || rep.Faults[0].Name != nem.Name || len(rep.Faults[0].Nodes) == 0 {
				t.Fatalf("faults = %+v, want one %s on some node", rep.Faults, nem.Name)
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
			stalled, refused, reclaimed = stalled+rep.Tasks.Stalled, refused+rep.Tasks.Refused, reclaimed+rep.Tasks.Reclaimed
			ran++
			if f := rep.Faults[0]; nem.Available && (f.Refusal == nil || f.RefusalBound != ElectionBound()) {
				t.Fatalf("%s promises availability, but the refusal window was not measured: %+v", nem.Name, f)
			}
			for _, f := range []string{"report.json", "report.txt"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("report file: %v", err)
				}
			}
		})
	}
}
