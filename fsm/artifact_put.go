package fsm

import (
	"fmt"
	"math"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyArtifactPut records an artifact whose bytes a majority of the
// nodes hold (body: ArtifactPutCommand, checked by Validate).
//
//   - An id stored before answers its stored record with Existed set and
//     changes nothing: a re-upload stores nothing new, is not charged to
//     anyone's quota, and keeps the first upload's name, type and From.
//   - Otherwise the size must fit the uploader's quota (the cluster
//     setting artifact_quota_bytes; 0: none): its usage plus the size at
//     most the quota, else a *QuotaError (ErrQuota) and nothing written.
//   - The record is stored with Created the entry's time (UTC), Index the
//     entry's index and Refs 0, indexed by Index, and its size added to
//     the uploader's usage. The answer is the *Artifact.
func applyArtifactPut(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.ArtifactPutCommand
	if err := decodeCommand(api.OpArtifactPut, body, &cmd); err != nil {
		return nil, err
	}
	stored, err := getArtifact(tx, cmd.ID)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpArtifactPut, err)
	}
	if stored != nil {
		stored.Existed = true
		return stored, nil
	}
	used := artifactUsage(tx, cmd.From)
	if err := CheckQuota(cmd.From, used, cmd.Size, readConfig(tx).ArtifactQuotaBytes); err != nil {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpArtifactPut, err)
	}
	if used > math.MaxInt64-cmd.Size {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpArtifactPut, api.FieldErrorf("size", "%d bytes: agent %s's artifacts would pass %d bytes", cmd.Size, cmd.From, int64(math.MaxInt64)))
	}
	a := &api.Artifact{ID: cmd.ID, Name: cmd.Name, ContentType: cmd.ContentType, Size: cmd.Size, From: cmd.From,
		Created: time.Unix(0, ts).UTC(), Index: index, RefsIndexed: true}
	addArtifact(tx, a)
	return a, nil
}
