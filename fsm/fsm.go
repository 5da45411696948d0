package fsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// FSM is the replicated state machine. It implements raft.BatchingFSM.
//
// Apply, ApplyBatch, Snapshot and Restore are called by raft from one
// goroutine; the queries may be called from any goroutine at any time.
type FSM struct {
	path        string
	logger      *slog.Logger
	lockTimeout time.Duration
	noSync      bool // Options.NoSync

	// mu guards db: queries and apply hold it shared, Restore exclusively
	// while it swaps the file.
	mu sync.RWMutex
	db *bbolt.DB

	applied atomic.Uint64
	// command is the index of the last command applied other than an
	// OpNoop: what a leader's commit push has to make known.
	command atomic.Uint64

	ops   map[api.Op]opSpec // registry(), built by Open
	rules rulesCache

	// maxVersion is the highest state version this FSM applies:
	// MaxStateVersion unless Options.MaxStateVersion says less.
	maxVersion int

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced after every applied batch
}

// Options configure Open.
type Options struct {
	// Logger receives state-file events; nil means slog.Default().
	Logger *slog.Logger
	// LockTimeout bounds the wait for the state file's lock; a second
	// process opening the same file fails after it. Zero means 1 s.
	LockTimeout time.Duration
	// CleanlyClosed says the file's last writer closed it (the caller
	// knows, from a marker of its own): Open then checks its meta pages
	// (CheckMeta) instead of reading every page (CheckFile).
	CleanlyClosed bool
	// NoSync commits without fsync (bbolt's NoSync): a commit reaches the
	// page cache only, so a process crash loses nothing but a kernel crash
	// or power loss may leave the file behind or torn. Snapshot and Close
	// still sync the file. Only a caller that can tell a state file
	// written before a reboot and rebuild it from the Raft log may set it
	// (cluster does, with the boot id; see DESIGN.md, "The state file's
	// durability comes from the Raft log").
	NoSync bool
	// MaxStateVersion, for tests, makes this FSM behave as a build that
	// applies state versions up to it only (1..MaxStateVersion); zero is
	// the build's, MaxStateVersion. See cluster_version.go.
	MaxStateVersion int
	// OpVersions, for tests of the version gate, raises the state version
	// the named ops need (CheckVersion) above the registry's: each op must
	// be one the registry holds, each version 1..MaxStateVersion. Apply
	// is unchanged.
	OpVersions map[api.Op]int
}

// Open opens (or creates) the state file at path. It fails fast with a
// clear error if another process holds the file, and with a *CorruptError
// (errors.Is ErrCorrupt) naming it if CheckFile finds it damaged: the
// state is derived from the Raft log, so the caller may move the file
// aside and rebuild it from there.
func Open(path string, opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	f := &FSM{path: path, logger: opts.Logger, lockTimeout: opts.LockTimeout, noSync: opts.NoSync, notify: make(chan struct{})}
	f.ops = f.registry()
	if err := f.setVersions(opts.MaxStateVersion, opts.OpVersions); err != nil {
		return nil, err
	}
	warnings, err := CheckAfterClose(path, opts.LockTimeout, opts.CleanlyClosed)
	for _, w := range warnings {
		opts.Logger.Warn("fsm: state file: " + w)
	}
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("fsm: open %s: the state file is locked by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("fsm: state file %w", err)
	}
	db, err := openDB(path, opts.LockTimeout, opts.NoSync)
	if err != nil {
		return nil, err
	}
	f.db = db
	f.applied.Store(readApplied(db))
	if err := f.checkStateVersion(); err != nil {
		db.Close()
		return nil, err
	}
	return f, nil
}

// initialMmapSize is 10 GiB on 64-bit platforms, 1 GiB elsewhere.
const initialMmapSize = 1<<30 + (strconv.IntSize/64)*(9<<30)

func openDB(path string, lockTimeout time.Duration, noSync bool) (db *bbolt.DB, err error) {
	err = SafeOpen(path, func() (err error) {
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{
			Timeout: lockTimeout,
			// The freelist is rebuilt on open instead of written on every
			// commit: cheaper batches, at the cost of a scan at start.
			NoFreelistSync: true,
			FreelistType:   bbolt.FreelistMapType,
			// A large initial mapping avoids remaps, which wait for every
			// open read transaction: a snapshot being persisted holds one
			// for as long as it takes to copy the file (seconds at a
			// million messages), and a remap meanwhile stalls every apply
			// and, through raft, the followers' appends. Address space,
			// not memory; etcd maps 10 GiB for the same reason.
			InitialMmapSize: initialMmapSize,
		})
		return err
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("fsm: open %s: the state file is locked by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("fsm: open %s: %w", path, err)
	}
	if err := db.Update(createBuckets); err != nil {
		db.Close()
		return nil, err
	}
	// Set after the buckets' commit, so a new file starts out synced.
	db.NoSync = noSync
	return db, nil
}

func readApplied(db *bbolt.DB) uint64 {
	var idx uint64
	_ = db.View(func(tx *bbolt.Tx) error {
		idx = getU64(tx.Bucket(bucketMeta), keyAppliedIndex)
		return nil
	})
	return idx
}

// Close releases the state file. Queries after Close fail with ErrClosed.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	err := persistFreelist(f.db)
	err = errors.Join(err, f.db.Close())
	f.db = nil
	return err
}

// persistFreelist writes db's free list with one empty commit, so the next
// open (NoFreelistSync) reads it from its page instead of rebuilding it by
// reading every page of the file: 40 s for 4 GB on a cold cache. A crash
// leaves no written free list, and the next open rebuilds it as before.
//
// The commit is synced whatever Options.NoSync says, and its fsync flushes
// every unsynced commit before it: a cleanly closed file is durable.
func persistFreelist(db *bbolt.DB) error {
	db.NoFreelistSync = false
	db.NoSync = false
	if err := db.Update(func(*bbolt.Tx) error { return nil }); err != nil {
		return fmt.Errorf("fsm: write the free list: %w", err)
	}
	return nil
}

// PersistFreelist opens the bbolt file at path (closed by its owner), writes
// its free list (see FSM.Close) and closes it: for files opened by other
// code, such as raft-boltdb's log store, which has no hook at close.
func PersistFreelist(path string) error {
	var db *bbolt.DB
	err := SafeOpen(path, func() (err error) {
		// NoFreelistSync false: bbolt writes the list as it opens.
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, FreelistType: bbolt.FreelistMapType})
		return err
	})
	if err != nil {
		return fmt.Errorf("fsm: write the free list of %s: %w", path, err)
	}
	return db.Close()
}

// AppliedIndex is the Raft index of the last entry applied to the state.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// CommandIndex is the Raft index of the last command applied since Open
// other than an api.OpNoop (0 before the first). Safe to call anytime.
func (f *FSM) CommandIndex() uint64 { return f.command.Load() }

// WaitApplied blocks until the state has applied index, or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		ch := f.Changed()
		if f.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fsm: wait for applied index %d (at %d): %w", index, f.applied.Load(), ctx.Err())
		}
	}
}

// applyEntry applies one command entry at the time *lastTS allows and
// moves *lastTS. command is false for an api.OpNoop, which is skipped
// before the clock, as a build that does not know the op skips it: both
// leave lastTS unchanged. A *StateVersionError stops the batch.
func (f *FSM) applyEntry(tx *bbolt.Tx, l *raft.Log, lastTS *int64) (res any, command bool, err error) {
	cmd, err := decode(l.Data)
	if err != nil {
		return nil, true, err
	}
	if cmd.Op == api.OpNoop {
		return nil, false, nil
	}
	spec, ok := f.ops[cmd.Op]
	if !ok {
		return nil, true, fmt.Errorf("fsm: unknown op %q at index %d", cmd.Op, l.Index)
	}
	// Monotonic time: an entry never carries an earlier time than the one
	// before it, whatever the proposers' clocks say. At the largest int64
	// time stands still rather than wrapping around to 1677.
	ts := cmd.TS
	if ts <= *lastTS {
		ts = *lastTS
		if *lastTS < math.MaxInt64 {
			ts++
		}
	}
	*lastTS = ts
	res, err = spec.apply(tx, l.Index, ts, cmd.Body)
	return res, true, err
}

// Changed returns a channel closed at the next applied batch or restore:
// streams wait on it instead of polling.
func (f *FSM) Changed() <-chan struct{} {
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	return f.notify
}

func (f *FSM) broadcast() {
	f.notifyMu.Lock()
	close(f.notify)
	f.notify = make(chan struct{})
	f.notifyMu.Unlock()
}

// Apply applies one committed entry; see ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in one bbolt transaction and records
// the last index in it. It returns one result per entry: the op's result
// (*SendResult, *NodeInfo), an error value for a command that was refused
// (validation, conflict, unknown op) — refused commands change nothing — or
// nil for entries that are not commands or were applied before (at or below
// the stored applied index, which raft replays after a restart).
//
// A failure to write the state file panics: a node that cannot store what
// the log committed must stop rather than serve a state that skipped it.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	results := make([]any, len(logs))
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		panic("fsm: apply after close")
	}
	applied := f.applied.Load()
	var last, command uint64
	err := f.db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		lastTS := int64(getU64(meta, keyLastTS))
		for i, l := range logs {
			if l.Index <= applied {
				continue
			}
			last = l.Index
			if l.Type != raft.LogCommand {
				continue
			}
			res, isCommand, err := f.applyEntry(tx, l, &lastTS)
			if isCommand {
				command = l.Index
			}
			var tooOld *StateVersionError
			if errors.As(err, &tooOld) {
				return err // nothing of the batch is written; see below
			}
			if err != nil {
				results[i] = err
				continue
			}
			results[i] = res
		}
		if last == 0 {
			return errNothingApplied
		}
		if err := meta.Put(keyAppliedIndex, u64(last)); err != nil {
			return err
		}
		return meta.Put(keyLastTS, u64(uint64(lastTS)))
	})
	if errors.Is(err, errNothingApplied) {
		return results
	}
	if tooOld := (*StateVersionError)(nil); errors.As(err, &tooOld) {
		// The log says the cluster runs a version this build cannot
		// apply: every entry after it may be one this build would
		// misapply or skip, so the node stops rather than diverge.
		f.logger.Error("fsm: "+tooOld.Error()+"; stopping", "path", f.path)
		panic(tooOld.Error())
	}
	if err != nil {
		f.logger.Error("fsm: cannot write the state file; stopping", "path", f.path, "error", err)
		panic(fmt.Sprintf("fsm: apply batch ending at %d: %v", logs[len(logs)-1].Index, err))
	}
	f.applied.Store(last)
	if command != 0 {
		f.command.Store(command)
	}
	f.broadcast()
	return results
}

var errNothingApplied = errors.New("nothing applied")

// view runs fn in a read transaction of the current state file.
func (f *FSM) view(fn func(tx *bbolt.Tx) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return ErrClosed
	}
	return f.db.View(fn)
}

var _ raft.BatchingFSM = (*FSM)(nil)
