package fsm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// memSink is a raft.SnapshotSink that keeps the snapshot in memory.
type memSink struct {
	buf       bytes.Buffer
	closed    bool
	cancelled bool
}

func (s *memSink) ID() string { return "mem-1" }

func (s *memSink) Write(p []byte) (int, error) {
	if s.closed || s.cancelled {
		return 0, errors.New("memSink: write after close")
	}
	return s.buf.Write(p)
}

func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Bytes() []byte { return s.buf.Bytes() }
func (s *memSink) Reader() io.ReadCloser {
	return io.NopCloser(bytes.NewReader(s.buf.Bytes()))
}

// failSink fails every write, like a full disk.
type failSink struct{ memSink }

func (s *failSink) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// takeSnapshot snapshots f and persists it into a memSink.
func takeSnapshot(t *testing.T, f *FSM) *memSink {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("after Persist: closed %t cancelled %t, want closed", sink.closed, sink.cancelled)
	}
	return sink
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	logs := mixedLog(t, 5, 1, 150)
	src, _ := openTemp(t)
	applyChunks(src, logs[:100], func() int { return 10 })
	sink := takeSnapshot(t, src)

	// The destination holds other state, which the restore replaces.
	dst, dstPath := openTemp(t)
	applyChunks(dst, mixedLog(t, 99, 1, 30), func() int { return 30 })

	// Someone waiting for an index the snapshot covers is woken by Restore.
	waited := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { waited <- dst.WaitApplied(ctx, 100) }()

	if err := dst.Restore(sink.Reader()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := <-waited; err != nil {
		t.Errorf("WaitApplied(100) across Restore: %v", err)
	}
	if got, want := dst.AppliedIndex(), src.AppliedIndex(); got != want || got != 100 {
		t.Errorf("AppliedIndex = %d, want %d (100)", got, want)
	}
	if got, want := dump(t, dst), dump(t, src); got != want {
		t.Errorf("Dump after Restore differs from the source")
	}
	if _, err := os.Stat(dstPath + ".restore"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary restore file left behind: %v", err)
	}

	// The restored state is live: both go on applying the same entries and
	// stay equal, and replayed entries are skipped on the restored side.
	for _, r := range dst.ApplyBatch(logs[90:100]) {
		if r != nil {
			t.Errorf("entry covered by the snapshot applied again: %s", resultString(r))
		}
	}
	applyChunks(src, logs[100:], func() int { return 5 })
	applyChunks(dst, logs[100:], func() int { return 50 })
	if got, want := dump(t, dst), dump(t, src); got != want {
		t.Errorf("Dump after applying past the snapshot differs")
	}
	if chans, err := dst.Channels(); err != nil || len(chans) == 0 {
		t.Errorf("Channels on the restored state: %v, %v", chans, err)
	}
}

func TestSnapshotIsPointInTime(t *testing.T) {
	logs := mixedLog(t, 7, 1, 60)
	f, _ := openTemp(t)
	applyChunks(f, logs[:30], func() int { return 30 })
	want := dump(t, f)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	// raft goes on applying while the snapshot waits to be persisted.
	applyChunks(f, logs[30:], func() int { return 4 })
	applyOne(f, nodeEntry(t, 61, baseTS, api.RegisterNodeCommand{NodeID: "late", APIAddr: "127.0.0.1:1"}))
	if f.AppliedIndex() != 61 {
		t.Fatalf("AppliedIndex = %d, want 61", f.AppliedIndex())
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}

	g, _ := openTemp(t)
	if err := g.Restore(sink.Reader()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := g.AppliedIndex(); got != 30 {
		t.Errorf("restored AppliedIndex = %d, want 30", got)
	}
	if got := dump(t, g); got != want {
		t.Errorf("snapshot contains entries applied after it was taken")
	}
	if _, err := g.Node("late"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Node(late) on the snapshot = %v, want ErrNotFound", err)
	}
}

func TestPersistFailureCancelsSink(t *testing.T) {
	f, _ := openTemp(t)
	fillChannels(t, f, 3)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &failSink{}
	if err := snap.Persist(sink); err == nil {
		t.Fatal("Persist into a failing sink succeeded")
	}
	if !sink.cancelled || sink.closed {
		t.Errorf("failing Persist: cancelled %t closed %t, want cancelled only", sink.cancelled, sink.closed)
	}
}

// foreignBolt is a valid bbolt file that is not a maos state file.
func foreignBolt(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("something_else"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestoreRejectsGarbage(t *testing.T) {
	random := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name string
		data func(t *testing.T) []byte
	}{
		{"text", func(*testing.T) []byte { return []byte("this is not a snapshot\n") }},
		{"random bytes", func(*testing.T) []byte { return random }},
		{"empty", func(*testing.T) []byte { return nil }},
		{"zero page", func(*testing.T) []byte { return make([]byte, 16<<10) }},
		{"bbolt file without the state's buckets", foreignBolt},
		// The plain state file an earlier build's snapshot holds, cut
		// short or overwritten: bbolt.Open alone crashes the process on
		// these (SIGBUS, or a panic in its own goroutine).
		{"snapshot truncated mid-page", func(t *testing.T) []byte {
			b := plainSnapshot(t)
			l := layoutOf(t, b)
			return b[:l.hwm*l.pageSize/2+100]
		}},
		{"snapshot with its root page overwritten", func(t *testing.T) []byte {
			b := plainSnapshot(t)
			l := layoutOf(t, b)
			copy(b[l.root*l.pageSize:], garbage(l.pageSize, 9))
			return b
		}},
		// A compressed snapshot cut short, or with a byte changed: the
		// stream fails to decode or its checksum does not match.
		{"compressed snapshot cut short", func(t *testing.T) []byte {
			b := validSnapshot(t)
			return b[:len(b)/2]
		}},
		{"compressed snapshot with a byte changed", func(t *testing.T) []byte {
			b := validSnapshot(t)
			b[len(b)/2] ^= 0x40
			return b
		}},
		{"compressed text", func(t *testing.T) []byte {
			return compress(t, []byte(strings.Repeat("this is not a state file\n", 1000)))
		}},
		{"compressed bbolt file without the state's buckets", func(t *testing.T) []byte {
			return compress(t, foreignBolt(t))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, path := openTemp(t)
			fillChannels(t, f, 5)
			before := dump(t, f)
			applied := f.AppliedIndex()

			err := f.Restore(io.NopCloser(bytes.NewReader(tt.data(t))))
			if err == nil {
				t.Fatal("Restore of garbage succeeded")
			}
			if got := dump(t, f); got != before {
				t.Errorf("a failed Restore changed the state")
			}
			if got := f.AppliedIndex(); got != applied {
				t.Errorf("AppliedIndex = %d after a failed Restore, want %d", got, applied)
			}
			if m, err := f.Message("alpha-2"); err != nil || m.Content.Text != "a2" {
				t.Errorf("Message after a failed Restore: %+v, %v", m, err)
			}
			if _, err := os.Stat(path + ".restore"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temporary restore file left behind: %v", err)
			}
			// Still writable.
			next := f.AppliedIndex() + 1
			mustSendResult(t, applyOne(f, sendEntry(t, next, baseTS+int64(next), testMessage("after", "alpha", "x"))))
		})
	}
}

// validSnapshot is the snapshot of a state with some messages, as Persist
// writes it: compressed.
func validSnapshot(t *testing.T) []byte {
	t.Helper()
	src, _ := openTemp(t)
	fillChannels(t, src, 200)
	return takeSnapshot(t, src).Bytes()
}

// plainSnapshot is the same snapshot as a build before compression wrote
// it: the state file's bytes (Tx.WriteTo) as they are.
func plainSnapshot(t *testing.T) []byte {
	t.Helper()
	src, _ := openTemp(t)
	fillChannels(t, src, 200)
	var buf bytes.Buffer
	if err := src.db.View(func(tx *bbolt.Tx) error { _, err := tx.WriteTo(&buf); return err }); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// compress is b as one zstd stream.
func compress(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// TestSnapshotIsCompressed: Persist writes one zstd stream, smaller than
// the state file it holds.
func TestSnapshotIsCompressed(t *testing.T) {
	f, path := openTemp(t)
	fillChannels(t, f, 200)
	snap := takeSnapshot(t, f).Bytes()
	if !bytes.HasPrefix(snap, zstdMagic) {
		t.Fatalf("snapshot begins % x, want zstd's magic % x", snap[:4], zstdMagic)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(snap)) >= st.Size()/2 {
		t.Errorf("snapshot of %d bytes for a state file of %d: want less than half", len(snap), st.Size())
	}
}

// TestRestorePlainSnapshot: a snapshot an earlier build wrote (the state
// file's bytes, uncompressed) still restores, to the same state.
func TestRestorePlainSnapshot(t *testing.T) {
	logs := mixedLog(t, 5, 1, 120)
	src, _ := openTemp(t)
	applyChunks(src, logs, func() int { return 10 })
	var plain bytes.Buffer
	if err := src.db.View(func(tx *bbolt.Tx) error { _, err := tx.WriteTo(&plain); return err }); err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(plain.Bytes(), zstdMagic) {
		t.Fatal("the plain snapshot begins with zstd's magic")
	}
	dst, _ := openTemp(t)
	applyChunks(dst, mixedLog(t, 99, 1, 30), func() int { return 30 })
	if err := dst.Restore(io.NopCloser(&plain)); err != nil {
		t.Fatalf("Restore of a plain snapshot: %v", err)
	}
	if got, want := dst.AppliedIndex(), src.AppliedIndex(); got != want {
		t.Errorf("AppliedIndex = %d, want %d", got, want)
	}
	if got, want := dump(t, dst), dump(t, src); got != want {
		t.Errorf("Dump after restoring a plain snapshot differs from the source")
	}
}

// errReader serves half of a snapshot's bytes and then fails, like a
// snapshot stream from the leader whose connection broke.
type errReader struct {
	r    io.Reader
	left int
}

func (e *errReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, errors.New("connection reset by peer")
	}
	n, err := e.r.Read(p[:min(len(p), e.left)])
	e.left -= n
	return n, err
}

func TestRestoreStreamErrorKeepsState(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap func(t *testing.T) []byte
	}{{"compressed", validSnapshot}, {"plain", plainSnapshot}} {
		t.Run(tc.name, func(t *testing.T) {
			snap := tc.snap(t)
			f, path := openTemp(t)
			fillChannels(t, f, 3)
			before := dump(t, f)
			err := f.Restore(io.NopCloser(&errReader{r: bytes.NewReader(snap), left: len(snap) / 2}))
			if err == nil {
				t.Fatal("Restore from a failing stream succeeded")
			}
			if got := dump(t, f); got != before {
				t.Errorf("a failed Restore changed the state")
			}
			if _, err := os.Stat(path + ".restore"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temporary restore file left behind: %v", err)
			}
		})
	}
}
