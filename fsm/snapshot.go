package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/durable"
)

// A snapshot is the state file compressed as one zstd stream (issue 19:
// the snapshot store held the state file's bytes again, a second copy as
// large as the first). zstd's fastest level: a snapshot is written while
// the node serves, so CPU matters more than the last percent; it keeps
// the stream's content checksum, so a damaged snapshot fails its restore
// rather than restoring something else. Restore reads both this and the
// plain state file that snapshots of earlier builds hold, telling them
// apart by zstd's frame magic (a bbolt file begins with page 0's id,
// eight zero bytes). A build before this one cannot restore a compressed
// snapshot (it refuses it as not a state file, changing nothing), so a
// cluster is upgraded as a whole.
const snapshotLevel = zstd.SpeedFastest

// zstdMagic begins every zstd frame (RFC 8878, 3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

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

// Persist writes the whole state file, as of the snapshot, to sink as one
// zstd stream (snapshotLevel), on one goroutine: the node's others serve.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	enc, err := zstd.NewWriter(sink, zstd.WithEncoderLevel(snapshotLevel), zstd.WithEncoderConcurrency(1))
	if err == nil {
		_, err = s.tx.WriteTo(enc)
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
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
	src, done, err := snapshotReader(rc)
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	defer done()
	tmp := f.path + ".restore"
	if err := writeFileSync(tmp, src); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}
	// Opening the copy checks it is a bbolt file with our buckets.
	// bbolt.Open turns an empty file into a new, empty database, so the
	// buckets must be checked too, or an empty or foreign snapshot would
	// wipe the state.
	// CheckFile first: a damaged file could crash bbolt.Open.
	_, err = CheckFile(tmp, f.lockTimeout)
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
			if v := clusterVersion(tx); v > f.maxVersion {
				return &StateVersionError{Cluster: v, Build: f.maxVersion}
			}
			return nil
		})
		if cerr := check.Close(); err == nil {
			err = cerr
		}
	}
	if tooOld := (*StateVersionError)(nil); errors.As(err, &tooOld) {
		os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
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
	renameErr := durable.Rename(tmp, f.path)
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

// snapshotReader reads the state file out of a snapshot stream: a zstd
// stream (this build's Persist) is decompressed, anything else is read as
// it is (a plain state file, from a build before compression; garbage is
// refused later, when the copy is checked). done frees the decoder.
func snapshotReader(r io.Reader) (src io.Reader, done func(), err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(len(zstdMagic))
	if err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("read the snapshot: %w", err)
	}
	if !bytes.Equal(head, zstdMagic) {
		return br, func() {}, nil
	}
	dec, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, nil, fmt.Errorf("read the snapshot: %w", err)
	}
	return dec, dec.Close, nil
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
