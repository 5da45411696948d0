package fsm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// Snapshot captures the state as of the last applied entry by opening a
// read transaction; Persist streams it, so applying goes on meanwhile and
// memory stays flat whatever the size of the state.
//
// A state file opened with NoSync is synced first: raft compacts the log
// up to the snapshot once it is persisted, and the state file on disk must
// never be older than what the log still holds (DESIGN.md). Raft calls
// Snapshot on the goroutine that applies, so nothing is applied between
// the sync and the read transaction.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, ErrClosed
	}
	if f.noSync {
		if err := f.db.Sync(); err != nil {
			return nil, fmt.Errorf("fsm: snapshot: sync the state file %s: %w", f.path, err)
		}
	}
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("fsm: snapshot: %w", err)
	}
	return &snapshot{tx: tx}, nil
}

type snapshot struct{ tx *bbolt.Tx }

// Persist writes the whole state file, as of the snapshot, to sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release ends the read transaction.
func (s *snapshot) Release() { _ = s.tx.Rollback() }

// Restore replaces the state with a snapshot: it writes the stream to a
// temporary file beside the state file, checks that it opens, and renames
// it over the state file. A crash at any point leaves either the old or the
// new file whole.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + ".restore"
	if err := writeFileSync(tmp, rc); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}
	// Opening the copy checks it is a bbolt file with our buckets.
	// bbolt.Open turns an empty file into a new, empty database, so the
	// buckets must be checked too, or an empty or foreign snapshot would
	// wipe the state.
	// CheckFile first: a damaged file could crash bbolt.Open.
	_, err := CheckFile(tmp, f.lockTimeout)
	var check *bbolt.DB
	if err == nil {
		err = SafeOpen(tmp, func() (err error) {
			check, err = bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: f.lockTimeout})
			return err
		})
	}
	if err == nil {
		err = check.View(func(tx *bbolt.Tx) error {
			// The meta bucket marks a state file; buckets a newer build
			// added are created when the file is opened.
			if tx.Bucket(bucketMeta) == nil {
				return fmt.Errorf("no bucket %q", bucketMeta)
			}
			return nil
		})
		if cerr := check.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fsm: restore: snapshot is not a state file: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		os.Remove(tmp)
		return ErrClosed
	}
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("fsm: restore: close state: %w", err)
	}
	f.db = nil
	renameErr := os.Rename(tmp, f.path)
	if renameErr == nil {
		renameErr = syncDir(filepath.Dir(f.path))
	}
	// Reopen whichever file is in place, so the node keeps a state either way.
	db, err := openDB(f.path, f.lockTimeout, f.noSync)
	if err != nil {
		return fmt.Errorf("fsm: restore: reopen: %w", err)
	}
	f.db = db
	f.applied.Store(readApplied(db))
	f.broadcast()
	if renameErr != nil {
		return fmt.Errorf("fsm: restore: %w", renameErr)
	}
	f.logger.Info("fsm: restored state from snapshot", "applied_index", f.applied.Load())
	return nil
}

func writeFileSync(path string, r io.Reader) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
