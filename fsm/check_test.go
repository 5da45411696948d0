package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// boltLayout is what the damage tests need to know of a closed bbolt
// file: its page size, the current meta page, the root page and the
// high-water mark (pages [0, hwm) are in use).
type boltLayout struct {
	pageSize, root, hwm int64
	newestMeta          int // 0 or 1: the meta page of the last transaction
}

func layoutOf(t *testing.T, b []byte) boltLayout {
	t.Helper()
	le := binary.NativeEndian
	ps := int64(le.Uint32(b[16+8:]))
	meta := func(i int64) (txid, root, hwm int64) {
		m := b[i*ps+16:]
		return int64(le.Uint64(m[48:])), int64(le.Uint64(m[16:])), int64(le.Uint64(m[40:]))
	}
	tx0, root0, hwm0 := meta(0)
	tx1, root1, hwm1 := meta(1)
	if tx1 > tx0 {
		return boltLayout{pageSize: ps, root: root1, hwm: hwm1, newestMeta: 1}
	}
	return boltLayout{pageSize: ps, root: root0, hwm: hwm0, newestMeta: 0}
}

// closedStateFile returns the path and bytes of a closed state file that
// applied n entries (fillChannels), and its Dump.
func closedStateFile(t *testing.T, n int) (path string, data []byte, before string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "state.db")
	f := openAt(t, path)
	fillChannels(t, f, n)
	before = dump(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data, before
}

func garbage(n int64, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	return out
}

func TestCheckFileHealthy(t *testing.T) {
	path, _, _ := closedStateFile(t, 50)
	if w, err := CheckFile(path, 0); err != nil || len(w) != 0 {
		t.Errorf("CheckFile(healthy) = %q, %v", w, err)
	}
	dir := t.TempDir()
	if w, err := CheckFile(filepath.Join(dir, "missing.db"), 0); err != nil || len(w) != 0 {
		t.Errorf("CheckFile(missing) = %q, %v; want nothing (bbolt creates it)", w, err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := CheckFile(empty, 0); err != nil || len(w) != 0 {
		t.Errorf("CheckFile(empty) = %q, %v; want nothing (bbolt initializes it)", w, err)
	}
}

// TestOpenDamagedStateFile damages a state file the ways a disk or a
// careless operator does. Each must be reported by Open as a *CorruptError
// naming the file -- not crash the test binary, as bbolt alone does (a
// SIGBUS on a truncated page, a panic in its free-list goroutine on an
// overwritten one).
func TestOpenDamagedStateFile(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, b []byte, l boltLayout) []byte
		reason string // in the error
	}{
		{"truncated mid-page below the high-water mark", func(t *testing.T, b []byte, l boltLayout) []byte {
			return b[:l.hwm*l.pageSize-l.pageSize-1000]
		}, "truncated"},
		{"truncated to half its pages", func(t *testing.T, b []byte, l boltLayout) []byte {
			return b[:l.hwm*l.pageSize/2+123]
		}, "truncated"},
		{"root page overwritten", func(t *testing.T, b []byte, l boltLayout) []byte {
			copy(b[l.root*l.pageSize:], garbage(l.pageSize, 1))
			return b
		}, "reading its pages failed"},
		{"every page in use overwritten", func(t *testing.T, b []byte, l boltLayout) []byte {
			copy(b[2*l.pageSize:], garbage((l.hwm-2)*l.pageSize, 2))
			return b
		}, "reading its pages failed"},
		{"both meta pages overwritten", func(t *testing.T, b []byte, l boltLayout) []byte {
			copy(b, garbage(2*l.pageSize, 3))
			return b
		}, "both meta pages are invalid"},
		{"not a bbolt file", func(t *testing.T, b []byte, l boltLayout) []byte {
			return []byte(strings.Repeat("this is not a state file\n", 1000))
		}, "both meta pages are invalid"},
		{"too short", func(t *testing.T, b []byte, l boltLayout) []byte {
			return b[:100]
		}, "truncated"},
		{"shorter than a page header", func(t *testing.T, b []byte, l boltLayout) []byte {
			return b[:20]
		}, "too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, data, _ := closedStateFile(t, 200)
			damaged := tt.damage(t, data, layoutOf(t, data))
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}

			_, err := CheckFile(path, 0)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != path || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("CheckFile = %v (%T), want a *CorruptError for %s", err, err, path)
			}
			if !strings.Contains(ce.Reason, tt.reason) {
				t.Errorf("reason %q, want it to mention %q", ce.Reason, tt.reason)
			}
			f, err := Open(path, Options{Logger: quietLogger})
			if err == nil {
				f.Close()
				t.Fatalf("Open of a damaged state file succeeded")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open = %v, want an error wrapping ErrCorrupt naming %s", err, path)
			}
			t.Logf("Open: %v", err)
		})
	}
}

// TestOpenWithTornNewestMeta overwrites the meta page of the last
// transaction, as a torn write at power loss does: bbolt falls back to the
// previous transaction, which is a consistent state one batch behind. Open
// works, CheckFile warns, and re-applying the lost entry (which raft does,
// since the applied index went back with it) restores the same state.
func TestOpenWithTornNewestMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f := openAt(t, path)
	fillChannels(t, f, 20)
	last := f.AppliedIndex() + 1
	entry := sendEntry(t, last, baseTS+int64(last), testMessage("last-one", "alpha", "the last batch"))
	mustSendResult(t, applyOne(f, entry))
	want := dump(t, f)
	// A crash right after the last batch: the file is left without the
	// free-list commit of a clean Close, so the newest meta page is the
	// batch's.
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := layoutOf(t, data)
	copy(data[int64(l.newestMeta)*l.pageSize+16:], garbage(64, 4))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	w, err := CheckFile(path, 0)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "meta page") {
		t.Fatalf("CheckFile = %q, %v; want one warning about the meta page", w, err)
	}
	f = openAt(t, path)
	defer f.Close()
	if got := f.AppliedIndex(); got != last-1 {
		t.Fatalf("AppliedIndex = %d, want %d: the previous transaction", got, last-1)
	}
	mustSendResult(t, applyOne(f, entry))
	if got := dump(t, f); got != want {
		t.Errorf("state after re-applying the lost entry differs from before")
	}
}

// CheckMeta reads the meta pages and the length only: it catches what
// those show (truncation, bad meta pages) and leaves the interior to
// CheckFile -- or, for a file closed cleanly, to bbolt's own open.
func TestCheckMeta(t *testing.T) {
	path, data, _ := closedStateFile(t, 200)
	if w, err := CheckMeta(path); err != nil || len(w) != 0 {
		t.Fatalf("CheckMeta(healthy) = %q, %v", w, err)
	}
	l := layoutOf(t, data)
	for _, tc := range []struct {
		name    string
		damaged []byte
		want    string // "" for no error
	}{
		{"truncated", data[:l.hwm*l.pageSize/2+123], "truncated"},
		{"both meta pages", append(garbage(2*l.pageSize, 3), data[2*l.pageSize:]...), "both meta pages are invalid"},
		{"root page overwritten", func() []byte {
			b := bytes.Clone(data)
			copy(b[l.root*l.pageSize:], garbage(l.pageSize, 1))
			return b
		}(), ""},
	} {
		if err := os.WriteFile(path, tc.damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := CheckMeta(path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: CheckMeta = %v, want no error (it does not read the interior)", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: CheckMeta = %v, want a corrupt error saying %q", tc.name, err, tc.want)
		}
		if _, err := CheckFile(path, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: CheckFile = %v, want it corrupt", tc.name, err)
		}
		if _, err := CheckAfterClose(path, 0, false); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: CheckAfterClose after a crash = %v, want it corrupt", tc.name, err)
		}
		if _, err := CheckAfterClose(path, 0, true); (err != nil) != (tc.want != "") {
			t.Errorf("%s: CheckAfterClose after a clean close = %v, want CheckMeta's answer", tc.name, err)
		}
	}
}

// A clean Close writes the free list, so the next open reads it from its
// page instead of reading every page of the file; a crash leaves none.
func TestCloseWritesTheFreelist(t *testing.T) {
	freelistOf := func(path string) uint64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		l := layoutOf(t, b)
		return binary.NativeEndian.Uint64(b[int64(l.newestMeta)*l.pageSize+16+32:])
	}
	const noFreelist = ^uint64(0)
	path := filepath.Join(t.TempDir(), "state.db")
	f := openAt(t, path)
	fillChannels(t, f, 20)
	if err := f.db.Close(); err != nil { // a crash: no Close
		t.Fatal(err)
	}
	f.db = nil
	if got := freelistOf(path); got != noFreelist {
		t.Fatalf("after a crash the newest meta names free-list page %d, want none", got)
	}
	f = openAt(t, path)
	fillChannels(t, f, 5)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := freelistOf(path); got == noFreelist {
		t.Fatal("a clean Close left no free list: the next open reads every page")
	}
	f = openAt(t, path)
	defer f.Close()
	if got := f.AppliedIndex(); got == 0 {
		t.Fatal("reopened state lost its applied index")
	}
}
