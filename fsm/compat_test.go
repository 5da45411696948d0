package fsm

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// openBeforeCompressedValues opens a copy of the state file the build
// before compressed message values wrote from formatLog
// (testdata/state_before_compact_values.db.gz, gzipped: most of the file
// is free pages).
func openBeforeCompressedValues(t *testing.T) *FSM {
	t.Helper()
	in, err := os.Open("testdata/state_before_compact_values.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	f := openAt(t, path)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// A snapshot the build before wrote (its state file, plain, with plain
// message values) restores into this build and reads as the same
// messages.
func TestSnapshotBeforeCompressionRestores(t *testing.T) {
	old := openBeforeCompressedValues(t)
	var snap bytes.Buffer
	if err := old.db.View(func(tx *bbolt.Tx) error { _, err := tx.WriteTo(&snap); return err }); err != nil {
		t.Fatal(err)
	}
	f, _ := openTemp(t)
	if err := f.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatalf("Restore of the build before's snapshot: %v", err)
	}
	fresh, _ := openTemp(t)
	applyChunks(fresh, formatLog(t), func() int { return 50 })
	if got, want := allMessages(t, f), allMessages(t, fresh); got != want {
		t.Errorf("the restored snapshot's messages read differently from this build's")
	}
}

// messageValues counts the messages values of f stored as JSON and as
// zstd frames.
func messageValues(t *testing.T, f *FSM) (plain, compressed int) {
	t.Helper()
	err := f.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMessages).ForEach(func(_, v []byte) error {
			switch {
			case bytes.HasPrefix(v, zstdMagic):
				compressed++
			case bytes.HasPrefix(v, []byte("{")):
				plain++
			default:
				t.Errorf("messages value begins % x: neither JSON nor zstd", v[:min(4, len(v))])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return plain, compressed
}

// allMessages is every message of f, and every overview entry, as JSON.
func allMessages(t *testing.T, f *FSM) string {
	t.Helper()
	var sb strings.Builder
	for after := uint64(0); ; {
		page, err := f.MessagesAfter(after, api.MaxPageLimit)
		if err != nil {
			t.Fatalf("MessagesAfter(%d): %v", after, err)
		}
		for _, m := range page.Messages {
			b, _ := json.Marshal(m)
			sb.Write(append(b, '\n'))
			after = m.Seq
		}
		if !page.HasMore {
			break
		}
	}
	for after := uint64(0); ; {
		page, err := f.Overview("", after, api.MaxPageLimit)
		if err != nil {
			t.Fatalf("Overview(%d): %v", after, err)
		}
		for _, e := range page.Messages {
			b, _ := json.Marshal(e)
			sb.Write(append(b, '\n'))
			after = e.Seq
		}
		if !page.HasMore {
			break
		}
	}
	return sb.String()
}

// withoutMessages is dump without the messages bucket's lines.
func withoutMessages(t *testing.T, f *FSM) string {
	t.Helper()
	var keep []string
	for line := range strings.Lines(dump(t, f)) {
		if !strings.HasPrefix(line, string(bucketMessages)+" ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

// A state file written before message values were compressed reads as
// the same messages as one this build writes from the same log, every
// other bucket byte for byte the same; entries applied on top of it store
// compressed values beside the old plain ones, and both read.
func TestStateBeforeCompressedValuesReads(t *testing.T) {
	logs := formatLog(t)
	old := openBeforeCompressedValues(t)
	fresh, _ := openTemp(t)
	applyChunks(fresh, logs, func() int { return 50 })

	if plain, compressed := messageValues(t, old); compressed != 0 || plain == 0 {
		t.Fatalf("the old file holds %d plain and %d compressed values: not a file of the build before", plain, compressed)
	}
	if _, compressed := messageValues(t, fresh); compressed == 0 {
		t.Fatal("this build compressed no message of formatLog")
	}
	if got, want := old.AppliedIndex(), fresh.AppliedIndex(); got != want {
		t.Fatalf("old file applied %d, this build %d", got, want)
	}
	if got, want := allMessages(t, old), allMessages(t, fresh); got != want {
		t.Errorf("the old file's messages read differently from this build's")
	}
	if got, want := withoutMessages(t, old), withoutMessages(t, fresh); got != want {
		t.Errorf("the old file's other buckets differ from this build's")
	}

	// More entries on both: the old file now holds both kinds.
	next := old.AppliedIndex() + 1
	long := testMessage("after-upgrade", "upgrade", strings.Repeat("a longer text that compresses well. ", 40))
	for _, f := range []*FSM{old, fresh} {
		mustSendResult(t, applyOne(f, sendEntry(t, next, baseTS+int64(next)*1000, long)))
	}
	if plain, compressed := messageValues(t, old); plain == 0 || compressed != 1 {
		t.Errorf("after a send the old file holds %d plain and %d compressed values, want both kinds", plain, compressed)
	}
	if got, want := allMessages(t, old), allMessages(t, fresh); got != want {
		t.Errorf("after a send, the old file's messages read differently from this build's")
	}
	m, err := old.Message("after-upgrade")
	if err != nil || m.Content.Text != long.Content.Text {
		t.Errorf("Message(after-upgrade) on the old file = %v, %v", m, err)
	}
}

// A message's value is compressed only when that pays: short and
// incompressible ones stay JSON; a damaged compressed value is an error
// naming its seq, never another message.
func TestMessageValue(t *testing.T) {
	short := []byte(`{"id":"a","content":{"text":"hi"}}`)
	if got := messageValue(short); !bytes.Equal(got, short) {
		t.Errorf("a short value was changed: %q", got)
	}
	noise := make([]byte, 600)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	if got := messageValue(noise); !bytes.Equal(got, noise) {
		t.Errorf("an incompressible value was changed (%d bytes of %d)", len(got), len(noise))
	}
	f, _ := openTemp(t)
	m := testMessage("long", "c", strings.Repeat("the same words again and again ", 30))
	mustSendResult(t, applyOne(f, sendEntry(t, 1, baseTS, m)))
	var stored []byte
	if err := f.db.View(func(tx *bbolt.Tx) error {
		stored = bytes.Clone(tx.Bucket(bucketMessages).Get(u64(1)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(stored, zstdMagic) || len(stored) >= len(m.Content.Text)/2 {
		t.Fatalf("stored value of %d bytes, beginning % x: want it compressed", len(stored), stored[:4])
	}
	if got, err := f.Message("long"); err != nil || got.Content.Text != m.Content.Text {
		t.Fatalf("Message(long) = %v, %v", got, err)
	}
	stored[len(stored)-6] ^= 0xff
	if err := f.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMessages).Put(u64(1), stored) }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Message("long"); err == nil || !strings.Contains(err.Error(), "seq 1") || !strings.Contains(err.Error(), "decompress") {
		t.Errorf("Message of a damaged value: %v, want a decompress error naming seq 1", err)
	}
	if _, err := f.MessagesAfter(0, 10); err == nil {
		t.Error("MessagesAfter over a damaged value succeeded")
	}
	if _, err := f.Overview("", 0, 10); err == nil {
		t.Error("Overview over a damaged value succeeded")
	}
}
