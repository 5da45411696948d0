package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestChaosShort is the short chaos run of make test: every nemesis once
// that runs on loopback (NemesesFor(false); TestChaosShortNetns runs the
// rest),
// each in its own 3-node cluster under load, with the full checker, and
// with a watcher agent on every node whose requests must each get exactly
// one reply. The long run is make chaos (see docs/RELIABILITY.md).
func TestChaosShort(t *testing.T) {
	for i, nem := range NemesesFor(false) {
		t.Run(nem.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out := t.TempDir()
			rep, err := Run(ctx, Config{
				Maosd: maosdBin, Nodes: 3, Nemeses: []Nemesis{nem},
				Clients: 6, Readers: 2, Watchers: 1, StubModel: stubmodelBin,
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
			for _, f := range []string{"report.json", "report.txt"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("report file: %v", err)
				}
			}
		})
	}
}
