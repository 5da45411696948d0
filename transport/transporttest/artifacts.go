package transporttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/maos-project/maos/blobstore"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Artifacts: the Service is a one-node transport.Blobs (a blobstore in the
// test's temporary directory, the node's only copy: a quorum of one), so
// the artifact routes run end to end; pass it as ServerOptions.Blobs.
//
// The records are the state machine's. Until fsm applies artifact_put and
// artifact_delete (issue 17; fsm/artifact_stub.go stands in), a test that
// needs records serves through WithArtifacts, which answers the artifact
// ops and queries from records it keeps, as ApprovalReads does for
// approvals.

var _ transport.Blobs = (*Service)(nil)

// BlobStore is the Service's blob store, for a test to inspect or damage.
func (s *Service) BlobStore() *blobstore.Store { return s.blobs }

// StoreBlob stores body in the Service's store (the whole quorum).
func (s *Service) StoreBlob(ctx context.Context, body io.Reader, max int64) (string, int64, error) {
	if err := s.record(ctx, Call{Method: "StoreBlob"}); err != nil {
		return "", 0, err
	}
	id, size, err := s.blobs.Put(body, max)
	if errors.Is(err, blobstore.ErrTooLarge) {
		err = fmt.Errorf("%w: %w", transport.ErrTooLarge, err)
	}
	return id, size, err
}

// OpenBlob opens the Service's copy ("local"); missing or damaged: an
// error wrapping fsm.ErrNotFound (there is no peer to ask).
func (s *Service) OpenBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, string, error) {
	if err := s.record(ctx, Call{Method: "OpenBlob", Arg: id}); err != nil {
		return nil, 0, "", err
	}
	f, size, err := s.localBlob(id)
	return f, size, "local", err
}

// ReceiveBlob stores a push of id, checked.
func (s *Service) ReceiveBlob(ctx context.Context, id string, body io.Reader, size int64) error {
	if err := s.record(ctx, Call{Method: "ReceiveBlob", Arg: id}); err != nil {
		return err
	}
	_, err := s.blobs.PutExpect(id, body, 0)
	if errors.Is(err, blobstore.ErrMismatch) {
		err = fmt.Errorf("%w: %w", fsm.ErrInvalid, err)
	}
	return err
}

// LocalBlob opens the Service's copy, as OpenBlob.
func (s *Service) LocalBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, error) {
	if err := s.record(ctx, Call{Method: "LocalBlob", Arg: id}); err != nil {
		return nil, 0, err
	}
	return s.localBlob(id)
}

func (s *Service) localBlob(id string) (io.ReadSeekCloser, int64, error) {
	f, size, err := s.blobs.Open(id)
	if errors.Is(err, blobstore.ErrMissing) || errors.Is(err, blobstore.ErrDamaged) {
		return nil, 0, fmt.Errorf("fake: artifact %s: no good copy (%w): %w", id, err, fsm.ErrNotFound)
	}
	return f, size, err
}

// ArtifactReads is a transport.Reader that answers the artifact queries
// (Artifact, Artifacts, ArtifactUsage) from the records it keeps, and
// every other read from the Reader it wraps. Safe for concurrent use.
type ArtifactReads struct {
	transport.Reader
	mu      sync.Mutex
	index   uint64
	records map[string]*fsm.Artifact
	quotas  map[string]int64
}

// NewArtifactReads wraps r, with no artifacts.
func NewArtifactReads(r transport.Reader) *ArtifactReads {
	return &ArtifactReads{Reader: r, index: 100, records: map[string]*fsm.Artifact{}, quotas: map[string]int64{}}
}

// SetQuota sets agent's artifact quota in bytes (0: none).
func (r *ArtifactReads) SetQuota(agent string, quota int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quotas[agent] = quota
}

// Put records cmd as artifact_put would: a new id at the next index (over
// the uploader's quota: *fsm.QuotaError), a known one answered with
// Existed.
func (r *ArtifactReads) Put(cmd fsm.ArtifactPutCommand) (fsm.Artifact, error) {
	if err := cmd.Validate(); err != nil {
		return fsm.Artifact{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.records[cmd.ID]; ok {
		out := *a
		out.Existed = true
		return out, nil
	}
	if q := r.quotas[cmd.From]; q > 0 {
		if used := r.usedLocked(cmd.From); used+cmd.Size > q {
			return fsm.Artifact{}, &fsm.QuotaError{Agent: cmd.From, Used: used, Size: cmd.Size, Quota: q}
		}
	}
	r.index++
	a := &fsm.Artifact{ID: cmd.ID, Name: cmd.Name, ContentType: cmd.ContentType, Size: cmd.Size, From: cmd.From,
		Created: Epoch.Add(time.Duration(r.index) * time.Second), Index: r.index}
	r.records[cmd.ID] = a
	return *a, nil
}

// Delete removes id's record as artifact_delete would.
func (r *ArtifactReads) Delete(cmd fsm.ArtifactDeleteCommand) (fsm.Artifact, error) {
	if err := cmd.Validate(); err != nil {
		return fsm.Artifact{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.records[cmd.ID]
	if !ok {
		return fsm.Artifact{}, &fsm.NotFoundError{What: "artifact " + cmd.ID}
	}
	delete(r.records, cmd.ID)
	return *a, nil
}

func (r *ArtifactReads) usedLocked(agent string) int64 {
	var n int64
	for _, a := range r.records {
		if a.From == agent {
			n += a.Size
		}
	}
	return n
}

// Artifact returns id's record, or a *fsm.NotFoundError.
func (r *ArtifactReads) Artifact(id string) (*fsm.Artifact, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.records[id]; ok {
		out := *a
		return &out, nil
	}
	return nil, &fsm.NotFoundError{What: "artifact " + id}
}

// Artifacts pages the records in index order, filtered as q says.
func (r *ArtifactReads) Artifacts(q fsm.ArtifactQuery) (fsm.ArtifactPage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []*fsm.Artifact
	for _, a := range r.records {
		if a.Index > q.After && (q.From == "" || a.From == q.From) && (q.Name == "" || a.Name == q.Name) {
			out := *a
			all = append(all, &out)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Index < all[j].Index })
	limit := q.Limit
	if limit <= 0 {
		limit = fsm.DefaultPageLimit
	}
	page := fsm.ArtifactPage{Artifacts: []*fsm.Artifact{}}
	if len(all) > limit {
		all, page.HasMore = all[:limit], true
	}
	page.Artifacts = append(page.Artifacts, all...)
	return page, nil
}

// ArtifactUsage sums agent's records against its quota.
func (r *ArtifactReads) ArtifactUsage(agent string) (int64, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.usedLocked(agent), r.quotas[agent], nil
}

// ArtifactNode is a Service whose artifact records are Reads'.
type ArtifactNode struct {
	*Service
	Reads *ArtifactReads
}

// State is Reads.
func (n ArtifactNode) State() transport.Reader { return n.Reads }

// WithArtifacts is s served with an ArtifactReads over its state: Apply
// answers artifact_put and artifact_delete from it, and applies every other
// command as before (it replaces any OnApply).
func WithArtifacts(s *Service) ArtifactNode {
	n := ArtifactNode{Service: s, Reads: NewArtifactReads(s.State())}
	s.OnApply(func(op fsm.Op, body json.RawMessage) (any, error) {
		switch op {
		case fsm.OpArtifactPut:
			var cmd fsm.ArtifactPutCommand
			if err := json.Unmarshal(body, &cmd); err != nil {
				return nil, err
			}
			return n.Reads.Put(cmd)
		case fsm.OpArtifactDelete:
			var cmd fsm.ArtifactDeleteCommand
			if err := json.Unmarshal(body, &cmd); err != nil {
				return nil, err
			}
			return n.Reads.Delete(cmd)
		}
		return s.ApplyCommand(op, body)
	})
	return n
}
