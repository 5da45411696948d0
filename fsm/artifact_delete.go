package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyArtifactDelete removes an artifact's record (body:
// ArtifactDeleteCommand, checked by Validate).
//
//   - An id not stored is a *NotFoundError ("artifact sha256:…: not
//     found").
//   - A retention delete (Unreferenced) deletes only an artifact that is
//     still due at the entry's time: no stored message references it
//     (Refs 0), artifact_retention_seconds is not 0, and Created plus it
//     is at or before the entry's time. Otherwise it changes nothing and
//     answers the record with Kept saying why (the leader decided on its
//     clock and an older state; apply decides on the entry's).
//   - Otherwise (an admin's delete, or a due one) the record and its
//     index entry go and its size comes off its uploader's usage, even
//     while messages reference it (they keep the id; a fetch of it then
//     answers not found). The answer is the *Artifact as it was.
//
// The bytes beside the log are the blob store's to remove once the
// record is gone.
func applyArtifactDelete(tx *bbolt.Tx, _ uint64, ts int64, body []byte) (any, error) {
	var cmd api.ArtifactDeleteCommand
	if err := decodeCommand(api.OpArtifactDelete, body, &cmd); err != nil {
		return nil, err
	}
	a, err := getArtifact(tx, cmd.ID)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpArtifactDelete, err)
	}
	if a == nil {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpArtifactDelete, ArtifactNotFound(cmd.ID))
	}
	if cmd.Unreferenced {
		if why := artifactKept(a, readConfig(tx).ArtifactRetentionSeconds, ts); why != "" {
			a.Kept = why
			return a, nil
		}
	}
	removeArtifact(tx, a)
	return a, nil
}

// artifactKept says why retention keeps a at time ts (Unix ns) with a
// retention of retention seconds, "" when it is due for deletion.
func artifactKept(a *api.Artifact, retention int64, ts int64) string {
	switch {
	case a.Refs > 0:
		if a.Refs == 1 {
			return "referenced by 1 message"
		}
		return fmt.Sprintf("referenced by %d messages", a.Refs)
	case retention <= 0:
		return "kept forever (artifact_retention_seconds is 0)"
	}
	due := a.Created.Add(time.Duration(retention) * time.Second)
	if due.UnixNano() > ts {
		return "not due until " + due.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// ArtifactNotFound is the *NotFoundError for artifact id: "artifact
// sha256:…: not found" (a value that is not an artifact id is quoted cut
// to 80 bytes).
func ArtifactNotFound(id string) error {
	if len(id) > 80 {
		id = api.TruncateUTF8(id, 80) + "…"
	}
	return notFound("artifact %s", id)
}
