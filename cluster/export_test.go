package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// What the cluster's own external tests (package cluster_test, which run
// nodes through cluster/clustertest) reach inside a node for. Test builds
// only.

// CleanMarkerFile is the name of the clean-close marker in a data dir.
const CleanMarkerFile = cleanMarkerFile

// NeedLoopbackIPs and NodeTLS are the internal tests' helpers of the same
// names (stream_test.go, tls_internal_test.go).
var (
	NeedLoopbackIPs = needLoopbackIPs
	NodeTLS         = nodeTLS
)

// Crash stops the node as a crash of its process would leave its data
// dir: no leadership transfer, no gossip leave, no clean marker, no free
// list written for the raft log. The files are closed (their locks must go
// for the test to reopen them in the same process), and the state file's
// Close syncs it, which a crash would not: the page cache keeps a crashed
// process's commits anyway. A reboot is simulated by changing the boot id
// the node is restarted with.
func (n *Node) Crash() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.shutdown)
		n.wg.Wait()
		err = n.release(false)
		n.closeErr = errors.New("cluster: the node crashed (test hook)")
	})
	return err
}

// SetTrimInterval makes the leader's retention trim run every d until the
// test ends.
func SetTrimInterval(t testing.TB, d time.Duration) {
	old := trimInterval
	trimInterval = d
	t.Cleanup(func() { trimInterval = old })
}

// RaftTransport is the node's Raft network transport, to send RPCs by
// hand.
func (n *Node) RaftTransport() *raft.NetworkTransport { return n.raftNet }

// StalePresence is how many received presence records the node dropped
// as not newer than the one it holds.
func (n *Node) StalePresence() uint64 { return n.presence.staleCount() }

// GossipPresence sends p to the gossip member named to, as a presence
// message of the broadcast queue would arrive.
func (n *Node) GossipPresence(to string, p api.Presence) error {
	msg, err := encodePresenceMsg(p)
	if err != nil {
		return err
	}
	ml := n.gossip.ml.Load()
	for _, m := range ml.Members() {
		if m.Name == to {
			return ml.SendReliable(m, msg)
		}
	}
	return fmt.Errorf("%s does not know gossip member %s", n.ID(), to)
}

// MergePresenceState hands the node ps as the presence part of a remote
// push/pull state.
func (n *Node) MergePresenceState(ps []api.Presence) error {
	state, err := marshalCompact(ps)
	if err != nil {
		return err
	}
	n.gossip.MergeRemoteState(append([]byte{statePresence}, state...), false)
	return nil
}

// StopGossip shuts the node's gossip down without a word to the others,
// as a crash would; Raft and the API go on.
func (n *Node) StopGossip() error { return n.gossip.shutdown() }

// CollectBlobs runs one GC pass over the node's blobs, as its loop does
// every minute (with no memory of records seen: only orphans an hour old
// and old temporary files go).
func (n *Node) CollectBlobs() { n.BlobPasses().Collect() }

// BlobPasses is a repair loop's memory apart from the node's own loop, for
// a test to run its passes by hand: Repair reads the records (and notes
// each id seen), Collect runs GC with what Repair saw.
type BlobPasses struct {
	n  *Node
	st *blobRepair
}

// BlobPasses starts a memory with nothing seen.
func (n *Node) BlobPasses() *BlobPasses {
	return &BlobPasses{n: n, st: &blobRepair{missing: map[string]*blobRetry{}, known: map[string]struct{}{}}}
}

// Repair runs one repair pass.
func (p *BlobPasses) Repair() { p.n.repairBlobs(p.st) }

// Collect runs one GC pass.
func (p *BlobPasses) Collect() { p.n.collectBlobs(p.st) }

// RaftEntry is the entry at index in the node's raft log.
func (n *Node) RaftEntry(index uint64) (*raft.Log, error) {
	var l raft.Log
	if err := n.store.GetLog(index, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// RaftIndexes are the node's last log, commit and raft-applied indexes.
func (n *Node) RaftIndexes() (last, commit, applied uint64) {
	return n.raft.LastIndex(), n.raft.CommitIndex(), n.raft.AppliedIndex()
}

// VersionChecks counts the times this node, leading, asked the servers
// whether the cluster's state version may rise (version.go), whatever
// the answer.
func (n *Node) VersionChecks() int64 { return n.versionChecks.Load() }
