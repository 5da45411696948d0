// Package blobstore is a content-addressed store of immutable blobs on one
// node's disk: artifacts' bytes, named by their SHA-256 as
// "sha256:<64 lowercase hex>". The Raft log only references a blob by that
// id; package cluster copies blobs between nodes. See DESIGN.md.
//
// A blob is written to a temporary file in the store's directory while it
// is hashed, fsynced, renamed to its final name (sha256/<2 hex>/<64 hex>)
// and the directory fsynced, so a final name never shows a partial blob.
// Every Open reads the whole file once and checks it against its id.
package blobstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/maos-project/maos/durable"
)

// IDPrefix starts every blob id.
const IDPrefix = "sha256:"

// Sentinel errors; the typed errors below wrap them.
var (
	// ErrMissing: the store holds no blob of that id.
	ErrMissing = errors.New("blob missing")
	// ErrDamaged: the file under the id's name does not hash to the id (or
	// cannot be read); Open moved it aside (see DamagedDir).
	ErrDamaged = errors.New("blob damaged")
	// ErrTooLarge: a Put's reader held more than its max bytes (*TooLargeError).
	ErrTooLarge = errors.New("blob too large")
	// ErrMismatch: PutExpect's bytes hash to another id (*MismatchError).
	ErrMismatch = errors.New("blob bytes do not match the id")
	// ErrInvalidID: the id is not "sha256:" and 64 lowercase hex digits.
	ErrInvalidID = errors.New("not a blob id")
)

// TooLargeError is a Put refused because its reader held more than Max
// bytes. Nothing of it is kept.
type TooLargeError struct{ Max int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("blobstore: more than %d bytes", e.Max)
}

// Unwrap lets errors.Is(err, ErrTooLarge) match.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// MismatchError is a PutExpect whose bytes are not the blob it expected.
type MismatchError struct{ Want, Got string }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("blobstore: bytes of %s hash to %s", e.Want, e.Got)
}

// Unwrap lets errors.Is(err, ErrMismatch) match.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// ID is the id of the bytes whose SHA-256 is sum: IDPrefix and sum in
// lowercase hex. The one spelling of a content address (api.ArtifactID is
// this).
func ID(sum []byte) string { return IDPrefix + hex.EncodeToString(sum) }

// ValidID reports whether id is "sha256:" and 64 lowercase hex digits: the
// one check of a content address (api.ValidArtifactID is this).
func ValidID(id string) bool {
	h, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func checkID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("blobstore: %q: %w (want %s and 64 lowercase hex digits)", clip(id), ErrInvalidID, IDPrefix)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Names inside the store's directory.
const (
	blobDir    = "sha256"
	tempPrefix = ".tmp-"
	// DamagedDir holds the files Open found damaged, moved aside (one per
	// id, the latest), for an operator to inspect; a good copy then takes
	// the id's name.
	DamagedDir = "damaged"
)

// Store is a content-addressed blob store under one directory. It is safe
// for concurrent use by one process (several Puts of the same blob each
// write their own temporary file; the last rename wins, with the same
// bytes).
type Store struct {
	dir string
	now func() time.Time
}

// Open opens (creating it if needed) the store under dir and removes the
// temporary files an interrupted Put left behind. Only one process may use
// a store at once (maosd holds its data dir's lock).
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, now: time.Now}
	for _, d := range []string{dir, filepath.Join(dir, blobDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blobstore: open %s: %w", dir, err)
		}
	}
	if _, err := s.CleanTemps(0); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is the file that holds blob id (whether or not it exists), for
// tests and operators.
func (s *Store) Path(id string) string {
	h := strings.TrimPrefix(id, IDPrefix)
	if len(h) < 2 {
		h = "xx" + h
	}
	return filepath.Join(s.dir, blobDir, h[:2], h)
}

// Put stores the bytes of r (at most max bytes; max ≤ 0: no limit) and
// returns their id and length. More than max bytes is a *TooLargeError; a
// read error is returned wrapped. Either way nothing is kept. A blob
// already stored (same id, same size) writes no new file: its time is
// touched, so GC sees it as fresh.
func (s *Store) Put(r io.Reader, max int64) (id string, size int64, err error) {
	return s.put("", r, max)
}

// PutExpect stores the bytes of r as blob id, a copy pushed by a peer (at
// most max bytes; max ≤ 0: no limit): bytes that hash to another id are a
// *MismatchError and nothing is kept. It returns their length.
func (s *Store) PutExpect(id string, r io.Reader, max int64) (int64, error) {
	if err := checkID(id); err != nil {
		return 0, err
	}
	_, size, err := s.put(id, r, max)
	return size, err
}

func (s *Store) put(want string, r io.Reader, max int64) (id string, size int64, err error) {
	tmp, err := durable.CreateTemp(s.dir, tempPrefix+"*", 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("blobstore: temp file: %w", err)
	}
	defer tmp.Discard() // a no-op once committed
	h := sha256.New()
	src := r
	if max > 0 {
		src = io.LimitReader(r, max+1)
	}
	size, err = io.Copy(io.MultiWriter(tmp, h), src)
	if err != nil {
		return "", 0, fmt.Errorf("blobstore: write %s: %w", filepath.Base(tmp.Name()), err)
	}
	if max > 0 && size > max {
		return "", 0, &TooLargeError{Max: max}
	}
	id = ID(h.Sum(nil))
	if want != "" && id != want {
		return "", 0, &MismatchError{Want: want, Got: id}
	}
	final := s.Path(id)
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		// Stored already: no new file. Touch it so GC counts from now
		// (an upload of a blob GC is about to remove must not lose it).
		now := s.now()
		_ = os.Chtimes(final, now, now)
		return id, size, nil
	}
	if err := s.mkdirFor(final); err != nil {
		return "", 0, err
	}
	// The digest is checked: the bytes become the blob, fsynced, renamed
	// into the fan-out directory, both directories fsynced (the temp
	// file's entry in the root is gone).
	if err := tmp.CommitTo(final); err != nil {
		return "", 0, fmt.Errorf("blobstore: store %s: %w", id, err)
	}
	return id, size, nil
}

// mkdirFor creates the fan-out directory of final and makes its entry
// durable in the parent.
func (s *Store) mkdirFor(final string) error {
	d := filepath.Dir(final)
	if _, err := os.Stat(d); err == nil {
		return nil
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("blobstore: mkdir: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(d)); err != nil {
		return fmt.Errorf("blobstore: fsync %s: %w", filepath.Dir(d), err)
	}
	return nil
}

// Open returns blob id's file, positioned at 0, and its length, after
// reading it once whole and checking it against the id. No such blob is an
// error wrapping ErrMissing; a file that does not match (or cannot be read
// whole) is an error wrapping ErrDamaged, and the file is moved aside to
// DamagedDir so a good copy can take its place. The caller closes the file.
func (s *Store) Open(id string) (*os.File, int64, error) {
	if err := checkID(id); err != nil {
		return nil, 0, err
	}
	p := s.Path(id)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("blobstore: %s: %w", id, ErrMissing)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blobstore: open %s: %w", id, err)
	}
	size, got, err := hashFile(f)
	if err == nil && got == id {
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			return f, size, nil
		}
	}
	f.Close()
	why := fmt.Sprintf("hashes to %s", got)
	if err != nil {
		why = "unreadable: " + err.Error()
	}
	if merr := s.moveAside(id); merr != nil {
		why += "; moving it aside failed: " + merr.Error()
	}
	return nil, 0, fmt.Errorf("blobstore: %s: %w (%s)", id, ErrDamaged, why)
}

func hashFile(f *os.File) (int64, string, error) {
	var h hash.Hash = sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return n, "", err
	}
	return n, ID(h.Sum(nil)), nil
}

func (s *Store) moveAside(id string) error {
	d := filepath.Join(s.dir, DamagedDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	return os.Rename(s.Path(id), filepath.Join(d, strings.TrimPrefix(id, IDPrefix)))
}

// Has reports whether a file is stored under id (not checked: Open checks).
func (s *Store) Has(id string) bool {
	if !ValidID(id) {
		return false
	}
	fi, err := os.Stat(s.Path(id))
	return err == nil && fi.Mode().IsRegular()
}

// Remove deletes blob id; a blob not stored is not an error.
func (s *Store) Remove(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := os.Remove(s.Path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobstore: remove %s: %w", id, err)
	}
	return nil
}

// Info is one stored blob as Walk sees it: its id, length in bytes, and
// the time it was stored (or last Put again).
type Info struct {
	ID      string
	Size    int64
	ModTime time.Time
}

// Walk calls fn for every stored blob (in no promised order; files that
// are not blobs are skipped) until fn returns an error, which Walk
// returns. Blobs added or removed meanwhile may or may not be seen.
func (s *Store) Walk(fn func(Info) error) error {
	root := filepath.Join(s.dir, blobDir)
	fans, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("blobstore: walk: %w", err)
	}
	for _, fan := range fans {
		if !fan.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			return fmt.Errorf("blobstore: walk: %w", err)
		}
		for _, e := range ents {
			id := IDPrefix + e.Name()
			if !e.Type().IsRegular() || !ValidID(id) || !strings.HasPrefix(e.Name(), fan.Name()) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if err := fn(Info{ID: id, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// List returns every stored blob (Walk's order).
func (s *Store) List() ([]Info, error) {
	var out []Info
	err := s.Walk(func(i Info) error { out = append(out, i); return nil })
	return out, err
}

// CleanTemps removes the temporary files of Puts older than age (0: all,
// as Open does before any Put runs) and returns how many it removed.
func (s *Store) CleanTemps(age time.Duration) (int, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("blobstore: clean temps: %w", err)
	}
	n := 0
	cut := s.now().Add(-age)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if age > 0 {
			fi, err := e.Info()
			if err != nil || fi.ModTime().After(cut) {
				continue
			}
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}
