package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// entries lists dir's names, failing the test on an error.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func wantFile(t *testing.T, path, content string, perm fs.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != content {
		t.Errorf("%s holds %q, want %q", path, got, content)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != perm {
		t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), perm)
	}
}

func wantOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	got := entries(t, dir)
	if len(got) != len(names) {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
	for i := range got {
		if got[i] != names[i] {
			t.Fatalf("%s holds %q, want %q", dir, got, names)
		}
	}
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	wantFile(t, p, "one", 0o640)
	if err := WriteFile(p, []byte("two, longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantFile(t, p, "two, longer", 0o600)
	wantOnly(t, dir, "f")
}

func TestWriteFileMissingDirLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	err := WriteFile(filepath.Join(dir, "no", "f"), []byte("x"), 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile into a missing dir: %v, want an error wrapping fs.ErrNotExist", err)
	}
	wantOnly(t, dir)
}

func TestCommitToMissingDirRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	f, err := CreateTemp(dir, ".tmp-*", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Discard()
	if _, err := f.WriteString("bytes"); err != nil {
		t.Fatal(err)
	}
	err = f.CommitTo(filepath.Join(dir, "gone", "target"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CommitTo a missing dir: %v, want an error wrapping fs.ErrNotExist", err)
	}
	wantOnly(t, dir)
}

func TestCreateTempCommitToOtherDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "ab")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := CreateTemp(dir, ".tmp-*", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Discard()
	if _, err := f.WriteString("content"); err != nil {
		t.Fatal(err)
	}
	// A caller may read its bytes back before committing (a digest check).
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.CommitTo(filepath.Join(sub, "x")); err != nil {
		t.Fatal(err)
	}
	f.Discard() // after a commit: a no-op, the target stays
	wantFile(t, filepath.Join(sub, "x"), "content", 0o600)
	wantOnly(t, dir, "ab")
	if err := f.Commit(); err == nil {
		t.Error("a second commit succeeded")
	}
}

func TestCommitWithoutTargetFails(t *testing.T) {
	dir := t.TempDir()
	f, err := CreateTemp(dir, ".tmp-*", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("Commit of a CreateTemp file succeeded")
	}
	wantOnly(t, dir)
}

func TestDiscardRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	if len(entries(t, dir)) != 2 {
		t.Fatalf("no temporary file beside the target: %q", entries(t, dir))
	}
	f.Discard()
	f.Discard()
	wantOnly(t, dir, "f")
	wantFile(t, p, "old", 0o600)
}

func TestCommitNewNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.json")
	f, err := Create(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("first"); err != nil {
		t.Fatal(err)
	}
	if err := f.CommitNew(); err != nil {
		t.Fatal(err)
	}
	wantFile(t, p, "first", 0o644)
	wantOnly(t, dir, "m.json")

	g, err := Create(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteString("second"); err != nil {
		t.Fatal(err)
	}
	if err := g.CommitNew(); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CommitNew over an existing file: %v, want an error wrapping fs.ErrExist", err)
	}
	wantFile(t, p, "first", 0o644)
	wantOnly(t, dir, "m.json")
}

func TestRename(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "sub", "b")
	if err := WriteFile(a, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Rename(a, b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Rename into a missing dir: %v, want an error wrapping fs.ErrNotExist", err)
	}
	if err := os.Mkdir(filepath.Dir(b), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Rename(a, b); err != nil {
		t.Fatal(err)
	}
	wantFile(t, b, "x", 0o600)
	wantOnly(t, dir, "sub")
}

func TestSyncDirMissing(t *testing.T) {
	if err := SyncDir(filepath.Join(t.TempDir(), "no")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir of a missing dir: %v, want an error wrapping fs.ErrNotExist", err)
	}
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
