package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Artifact returns the record of artifact id, whoever may read it
// (ArtifactFor with no viewer). An id that is not stored, or is not an
// artifact id at all, is a *NotFoundError ("artifact sha256:…: not
// found").
func (f *FSM) Artifact(id string) (*api.Artifact, error) { return f.ArtifactFor(id, nil) }

// ArtifactFor is Artifact for viewer v: an artifact v may not read
// (canReadArtifact: not its uploader, nor a reader of a message naming
// it) is not found, in the words of one never stored.
func (f *FSM) ArtifactFor(id string, v *api.Viewer) (*api.Artifact, error) {
	if !api.ValidArtifactID(id) {
		return nil, ArtifactNotFound(id)
	}
	var out *api.Artifact
	err := f.view(func(tx *bbolt.Tx) error {
		a, err := getArtifact(tx, id)
		if err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		ok := a != nil
		if ok {
			if ok, err = canReadArtifact(tx, a, v); err != nil {
				return fmt.Errorf("fsm: artifact %s: %w", id, err)
			}
		}
		if !ok {
			return ArtifactNotFound(id)
		}
		out = a
		return nil
	})
	return out, err
}

// Artifacts returns a page of artifact records in index order (the
// order they were recorded): those with Index > q.After, uploaded by
// q.From and named q.Name when set, and that q.Viewer may read. Limit ≤ 0 means DefaultPageLimit; it
// is capped at MaxPageLimit. The next page's After is the last record's
// Index. A filtered page reads the records it skips too. A bad filter is
// a *FieldError.
func (f *FSM) Artifacts(q api.ArtifactQuery) (api.ArtifactPage, error) {
	if err := q.Validate(); err != nil {
		return api.ArtifactPage{}, err
	}
	limit := pageLimit(q.Limit)
	page := api.ArtifactPage{Artifacts: []*api.Artifact{}}
	if q.After == math.MaxUint64 {
		return page, nil
	}
	err := f.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketArtifactIndex).Cursor()
		for k, v := c.Seek(u64(q.After + 1)); k != nil; k, v = c.Next() {
			a, err := getArtifact(tx, string(v))
			if err != nil {
				return fmt.Errorf("fsm: artifacts: %w", err)
			}
			if a == nil {
				return fmt.Errorf("fsm: artifacts: index entry %d without an artifact (%s)", binary.BigEndian.Uint64(k), v)
			}
			if q.From != "" && a.From != q.From || q.Name != "" && a.Name != q.Name {
				continue
			}
			if ok, err := canReadArtifact(tx, a, q.Viewer); err != nil {
				return fmt.Errorf("fsm: artifacts: %s: %w", a.ID, err)
			} else if !ok {
				continue
			}
			if len(page.Artifacts) == limit {
				page.HasMore = true
				return nil
			}
			page.Artifacts = append(page.Artifacts, a)
		}
		return nil
	})
	return page, err
}

// ArtifactUsage returns the bytes of the stored artifacts agent's
// principal (the agent and its forks, Principal) uploaded first, and its
// quota: artifact_quota_bytes as in force (its default
// while unset; 0: none).
func (f *FSM) ArtifactUsage(agent string) (used, quota int64, err error) {
	err = f.view(func(tx *bbolt.Tx) error {
		used, quota = artifactUsage(tx, agent), readConfig(tx).ArtifactQuotaBytes
		return nil
	})
	return used, quota, err
}

// ArtifactsDue returns, oldest first, at most limit ids (limit ≤ 0 means
// DefaultPageLimit; capped at MaxPageLimit) of the artifacts retention
// deletes as of now (the caller's clock): no stored message references
// them and they were recorded artifact_retention_seconds or more before
// now; none while that setting is 0. It is the leader's hint: it proposes
// ArtifactDeleteCommand{ID, By: SystemSender, Unreferenced: true} for
// each, and apply decides again on the entry's time. It reads the
// artifacts recorded up to now minus the retention, referenced ones
// included, and stops at the first younger one.
func (f *FSM) ArtifactsDue(now time.Time, limit int) ([]string, error) {
	limit = pageLimit(limit)
	out := []string{}
	err := f.view(func(tx *bbolt.Tx) error {
		retention := readConfig(tx).ArtifactRetentionSeconds
		if retention <= 0 {
			return nil
		}
		cutoff := now.Add(-time.Duration(retention) * time.Second)
		c := tx.Bucket(bucketArtifactIndex).Cursor()
		for _, v := c.First(); v != nil && len(out) < limit; _, v = c.Next() {
			a, err := getArtifact(tx, string(v))
			if err != nil {
				return fmt.Errorf("fsm: artifacts due: %w", err)
			}
			if a == nil {
				continue
			}
			if a.Created.After(cutoff) {
				return nil
			}
			if a.Refs == 0 {
				out = append(out, a.ID)
			}
		}
		return nil
	})
	return out, err
}
