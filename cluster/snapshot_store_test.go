package cluster_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
)

// snapshotsIn lists the snapshots in a node's data dir: each folder's
// metadata index, and the bytes of its state.bin.
func snapshotsIn(t *testing.T, dir string) (indexes []uint64, data [][]byte) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		meta, err := os.ReadFile(filepath.Join(dir, "snapshots", e.Name(), "meta.json"))
		if err != nil {
			t.Fatalf("snapshot %s: %v", e.Name(), err)
		}
		var m struct{ Index uint64 }
		if err := json.Unmarshal(meta, &m); err != nil {
			t.Fatalf("snapshot %s: meta: %v", e.Name(), err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "snapshots", e.Name(), "state.bin"))
		if err != nil {
			t.Fatalf("snapshot %s: %v", e.Name(), err)
		}
		indexes, data = append(indexes, m.Index), append(data, b)
	}
	return indexes, data
}

// A node keeps one snapshot, the newest, and writes it compressed (zstd):
// issue 19's snapshots/ held two full copies of the state.
func TestSnapshotStoreKeepsOneCompressedSnapshot(t *testing.T) {
	c := clustertest.New(t, 1)
	n := c.Leader()
	ctx := clustertest.Context(t)
	sendSome(t, c, "snap", 20)
	first, err := n.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sendSome(t, c, "snap", 20)
	second, err := n.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Index <= first.Index {
		t.Fatalf("second snapshot at %d, first at %d: want a newer one", second.Index, first.Index)
	}
	indexes, data := snapshotsIn(t, n.Dir)
	if len(indexes) != 1 || indexes[0] != second.Index {
		t.Fatalf("snapshots on disk at indexes %v, want only the newest, %d", indexes, second.Index)
	}
	if !bytes.HasPrefix(data[0], []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Errorf("the snapshot begins % x, want a zstd frame", data[0][:min(4, len(data[0]))])
	}
	st, err := os.Stat(filepath.Join(n.Dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data[0])) >= st.Size() {
		t.Errorf("snapshot of %d bytes for a state file of %d: want it compressed", len(data[0]), st.Size())
	}
}

// A follower that was away longer than the log keeps behind the leader's
// snapshot is sent that snapshot, compressed, restores it and catches up
// to the same state as its peers.
func TestFollowerCatchesUpFromCompressedSnapshot(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.WithConfig(func(cfg *cluster.Config) { cfg.TrailingLogs = 5 }))
	sendSome(t, c, "away", 5)
	old := c.Follower()
	old.Stop()
	sendSome(t, c, "away", 30)
	snap, err := c.Leader().Snapshot(clustertest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	sendSome(t, c, "away", 3)

	f := clustertest.Start(t, old.ID(), old.Dir, old.Addr, nil, clustertest.SameRaftAddr(old),
		clustertest.WithConfig(func(cfg *cluster.Config) { cfg.TrailingLogs = 5 }))
	c.Replace(old, f)
	waitIdentical(t, c)
	var indexes []uint64
	clustertest.WaitFor(t, 10*time.Second, "the follower keeps the snapshot it was sent", func() bool {
		indexes, _ = snapshotsIn(t, f.Dir)
		return len(indexes) == 1 && indexes[0] >= snap.Index
	})
}
