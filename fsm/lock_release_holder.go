package fsm

import (
	"bytes"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyReleaseHolderLocks ends every lease of the given holders. A holder
// with no locks is not an error: the command is idempotent, as a dead
// node's cleanup proposed twice must be.
func applyReleaseHolderLocks(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.ReleaseHolderLocksCommand
	if err := decodeCommand(api.OpReleaseHolderLocks, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketLocks)
	type victim struct {
		path string
		rec  lockRecord
	}
	var victims []victim
	seen := map[string]bool{}
	for _, h := range cmd.Holders {
		if seen[h] {
			continue
		}
		seen[h] = true
		prefix := lockHolderKey(h, "")
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			path := string(k[len(prefix):])
			rec, ok, err := getLock(b, path)
			if err != nil {
				return nil, fmt.Errorf("fsm: apply release_holder_locks: %w", err)
			}
			if !ok || rec.Holder != h {
				return nil, fmt.Errorf("fsm: apply release_holder_locks: holder index %s → %q has no matching lock", h, path)
			}
			victims = append(victims, victim{path, rec})
		}
	}
	res := &ReleaseHolderLocksResult{Released: []api.Lock{}}
	for _, v := range victims {
		deleteLock(b, "release_holder_locks", v.path, v.rec.Holder)
		text := fmt.Sprintf("%s token=%d released with its holder", v.path, v.rec.Token)
		if cmd.Reason != "" {
			text += ": " + api.FirstLine(cmd.Reason, 200)
		}
		audit(tx, index, ts, api.AuditEvent{Kind: AuditLock, From: v.rec.Holder, Label: "LOCK_RELEASE", Text: text})
		res.Released = append(res.Released, *v.rec.view(v.path, ts))
	}
	return res, nil
}
