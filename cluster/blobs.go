package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/blobstore"
	"github.com/maos-project/maos/transport"
)

// Artifacts' bytes, beside the log (issue 17; blobstore/DESIGN.md). Each
// node keeps a blobstore under its data dir. An upload is stored here,
// pushed to every other voter in parallel, and acknowledged once a
// majority of the voters hold it fsynced; only then does the handler
// propose its record. A read is checked against the id; a missing or
// damaged copy is fetched from a peer (checked again) and kept. A repair
// loop copies what the records name and this node lacks (a node outside
// the push's majority, a new or restored node), and GC removes the blobs
// no record names. Snapshots never hold blobs.

var _ transport.Blobs = (*Node)(nil)

// blobsDir is the store's directory inside the data dir.
const blobsDir = "blobs"

// Timing of the blob paths; variables so tests can shorten them.
var (
	// blobQuorumTimeout bounds StoreBlob's wait for a majority of copies.
	blobQuorumTimeout = 2 * time.Minute
	// blobPushTimeout bounds a push, including those left to finish in
	// the background once a majority answered.
	blobPushTimeout = 5 * time.Minute
	// blobFetchTimeout bounds the repair loop's fetch of one blob.
	blobFetchTimeout = 2 * time.Minute
	// blobRepairInterval is how often the repair loop looks for missing
	// blobs when nothing is applied; blobRepairPace the least time between
	// two of its passes.
	blobRepairInterval = 30 * time.Second
	blobRepairPace     = 200 * time.Millisecond
	// blobFullRescan is how often the repair loop reads every record again
	// rather than only those recorded since its last pass.
	blobFullRescan = 5 * time.Minute
	// blobGCInterval is how often GC walks the store.
	blobGCInterval = time.Minute
	// blobOrphanAge is how old a blob no record names must be before GC
	// removes it: an upload stores its bytes before its record commits.
	blobOrphanAge = time.Hour
	// blobDeletedGrace is the same for a blob whose record this node saw
	// and that is now gone (deleted): long enough for an upload of the
	// same bytes again (which touches the file) to commit its record.
	blobDeletedGrace = blobQuorumTimeout + time.Minute
)

// blobPeer is another server of the Raft configuration and its API
// address ("" when no registry or gossip entry names one yet).
type blobPeer struct {
	id, addr string
	voter    bool
}

// blobPeers lists the other servers of the configuration (voters first),
// the number of voters, and whether this node is one.
func (n *Node) blobPeers() (peers []blobPeer, voters int, selfVoter bool, err error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, 0, false, fmt.Errorf("cluster: raft configuration: %w", err)
	}
	var others []blobPeer
	for _, s := range f.Configuration().Servers {
		voter := s.Suffrage == raft.Voter
		if voter {
			voters++
		}
		if string(s.ID) == n.cfg.NodeID {
			selfVoter = voter
			continue
		}
		p := blobPeer{id: string(s.ID), addr: n.apiAddrOf(string(s.ID)), voter: voter}
		if voter {
			peers = append(peers, p)
		} else {
			others = append(others, p)
		}
	}
	return append(peers, others...), voters, selfVoter, nil
}

// apiAddrOf is node id's API address in the replicated node registry
// (committed by a join or by the leader itself), "" when it has none. It
// is the only source of the addresses a node calls with its credential:
// what a gossip member advertises is anyone's to claim (no gossip key),
// so it is shown (status, members) but never called.
func (n *Node) apiAddrOf(id string) string {
	if info, err := n.fsm.Node(id); err == nil && info.APIAddr != "" {
		return info.APIAddr
	}
	return ""
}

// bgContext is a context for work that outlives a request: it ends after
// d or when the node shuts down.
func (n *Node) bgContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-n.shutdown:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// StoreBlob implements transport.Blobs: the bytes are stored here, then
// pushed to every other voter; it returns once a majority of the voters
// hold them, leaving the other pushes to finish in the background (bounded
// by blobPushTimeout). Too few copies before ctx ends or
// blobQuorumTimeout: an error wrapping api.ErrNotReady (503).
func (n *Node) StoreBlob(ctx context.Context, body io.Reader, max int64) (string, int64, error) {
	id, size, err := n.blobs.Put(body, max)
	if err != nil {
		if errors.Is(err, blobstore.ErrTooLarge) {
			return "", 0, fmt.Errorf("%w: %w", api.ErrTooLarge, err)
		}
		return "", 0, fmt.Errorf("cluster: store artifact: %w", err)
	}
	if err := n.replicateBlob(ctx, id, size); err != nil {
		return "", 0, err
	}
	return id, size, nil
}

type pushResult struct {
	peer string
	err  error
}

// replicateBlob pushes blob id to the other voters until a majority of the
// voters (this node counted if it is one) hold it.
func (n *Node) replicateBlob(ctx context.Context, id string, size int64) error {
	peers, voters, selfVoter, err := n.blobPeers()
	if err != nil {
		return fmt.Errorf("%w: artifact %s: %w", api.ErrNotReady, id, err)
	}
	need := voters/2 + 1
	acks := 0
	if selfVoter {
		acks = 1
	}
	var targets []blobPeer
	for _, p := range peers {
		if p.voter {
			targets = append(targets, p)
		}
	}
	if acks >= need {
		return nil
	}
	bg, cancel := n.bgContext(blobPushTimeout)
	results := make(chan pushResult, len(targets))
	for _, p := range targets {
		go func() { results <- pushResult{p.id, n.pushBlob(bg, p, id, size)} }()
	}
	timer := time.NewTimer(blobQuorumTimeout)
	defer timer.Stop()
	var failures []string
	got := 0
	for acks < need && got < len(targets) {
		var r pushResult
		select {
		case r = <-results:
		case <-ctx.Done():
			failures = append(failures, "the request ended: "+ctx.Err().Error())
		case <-timer.C:
			failures = append(failures, fmt.Sprintf("no majority within %v", blobQuorumTimeout))
		case <-n.shutdown:
			failures = append(failures, "the node is shutting down")
		}
		if r.peer == "" {
			break // a failure above
		}
		got++
		if r.err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", r.peer, r.err))
			n.logger.Warn("artifact: push to a peer failed", "id", id, "peer", r.peer, "error", r.err)
			continue
		}
		acks++
	}
	if acks < need {
		cancel()
		return fmt.Errorf("%w: artifact %s is on %d of %d voters, a majority needs %d (%s); nothing was recorded, retry once more nodes are up",
			api.ErrNotReady, id, acks, voters, need, strings.Join(failures, "; "))
	}
	// The rest finish in the background; the repair loop covers a failure.
	go func() {
		defer cancel()
		for range len(targets) - got {
			if r := <-results; r.err != nil {
				n.logger.Warn("artifact: push to a peer failed (after the majority; the repair loop will copy it)", "id", id, "peer", r.peer, "error", r.err)
			}
		}
	}()
	return nil
}

// pushBlob sends this node's copy of id to p (which checks it).
func (n *Node) pushBlob(ctx context.Context, p blobPeer, id string, size int64) error {
	if p.addr == "" {
		return fmt.Errorf("node %s has no known API address", p.id)
	}
	f, err := os.Open(n.blobs.Path(id))
	if err != nil {
		return fmt.Errorf("open local copy: %w", err)
	}
	defer f.Close()
	return n.client(p.addr).PushBlob(ctx, id, f, size)
}

// OpenBlob implements transport.Blobs: this node's copy if it is good,
// else a peer's, fetched, checked and kept, with the source saying so.
func (n *Node) OpenBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, string, error) {
	f, size, err := n.blobs.Open(id)
	if err == nil {
		return f, size, "local", nil
	}
	why := "local copy missing"
	switch {
	case errors.Is(err, blobstore.ErrDamaged):
		why = "local copy damaged"
	case errors.Is(err, blobstore.ErrMissing):
	default:
		return nil, 0, "", fmt.Errorf("cluster: artifact %s: %w", id, err)
	}
	n.logger.Warn("artifact: "+why+"; fetching a good copy from a peer", "id", id, "error", err)
	peer, ferr := n.fetchBlob(ctx, id)
	if ferr != nil {
		return nil, 0, "", fmt.Errorf("cluster: artifact %s: %s, and %w", id, why, ferr)
	}
	f, size, err = n.blobs.Open(id)
	if err != nil {
		return nil, 0, "", fmt.Errorf("cluster: artifact %s: fetched from %s but: %w", id, peer, err)
	}
	return f, size, fmt.Sprintf("peer %s (%s)", peer, why), nil
}

// fetchBlob copies blob id from the first peer that has a good copy (each
// checked twice: by the peer, and against the id as it is stored here)
// and returns that peer's id; none: an error wrapping api.ErrNotFound.
func (n *Node) fetchBlob(ctx context.Context, id string) (string, error) {
	peers, _, _, err := n.blobPeers()
	if err != nil {
		return "", err
	}
	var tried []string
	for _, p := range peers {
		if ctx.Err() != nil {
			tried = append(tried, ctx.Err().Error())
			break
		}
		if p.addr == "" {
			tried = append(tried, p.id+": no known API address")
			continue
		}
		r, err := n.client(p.addr).FetchBlob(ctx, id)
		if err == nil {
			_, err = n.blobs.PutExpect(id, r, 0)
			r.Close()
		}
		if err == nil {
			n.logger.Info("artifact: copied from a peer", "id", id, "peer", p.id)
			return p.id, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", p.id, err))
	}
	if len(tried) == 0 {
		tried = append(tried, "none: this node is alone")
	}
	return "", fmt.Errorf("no other node has a good copy (asked %s): %w", strings.Join(tried, "; "), api.ErrNotFound)
}

// ReceiveBlob implements transport.Blobs: a peer's push, kept when the
// bytes hash to id.
func (n *Node) ReceiveBlob(ctx context.Context, id string, body io.Reader, size int64) error {
	if _, err := n.blobs.PutExpect(id, body, 0); err != nil {
		if errors.Is(err, blobstore.ErrMismatch) || errors.Is(err, blobstore.ErrInvalidID) {
			return fmt.Errorf("%w: %w", api.ErrInvalid, err)
		}
		return fmt.Errorf("cluster: receive artifact %s: %w", id, err)
	}
	return nil
}

// LocalBlob implements transport.Blobs: this node's own copy, checked;
// none or a damaged one (logged) is an error wrapping api.ErrNotFound.
func (n *Node) LocalBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, error) {
	f, size, err := n.blobs.Open(id)
	switch {
	case err == nil:
		return f, size, nil
	case errors.Is(err, blobstore.ErrDamaged):
		n.logger.Warn("artifact: local copy damaged (a peer asked for it)", "id", id, "error", err)
		fallthrough
	case errors.Is(err, blobstore.ErrMissing):
		return nil, 0, fmt.Errorf("node %s has no good copy of artifact %s (%w): %w", n.cfg.NodeID, id, err, api.ErrNotFound)
	}
	return nil, 0, fmt.Errorf("cluster: artifact %s: %w", id, err)
}

// BlobStore is the node's blob store, for tests and tools that inspect it.
func (n *Node) BlobStore() *blobstore.Store { return n.blobs }

// openBlobs opens the blob store under the data dir.
func (n *Node) openBlobs() error {
	s, err := blobstore.Open(filepath.Join(n.cfg.DataDir, blobsDir))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	n.blobs = s
	return nil
}

// blobRepair is the repair loop's memory.
type blobRepair struct {
	after    uint64                // the last record index read
	lastFull time.Time             // the last full rescan
	missing  map[string]*blobRetry // records whose bytes this node lacks
	known    map[string]struct{}   // ids this node has seen a record of
}

// blobRetry paces the fetches of one missing blob: a blob no peer has
// yet (its push still running) or any more is not asked for on every
// applied batch.
type blobRetry struct {
	next time.Time
	wait time.Duration
}

// maxBlobRetryWait caps the wait between two fetches of a missing blob.
const maxBlobRetryWait = 5 * time.Minute

// blobLoop repairs (after applied changes and every blobRepairInterval)
// and collects garbage (every blobGCInterval) until shutdown.
func (n *Node) blobLoop() {
	defer n.wg.Done()
	st := &blobRepair{missing: map[string]*blobRetry{}, known: map[string]struct{}{}}
	tick := time.NewTicker(blobRepairInterval)
	defer tick.Stop()
	gc := time.NewTicker(blobGCInterval)
	defer gc.Stop()
	for {
		changed := n.fsm.Changed() // before reading, so nothing applied in between is missed
		n.repairBlobs(st)
		select {
		case <-n.shutdown:
			return
		case <-changed:
		case <-tick.C:
		case <-gc.C:
			n.collectBlobs(st)
		}
		select {
		case <-n.shutdown:
			return
		case <-time.After(blobRepairPace):
		}
	}
}

// maxRepairFetches bounds the fetches of one repair pass, so a long list
// of blobs no peer has does not hold the loop.
const maxRepairFetches = 16

// repairBlobs reads the records since the last pass (all of them every
// blobFullRescan) and fetches, one at a time, the blobs this node lacks.
func (n *Node) repairBlobs(st *blobRepair) {
	if time.Since(st.lastFull) >= blobFullRescan {
		st.after, st.lastFull = 0, time.Now()
	}
	for range 1000 { // pages; bounded
		page, err := n.fsm.Artifacts(api.ArtifactQuery{After: st.after, Limit: api.MaxPageLimit})
		if err != nil {
			n.logger.Warn("artifact repair: list records", "error", err)
			return
		}
		for _, a := range page.Artifacts {
			st.after = max(st.after, a.Index)
			st.known[a.ID] = struct{}{}
			if _, ok := st.missing[a.ID]; !ok && !n.blobs.Has(a.ID) {
				st.missing[a.ID] = &blobRetry{wait: time.Second}
			}
		}
		if !page.HasMore || len(page.Artifacts) == 0 {
			break
		}
	}
	fetches := 0
	for id, retry := range st.missing {
		if fetches >= maxRepairFetches {
			return
		}
		if time.Now().Before(retry.next) {
			continue
		}
		if n.blobs.Has(id) {
			delete(st.missing, id)
			continue
		}
		if _, err := n.fsm.Artifact(id); errors.Is(err, api.ErrNotFound) {
			delete(st.missing, id) // deleted meanwhile
			continue
		}
		fetches++
		ctx, cancel := n.bgContext(blobFetchTimeout)
		peer, err := n.fetchBlob(ctx, id)
		cancel()
		if err != nil {
			n.logger.Warn("artifact repair: this node lacks an artifact's bytes and could not copy them yet", "id", id,
				"retry_in", retry.wait, "error", err)
			retry.next = time.Now().Add(retry.wait)
			retry.wait = min(2*retry.wait, maxBlobRetryWait)
			continue
		}
		delete(st.missing, id)
		n.logger.Info("artifact repair: copied missing bytes", "id", id, "peer", peer)
		select {
		case <-n.shutdown:
			return
		default:
		}
	}
}

// collectBlobs removes the blobs no record names: older than
// blobOrphanAge (an upload that never committed), or, when this node saw
// their record, older than blobDeletedGrace (a deleted artifact); and the
// temporary files of interrupted writes older than blobOrphanAge.
func (n *Node) collectBlobs(st *blobRepair) {
	if _, err := n.blobs.CleanTemps(blobOrphanAge); err != nil {
		n.logger.Warn("artifact gc: temporary files", "error", err)
	}
	now := time.Now()
	removed := 0
	err := n.blobs.Walk(func(b blobstore.Info) error {
		_, err := n.fsm.Artifact(b.ID)
		if !errors.Is(err, api.ErrNotFound) {
			return nil // recorded, or the state cannot say: keep
		}
		age := now.Sub(b.ModTime)
		_, deleted := st.known[b.ID]
		if age < blobOrphanAge && !(deleted && age >= blobDeletedGrace) {
			return nil
		}
		if err := n.blobs.Remove(b.ID); err != nil {
			n.logger.Warn("artifact gc: remove", "id", b.ID, "error", err)
			return nil
		}
		delete(st.known, b.ID)
		removed++
		n.logger.Info("artifact gc: removed bytes no record names", "id", b.ID, "bytes", b.Size, "age", age.Round(time.Second), "deleted", deleted)
		return nil
	})
	if err != nil {
		n.logger.Warn("artifact gc: walk", "error", err)
	}
}

// maxArtifactsDue bounds the artifacts one retention tick deletes.
const maxArtifactsDue = 100

// deleteDueArtifacts proposes, on the leader, the delete of the artifacts
// no message or task references any more and older than the retention
// (fsm.ArtifactsDue); apply keeps one referenced again meanwhile.
func (n *Node) deleteDueArtifacts() {
	ids, err := n.fsm.ArtifactsDue(n.cfg.Now(), maxArtifactsDue)
	if err != nil {
		n.logger.Warn("retention: artifacts due", "error", err)
		return
	}
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RetryTimeout)
		_, err := n.Apply(ctx, api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: id, By: api.SystemSender, Unreferenced: true})
		cancel()
		if err != nil {
			n.logger.Warn("retention: delete artifact", "id", id, "error", err)
			return
		}
	}
	if len(ids) > 0 {
		n.logger.Info("retention: deleted unreferenced artifacts", "count", len(ids))
	}
}
