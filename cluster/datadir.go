package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/durable"
	"github.com/maos-project/maos/fsm"
)

// openStores opens the files of the data dir -- raft.db, the snapshot
// store and state.db -- each bbolt file checked with fsm.CheckFile first,
// because bbolt crashes the process (SIGBUS, or a panic in a goroutine of
// its own) on a truncated or overwritten page. What a damaged file means:
//
//   - raft.db holds this node's log, term and vote, which no other file
//     can restore and which Raft's safety relies on: the node refuses to
//     start, with an error naming the file and saying how to bring the
//     node back (remove it from the cluster, delete the data dir, join
//     again as a new member).
//   - state.db is derived from the log. If the snapshots and the log reach
//     back to the start (they always do unless files were deleted by
//     hand), it is moved aside (state.db.damaged-TIME) and rebuilt: raft
//     restores the newest snapshot into the new, empty file and replays
//     the log after it. Otherwise the node refuses to start, as for
//     raft.db.
//
// The full check reads every page (half a minute for 3 GB on a cold
// cache), so it runs only after a crash: a node that closed both files
// without error leaves a CLEAN marker, and the next start checks just
// their meta pages and lengths (fsm.CheckMeta), which catches truncation.
// Damage done to a cleanly closed file's interior is then left to bbolt's
// own open, which reads every page header as it rebuilds its free list.
func (n *Node) openStores(hclogger hclog.Logger) error {
	dir := n.cfg.DataDir
	raftPath := filepath.Join(dir, raftDBFile)
	statePath := filepath.Join(dir, stateDBFile)

	// After a clean close the files need only their meta pages checked;
	// after a crash every page is read (CheckFile: seconds per GB).
	clean, err := takeCleanMarker(dir)
	if err != nil {
		return err
	}
	warnings, err := fsm.CheckAfterClose(raftPath, time.Second, clean)
	for _, w := range warnings {
		n.logger.Warn("raft log: " + w)
	}
	if errors.Is(err, fsm.ErrCorrupt) {
		return fmt.Errorf("cluster: raft log %w; a node cannot rebuild its raft log on its own: %s", err, n.rejoinAdvice())
	}
	if err == nil {
		err = fsm.SafeOpen(raftPath, func() (err error) {
			n.store, err = raftboltdb.New(raftboltdb.Options{
				Path:        raftPath,
				BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
			})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("cluster: open raft log %s: %w", raftPath, err)
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, hclogger); err != nil {
		return fmt.Errorf("cluster: snapshot store: %w", err)
	}

	// The state file commits without fsync: after an unclean stop it is
	// trusted only within the boot that wrote it (stateUntrusted).
	boot, bootErr := n.cfg.BootID()
	if bootErr == nil && boot == "" {
		bootErr = errors.New("the boot id is empty")
	}
	if !clean {
		if why := stateUntrusted(dir, boot, bootErr); why != "" {
			if err := n.setStateAside(statePath, "untrusted", errors.New("state file "+statePath+" cannot be trusted: "+why)); err != nil {
				return err
			}
		}
	}
	if err := recordBootID(dir, boot, bootErr); err != nil {
		return err
	}

	opts := fsm.Options{Logger: n.logger, CleanlyClosed: clean, NoSync: true,
		MaxStateVersion: n.cfg.MaxStateVersion, OpVersions: n.cfg.OpVersions}
	n.fsm, err = fsm.Open(statePath, opts)
	if !errors.Is(err, fsm.ErrCorrupt) {
		return err
	}
	if err := n.setStateAside(statePath, "damaged", err); err != nil {
		return err
	}
	opts.CleanlyClosed = false
	n.fsm, err = fsm.Open(statePath, opts)
	return err
}

// snapshotsRetained is how many snapshots the snapshot store keeps: one.
// raft writes a new snapshot into a temporary folder, fsyncs it and its
// metadata, renames it into place and only then removes the older ones,
// so a complete snapshot is on disk at every moment. A second one would
// be no fallback: compaction keeps only TrailingLogs entries (10,240)
// before the newest snapshot, far fewer than the SnapshotThreshold
// (65,536) between two of them, so the log no longer reaches back to an
// older snapshot and a state rebuilt from it would miss entries. Keeping
// two cost a second copy of the state (issue 19).
const snapshotsRetained = 1

// setStateAside moves the state file aside (state.db.<kind>-TIME), for
// the node to rebuild it from the snapshots and the raft log: raft
// restores the newest snapshot into the new, empty file (node.go's
// raftConfig sees it behind the snapshot) and replays the log after it.
// It refuses, with cause and the way back, when the log cannot do that.
func (n *Node) setStateAside(statePath, kind string, cause error) error {
	if why := n.cannotRebuildState(); why != "" {
		return fmt.Errorf("cluster: %w; it cannot be rebuilt from this node's raft log: %s; %s", cause, why, n.rejoinAdvice())
	}
	aside := statePath + "." + kind + "-" + time.Now().UTC().Format("20060102T150405.000Z")
	if err := durable.Rename(statePath, aside); err != nil {
		return fmt.Errorf("cluster: %w; moving it aside to rebuild it failed: %w", cause, err)
	}
	n.logger.Warn("state file is "+kind+"; moved it aside, rebuilding it from the snapshots and the raft log",
		"error", cause, "moved_to", aside)
	return nil
}

// bootIDFile in the data dir holds the boot id under which the node last
// opened its state file for writing ("unknown" if it could not be read).
const bootIDFile = "BOOT_ID"

// unknownBoot is what bootIDFile holds when the boot id could not be read.
const unknownBoot = "unknown"

// ProcBootID is Config.BootID's default: the kernel's boot id, which is
// new at every boot (a kernel crash or power loss means a new boot).
func ProcBootID() (string, error) {
	const path = "/proc/sys/kernel/random/boot_id"
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// stateUntrusted says why the state file in dir, left by an unclean stop,
// may have lost commits that were never synced, or "" if it can be
// trusted: it was written in this boot (a process crash loses nothing the
// kernel already has), or there is none, or the data dir records no boot
// (a build before this one, which synced every commit, wrote it).
func stateUntrusted(dir, boot string, bootErr error) string {
	if _, err := os.Stat(filepath.Join(dir, stateDBFile)); errors.Is(err, os.ErrNotExist) {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, bootIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("after an unclean stop, the boot it was written in cannot be read: %v", err)
	}
	recorded := strings.TrimSpace(string(b))
	switch {
	case bootErr != nil:
		return fmt.Sprintf("after an unclean stop, this boot's id cannot be read (%v), so a reboot since the state file was written cannot be ruled out", bootErr)
	case recorded == unknownBoot:
		return "after an unclean stop, the boot it was written in is unknown (its boot id could not be read then)"
	case recorded != boot:
		return fmt.Sprintf("it was written in boot %s and stopped uncleanly; the machine has rebooted since (boot %s), so commits not yet synced may be lost", recorded, boot)
	}
	return ""
}

// recordBootID durably records the current boot in dir (write a temporary
// file, sync it, rename it, sync the dir), before the state file is
// opened for writing. An unreadable boot id is recorded as unknown, so the
// next unclean stop rebuilds the state.
func recordBootID(dir, boot string, bootErr error) error {
	if bootErr != nil {
		boot = unknownBoot
	}
	path := filepath.Join(dir, bootIDFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == boot {
		return nil
	}
	if err := durable.WriteFile(path, []byte(boot+"\n"), 0o600); err != nil {
		return fmt.Errorf("cluster: record the boot id in %s: %w", path, err)
	}
	return nil
}

// cannotRebuildState says why an empty state file could not be brought up
// to date from this node's own snapshots and log, or "" if it can: raft
// restores the newest snapshot and replays the log after it, or, with no
// snapshot, the whole log, which then must start at index 1.
func (n *Node) cannotRebuildState() string {
	metas, err := n.snaps.List()
	if err != nil {
		return fmt.Sprintf("listing the snapshots failed: %v", err)
	}
	if len(metas) > 0 {
		return ""
	}
	first, err := n.store.FirstIndex()
	if err != nil {
		return fmt.Sprintf("reading the first index of the raft log failed: %v", err)
	}
	if first > 1 {
		return fmt.Sprintf("there is no snapshot and the log starts at index %d", first)
	}
	return ""
}

// rejoinAdvice tells the operator how to bring back a node whose data dir
// cannot be used.
func (n *Node) rejoinAdvice() string {
	return fmt.Sprintf("to bring node %s back, remove it from the cluster (maosctl cluster remove %s, against a healthy node), "+
		"delete its data dir %s and start it again with --join", n.cfg.NodeID, n.cfg.NodeID, n.cfg.DataDir)
}

// cleanMarkerFile in the data dir says the node that last used it closed
// its raft log and state file without error.
const cleanMarkerFile = "CLEAN"

// takeCleanMarker reports whether the data dir holds the clean-close
// marker, and removes it (durably) first, so that a crash from now on
// leaves none and the next start reads every page.
func takeCleanMarker(dir string) (bool, error) {
	path := filepath.Join(dir, cleanMarkerFile)
	switch err := os.Remove(path); {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("cluster: remove %s: %w", path, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return false, fmt.Errorf("cluster: remove %s: %w", path, err)
	}
	return true, nil
}

// putCleanMarker records a clean close of the stores in dir.
func putCleanMarker(dir string) error {
	path := filepath.Join(dir, cleanMarkerFile)
	if err := durable.WriteFile(path, []byte("the raft log and state file were closed cleanly; the next start checks only their meta pages\n"), 0o600); err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	return nil
}
