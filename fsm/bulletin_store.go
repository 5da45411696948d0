package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The bulletin in the state file.
//
// bucketBulletin: "doc" → the document as written (canonical JSON: keys
// sorted, numbers kept as written); "version" → u64, the Raft index of the
// last change; "updated_at" → i64 entry time; "updated_by" → who changed it.

var (
	keyBulletinDoc       = []byte("doc")
	keyBulletinVersion   = []byte("version")
	keyBulletinUpdatedAt = []byte("updated_at")
	keyBulletinUpdatedBy = []byte("updated_by")
)

// loadBulletin reads the stored document (empty if never written) and its
// version.
func loadBulletin(tx *bbolt.Tx) (map[string]any, uint64, error) {
	b := tx.Bucket(bucketBulletin)
	version := getU64(b, keyBulletinVersion)
	raw := b.Get(keyBulletinDoc)
	if raw == nil {
		return map[string]any{}, version, nil
	}
	doc, err := api.DecodeBulletin(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("stored bulletin: %w", err)
	}
	return doc, version, nil
}

// putBulletin stores the document data (canonical JSON) as version index,
// written at entry time ts by by.
func putBulletin(tx *bbolt.Tx, data []byte, index uint64, ts int64, by string) {
	b := tx.Bucket(bucketBulletin)
	mustPut(b, keyBulletinDoc, data)
	mustPut(b, keyBulletinVersion, u64(index))
	mustPut(b, keyBulletinUpdatedAt, u64(uint64(ts)))
	mustPut(b, keyBulletinUpdatedBy, []byte(by))
}
