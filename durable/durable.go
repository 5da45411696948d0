// Package durable writes files so that a crash leaves either the old file
// or the whole new one on disk, never a part of it: the bytes go to a
// temporary file in the target's directory, which is fsynced, closed and
// renamed onto the target, and then the directory is fsynced so the
// rename itself survives a power loss. It uses the standard library only.
//
// What is durable after each call returns nil:
//
//   - WriteFile, (*File).Commit and (*File).CommitTo: the target path names
//     a file with exactly the bytes written and the requested permissions;
//     its contents, the new directory entry and the removal of the
//     temporary file's entry are all on stable storage.
//   - (*File).CommitNew: the same, but it never replaces an existing file
//     (see there).
//   - Rename: the move of oldpath to newpath (both directories' entries).
//   - SyncDir: every entry of dir created, renamed or removed before it.
//
// Errors are those of the step that failed, unwrapped (an *fs.PathError
// or *os.LinkError naming the operation and the path, so errors.Is works
// against fs.ErrNotExist and the like); callers add their own context.
// When WriteFile, or a commit's chmod, fsync, close or rename, fails, no
// temporary file is left behind and the target is untouched (a caller of
// Create or CreateTemp that gives up before committing calls Discard,
// which a defer does). When only a directory fsync after the rename fails,
// the target is in place but may not survive a crash.
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// File is a temporary file that becomes its target on Commit. Write to it
// through the embedded *os.File (and read it back, for a check before the
// commit); do not Close it yourself. Discard, safe to defer, removes it
// unless it was committed.
type File struct {
	*os.File
	target string
	perm   fs.FileMode
	done   bool // committed or discarded: the temp name is no longer ours
}

// Create returns a temporary file in path's directory, hidden and named
// "." + base + ".*.tmp" (so no glob for the final name sees it), that
// Commit renames onto path.
func Create(path string, perm fs.FileMode) (*File, error) {
	f, err := CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp", perm)
	if err != nil {
		return nil, err
	}
	f.target = path
	return f, nil
}

// CreateTemp returns a temporary file in dir named after pattern as
// os.CreateTemp does, for a caller that learns the target only after
// writing (a content address): commit it with CommitTo, whose path must be
// on the same file system as dir.
func CreateTemp(dir, pattern string, perm fs.FileMode) (*File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &File{File: f, perm: perm}, nil
}

// Commit makes the file its target path (see Create), replacing a file
// already there. A File from CreateTemp has no target: use CommitTo.
func (f *File) Commit() error {
	if f.target == "" {
		f.Discard()
		return &fs.PathError{Op: "commit", Path: f.Name(), Err: errors.New("no target: use CommitTo")}
	}
	return f.CommitTo(f.target)
}

// CommitTo fsyncs and closes the file, renames it onto path (replacing a
// file already there) and fsyncs path's directory, and the temporary
// file's directory if it is another one. On an error before the rename
// the temporary file is removed.
func (f *File) CommitTo(path string) error {
	if err := f.finish(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		f.Discard()
		return err
	}
	f.done = true
	return syncDirs(filepath.Dir(f.Name()), filepath.Dir(path))
}

// CommitNew is Commit that never replaces a file: it hard-links the file
// to its target, which fails if the target exists, and removes the
// temporary name. Where hard links are not supported it renames the file
// after checking the target does not exist (a race with another writer
// can then replace it). An existing target is an error wrapping
// fs.ErrExist, and the temporary file is removed.
func (f *File) CommitNew() error {
	path := f.target
	if path == "" {
		f.Discard()
		return &fs.PathError{Op: "commit", Path: f.Name(), Err: errors.New("no target")}
	}
	if err := f.finish(); err != nil {
		return err
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			f.Discard()
			return err
		}
		if _, serr := os.Lstat(path); serr == nil {
			f.Discard()
			return &fs.PathError{Op: "commit", Path: path, Err: fs.ErrExist}
		}
		if err := os.Rename(f.Name(), path); err != nil {
			f.Discard()
			return err
		}
		f.done = true
		return SyncDir(filepath.Dir(path))
	}
	f.Discard() // the temporary name; the target keeps the bytes
	return SyncDir(filepath.Dir(path))
}

// finish sets the permissions, fsyncs and closes the file; on an error it
// removes it.
func (f *File) finish() error {
	if f.done {
		return &fs.PathError{Op: "commit", Path: f.Name(), Err: fs.ErrClosed}
	}
	err := f.Chmod(f.perm)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.Discard()
	}
	return err
}

// Discard closes and removes the temporary file unless it was committed.
// It is safe to call more than once and after a commit.
func (f *File) Discard() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// WriteFile replaces path with data, with permissions perm, through
// Create and Commit.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Discard()
		return err
	}
	return f.Commit()
}

// Rename renames oldpath to newpath and fsyncs newpath's directory, and
// oldpath's if it is another one.
func Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	return syncDirs(filepath.Dir(oldpath), filepath.Dir(newpath))
}

func syncDirs(a, b string) error {
	if err := SyncDir(b); err != nil {
		return err
	}
	if filepath.Clean(a) != filepath.Clean(b) {
		return SyncDir(a)
	}
	return nil
}

// SyncDir fsyncs directory dir, so that the entries created, renamed or
// removed in it before the call survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
