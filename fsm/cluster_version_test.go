package fsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func versionEntry(tb testing.TB, index uint64, v int) *raft.Log {
	tb.Helper()
	data, err := Encode(api.OpClusterVersion, baseTS+int64(index), api.ClusterVersionCommand{Version: v})
	if err != nil {
		tb.Fatalf("Encode cluster_version: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

func TestClusterVersionRisesAndIsNeverLowered(t *testing.T) {
	f, _ := openTemp(t)
	if got := f.ClusterVersion(); got != 1 {
		t.Fatalf("a new state's ClusterVersion = %d, want 1 (every build before versions)", got)
	}
	if got := f.MaxStateVersion(); got != MaxStateVersion || got < 2 {
		t.Fatalf("MaxStateVersion() = %d, want the build's %d (at least 2)", got, MaxStateVersion)
	}
	// Version 1 while the state says nothing: a no-op, nothing stored
	// (a state of a build before versions holds the same bytes).
	if res := applyOne(f, versionEntry(t, 1, 1)); res == nil || isError(res) {
		t.Fatalf("cluster_version 1: %s", resultString(res))
	}
	var stored []byte
	_ = f.view(func(tx *bbolt.Tx) error {
		stored = tx.Bucket(bucketMeta).Get(keyClusterVersion)
		return nil
	})
	if stored != nil {
		t.Errorf("cluster_version 1 stored %q, want nothing", stored)
	}
	if res := applyOne(f, versionEntry(t, 2, 2)); res == nil || isError(res) {
		t.Fatalf("cluster_version 2: %s", resultString(res))
	}
	if got := f.ClusterVersion(); got != 2 {
		t.Fatalf("after cluster_version 2: ClusterVersion = %d, want 2", got)
	}
	// Lower: refused, a conflict in words, nothing changes.
	err := mustError(t, applyOne(f, versionEntry(t, 3, 1)))
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "never lowered to 1") {
		t.Errorf("cluster_version 1 after 2: %v, want a conflict saying it is never lowered", err)
	}
	if got := f.ClusterVersion(); got != 2 {
		t.Errorf("after a refused lowering: ClusterVersion = %d, want 2", got)
	}
	// The same again: a no-op answering the version.
	res := applyOne(f, versionEntry(t, 4, 2))
	if c, ok := res.(*api.ClusterVersionCommand); !ok || c.Version != 2 {
		t.Errorf("cluster_version 2 again: %s, want version 2", resultString(res))
	}
	// Bad input names the field.
	err = mustError(t, applyOne(f, versionEntry(t, 5, 0)))
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "version") {
		t.Errorf("cluster_version 0: %v, want an invalid version", err)
	}
}

func TestClusterVersionSurvivesSnapshotAndReopen(t *testing.T) {
	src, srcPath := openTemp(t)
	applyOne(src, versionEntry(t, 1, 2))
	sink := takeSnapshot(t, src)

	dst, _ := openTemp(t)
	if got := dst.ClusterVersion(); got != 1 {
		t.Fatalf("fresh destination: ClusterVersion = %d, want 1", got)
	}
	if err := dst.Restore(sink.Reader()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := dst.ClusterVersion(); got != 2 {
		t.Errorf("after Restore: ClusterVersion = %d, want 2 (the snapshot's)", got)
	}

	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	re := openAt(t, srcPath)
	defer re.Close()
	if got := re.ClusterVersion(); got != 2 {
		t.Errorf("after reopening: ClusterVersion = %d, want 2", got)
	}
}

func TestBuildTooOldForTheStateRefusesToOpen(t *testing.T) {
	f, path := openTemp(t)
	applyOne(f, versionEntry(t, 1, 2))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Logger: quietLogger, MaxStateVersion: 1})
	var sve *StateVersionError
	if !errors.As(err, &sve) || sve.Cluster != 2 || sve.Build != 1 {
		t.Fatalf("Open of a version-2 state by a version-1 build: %v, want a *StateVersionError{2, 1}", err)
	}
	for _, want := range []string{"state version 2", "versions up to 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The same file opens for a build that applies it, unchanged.
	g := openAt(t, path)
	defer g.Close()
	if got := g.ClusterVersion(); got != 2 {
		t.Errorf("ClusterVersion = %d, want 2", got)
	}
}

func TestBuildTooOldRefusesTheSnapshot(t *testing.T) {
	src, _ := openTemp(t)
	applyOne(src, versionEntry(t, 1, 2))
	sink := takeSnapshot(t, src)

	path := filepath.Join(t.TempDir(), "state.db")
	old, err := Open(path, Options{Logger: quietLogger, MaxStateVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	applyOne(old, sendEntry(t, 1, baseTS, testMessage(msgID(1), "general", "kept")))
	before := dump(t, old)
	err = old.Restore(sink.Reader())
	var sve *StateVersionError
	if !errors.As(err, &sve) || sve.Cluster != 2 || sve.Build != 1 {
		t.Fatalf("Restore of a version-2 snapshot by a version-1 build: %v, want a *StateVersionError", err)
	}
	if dump(t, old) != before {
		t.Errorf("a refused restore changed the state")
	}
}

// TestBuildTooOldStopsAtTheVersionEntry: replaying or receiving an entry
// that raises the version past the build's must not go on silently: apply
// stops the node (a panic naming both versions), and nothing of the batch
// is written, so the next start stops at the same entry.
func TestBuildTooOldStopsAtTheVersionEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	old, err := Open(path, Options{Logger: quietLogger, MaxStateVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	batch := []*raft.Log{
		sendEntry(t, 1, baseTS, testMessage(msgID(1), "general", "before")),
		versionEntry(t, 2, 2),
		sendEntry(t, 3, baseTS+3, testMessage(msgID(3), "general", "after")),
	}
	msg := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		old.ApplyBatch(batch)
		return "no panic"
	}()
	for _, want := range []string{"state version 2", "versions up to 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ApplyBatch with a version-2 entry on a version-1 build: %q, want a stop saying %q", msg, want)
		}
	}
	if got := old.AppliedIndex(); got != 0 {
		t.Errorf("AppliedIndex = %d after the stop, want 0 (nothing of the batch written)", got)
	}
	if got := old.ClusterVersion(); got != 1 {
		t.Errorf("ClusterVersion = %d after the stop, want 1", got)
	}
}

func TestCheckVersionGatesOpsAboveTheCommittedVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := Open(path, Options{Logger: quietLogger, OpVersions: map[api.Op]int{api.OpSetBulletin: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = f.CheckVersion(api.OpSetBulletin, nil)
	var cve *api.ClusterVersionError
	if !errors.As(err, &cve) || cve.Needs != 2 || cve.Runs != 1 || cve.Op != api.OpSetBulletin {
		t.Fatalf("CheckVersion(set_bulletin needing 2) at version 1: %v, want a *ClusterVersionError", err)
	}
	want := "op set_bulletin needs cluster version 2; the cluster runs 1 until every voter is upgraded"
	if err.Error() != want || api.Classify(err) != api.Refused {
		t.Errorf("refusal %q (%v), want %q, refused", err, api.Classify(err), want)
	}
	if err := f.CheckVersion(api.OpSend, nil); err != nil {
		t.Errorf("CheckVersion(send, version 1): %v", err)
	}
	applyOne(f, versionEntry(t, 1, 2))
	if err := f.CheckVersion(api.OpSetBulletin, nil); err != nil {
		t.Errorf("CheckVersion(set_bulletin needing 2) at version 2: %v", err)
	}
}

func TestVersionOptionsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{MaxStateVersion: MaxStateVersion + 1}, "max_state_version"},
		{Options{MaxStateVersion: -1}, "max_state_version"},
		{Options{OpVersions: map[api.Op]int{"no_such_op": 2}}, `"no_such_op" is not an op`},
		{Options{OpVersions: map[api.Op]int{api.OpSend: 0}}, "op_versions[send]"},
		{Options{OpVersions: map[api.Op]int{api.OpSend: MaxStateVersion + 1}}, "op_versions[send]"},
	} {
		tc.opts.Logger = quietLogger
		f, err := Open(filepath.Join(t.TempDir(), "state.db"), tc.opts)
		if err == nil {
			f.Close()
			t.Errorf("Open(%+v): no error, want one naming %s", tc.opts, tc.want)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v): %v, want it to name %s", tc.opts, err, tc.want)
		}
	}
}

// TestEveryOpHasAVersionThisBuildApplies: every op of the registry needs
// a version from 1 to MaxStateVersion, and every op of the builds before
// versions (all but the ones added since) needs 1, so old logs replay.
func TestEveryOpHasAVersionThisBuildApplies(t *testing.T) {
	// The ops added at version 2 and 3; every other op was in the builds
	// before versions.
	added := map[api.Op]int{api.OpAgentLeaseRenewMany: 2,
		api.OpPushConfigSet: 3, api.OpPushConfigDelete: 3, api.OpPushCursor: 3}
	f, _ := openTemp(t)
	for op, spec := range f.registry() {
		if spec.version < 1 || spec.version > MaxStateVersion {
			t.Errorf("op %s needs version %d, want 1..%d", op, spec.version, MaxStateVersion)
		}
		if want := max(added[op], 1); spec.version != want {
			t.Errorf("op %s needs version %d, want %d (re-gating an op of an older build would refuse what old logs hold)", op, spec.version, want)
		}
	}
}

func isError(r any) bool {
	_, ok := r.(error)
	return ok
}
