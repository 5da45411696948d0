package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func idOf(b []byte) string {
	s := sha256.Sum256(b)
	return IDPrefix + hex.EncodeToString(s[:])
}

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// entries lists the names directly in the store's directory.
func entries(t *testing.T, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func noTemps(t *testing.T, s *Store) {
	t.Helper()
	for _, n := range entries(t, s) {
		if strings.HasPrefix(n, tempPrefix) {
			t.Errorf("temporary file %s left behind", n)
		}
	}
}

func readAll(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	f, size, err := s.Open(id)
	if err != nil {
		t.Fatalf("Open(%s): %v", id, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != size {
		t.Fatalf("Open size %d, read %d", size, len(b))
	}
	return b
}

func TestPutOpenRoundTrip(t *testing.T) {
	s := open(t)
	data := bytes.Repeat([]byte("artifact bytes\n"), 10000)
	id, size, err := s.Put(bytes.NewReader(data), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if id != idOf(data) || size != int64(len(data)) {
		t.Fatalf("Put = %s, %d; want %s, %d", id, size, idOf(data), len(data))
	}
	if got := readAll(t, s, id); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if !s.Has(id) {
		t.Fatal("Has = false after Put")
	}
	if want := filepath.Join(s.Dir(), "sha256", id[7:9], id[7:]); s.Path(id) != want {
		t.Fatalf("Path = %s, want %s", s.Path(id), want)
	}
	noTemps(t, s)
}

func TestPutEmpty(t *testing.T) {
	s := open(t)
	id, size, err := s.Put(strings.NewReader(""), 10)
	if err != nil || size != 0 || id != idOf(nil) {
		t.Fatalf("Put(empty) = %s, %d, %v", id, size, err)
	}
	if got := readAll(t, s, id); len(got) != 0 {
		t.Fatalf("read %d bytes", len(got))
	}
}

func TestPutAgainWritesNoNewFile(t *testing.T) {
	s := open(t)
	data := []byte("same bytes")
	id, _, err := s.Put(bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(s.Path(id))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(s.Path(id), old, old); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(bytes.NewReader(data), 0); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(s.Path(id))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("Put of a stored blob replaced its file")
	}
	if after.ModTime().Before(time.Now().Add(-time.Hour)) {
		t.Fatalf("Put of a stored blob did not touch it: mtime %v", after.ModTime())
	}
	noTemps(t, s)
}

func TestPutTooLarge(t *testing.T) {
	s := open(t)
	_, _, err := s.Put(bytes.NewReader(make([]byte, 11)), 10)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Max != 10 || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put(11 bytes, max 10) = %v, want a *TooLargeError of 10", err)
	}
	if _, _, err := s.Put(bytes.NewReader(make([]byte, 10)), 10); err != nil {
		t.Fatalf("Put(10 bytes, max 10) = %v", err)
	}
	noTemps(t, s)
	if l, _ := s.List(); len(l) != 1 {
		t.Fatalf("List = %v, want the 10-byte blob only", l)
	}
}

func TestPutExpect(t *testing.T) {
	s := open(t)
	data := []byte("pushed by a peer")
	size, err := s.PutExpect(idOf(data), bytes.NewReader(data), 0)
	if err != nil || size != int64(len(data)) {
		t.Fatalf("PutExpect = %d, %v", size, err)
	}
	if got := readAll(t, s, idOf(data)); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}

	other := idOf([]byte("something else"))
	_, err = s.PutExpect(other, bytes.NewReader(data), 0)
	var me *MismatchError
	if !errors.As(err, &me) || me.Want != other || me.Got != idOf(data) || !errors.Is(err, ErrMismatch) {
		t.Fatalf("PutExpect(wrong id) = %v, want a *MismatchError", err)
	}
	if s.Has(other) {
		t.Fatal("mismatched bytes kept under the expected id")
	}
	if _, err := s.PutExpect("sha256:nothex", bytes.NewReader(data), 0); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("PutExpect(bad id) = %v, want ErrInvalidID", err)
	}
	noTemps(t, s)
}

func TestOpenMissing(t *testing.T) {
	s := open(t)
	if _, _, err := s.Open(idOf([]byte("never stored"))); !errors.Is(err, ErrMissing) {
		t.Fatalf("Open = %v, want ErrMissing", err)
	}
	if _, _, err := s.Open("sha256:XYZ"); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("Open(bad id) = %v, want ErrInvalidID", err)
	}
}

// A flipped byte is found on Open: the file is moved aside, the id reads
// as missing, and a good copy (PutExpect, as a peer's fetch) replaces it.
func TestOpenDamaged(t *testing.T) {
	s := open(t)
	data := bytes.Repeat([]byte{7}, 4096)
	id, _, err := s.Put(bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, s.Path(id), 100)
	if _, _, err := s.Open(id); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open(damaged) = %v, want ErrDamaged", err)
	}
	if s.Has(id) {
		t.Fatal("damaged file still under its id")
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), DamagedDir, id[7:])); err != nil {
		t.Fatalf("damaged file not moved aside: %v", err)
	}
	if _, _, err := s.Open(id); !errors.Is(err, ErrMissing) {
		t.Fatalf("Open after damage = %v, want ErrMissing", err)
	}
	if _, err := s.PutExpect(id, bytes.NewReader(data), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, id); !bytes.Equal(got, data) {
		t.Fatal("repaired bytes differ")
	}
}

// A truncated file (same name, fewer bytes) is damaged too.
func TestOpenTruncated(t *testing.T) {
	s := open(t)
	id, _, err := s.Put(strings.NewReader("0123456789"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(s.Path(id), 5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(id); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open(truncated) = %v, want ErrDamaged", err)
	}
}

type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

// An upload cut short (the reader fails midway) leaves nothing, under any
// name; a temp file a crash left behind is never a blob and Open cleans it.
func TestInterruptedWrite(t *testing.T) {
	s := open(t)
	cut := errors.New("connection reset")
	if _, _, err := s.Put(&failingReader{n: 100000, err: cut}, 0); !errors.Is(err, cut) {
		t.Fatalf("Put(failing) = %v, want the read error", err)
	}
	noTemps(t, s)
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("List after a failed Put = %v", l)
	}

	// A crash mid-write: the temp file stays, never seen as a blob.
	crashed := filepath.Join(s.Dir(), tempPrefix+"crashed")
	if err := os.WriteFile(crashed, []byte("half a blob"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("a temp file is listed as a blob: %v", l)
	}
	if s.Has(idOf([]byte("half a blob"))) {
		t.Fatal("a temp file is visible under its id")
	}
	// Young temps survive CleanTemps(age) (a Put may be writing them).
	if n, err := s.CleanTemps(time.Hour); err != nil || n != 0 {
		t.Fatalf("CleanTemps(1h) = %d, %v; want 0 (the temp is young)", n, err)
	}
	s2, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	noTemps(t, s2)
}

func TestRemoveAndWalk(t *testing.T) {
	s := open(t)
	var ids []string
	for _, b := range []string{"a", "b", "c"} {
		id, _, err := s.Put(strings.NewReader(b), 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Files that are not blobs are skipped.
	if err := os.WriteFile(filepath.Join(s.Dir(), "sha256", "README"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := s.List()
	if err != nil || len(l) != 3 {
		t.Fatalf("List = %v, %v; want 3 blobs", l, err)
	}
	for _, i := range l {
		if i.Size != 1 || time.Since(i.ModTime) > time.Minute {
			t.Fatalf("Info %+v", i)
		}
	}
	if err := s.Remove(ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ids[1]); err != nil {
		t.Fatalf("Remove twice = %v, want nil", err)
	}
	if s.Has(ids[1]) {
		t.Fatal("removed blob still there")
	}
	if l, _ := s.List(); len(l) != 2 {
		t.Fatalf("List after Remove = %v", l)
	}
}

func TestValidID(t *testing.T) {
	good := idOf([]byte("x"))
	for s, want := range map[string]bool{
		good: true, strings.ToUpper(good): false, good[:70]: false, "sha1:" + good[7:]: false, good + "0": false,
	} {
		if ValidID(s) != want {
			t.Errorf("ValidID(%q) = %v", s, !want)
		}
	}
}

// flipByte inverts the byte at off of the file at path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
