package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// lockResource is a lock's entry in shared_resources.
type lockResource struct {
	ManagedBy  string    `json:"managed_by"` // always "lock"
	Holder     string    `json:"holder"`
	Token      uint64    `json:"token"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Expired    bool      `json:"expired"`
}

// bulletinView composes the bulletin as read at entry time at.
func bulletinView(tx *bbolt.Tx, at int64) (api.Bulletin, error) {
	doc, version, err := loadBulletin(tx)
	if err != nil {
		return api.Bulletin{}, err
	}
	b := tx.Bucket(bucketBulletin)
	view := api.Bulletin{Version: version, UpdatedBy: string(b.Get(keyBulletinUpdatedBy)), AsOf: time.Unix(0, at).UTC()}
	if ts := int64(getU64(b, keyBulletinUpdatedAt)); ts != 0 {
		view.UpdatedAt = time.Unix(0, ts).UTC()
	}
	if _, ok := doc["system_status"]; !ok {
		doc["system_status"] = api.BulletinNormal
	}
	if _, ok := doc["warnings"]; !ok {
		doc["warnings"] = []any{}
	}
	sr, ok := doc["shared_resources"].(map[string]any)
	if !ok {
		sr = map[string]any{}
		doc["shared_resources"] = sr
	}
	c := tx.Bucket(bucketLocks).Cursor()
	for k, v := c.Seek([]byte{'p'}); k != nil && k[0] == 'p'; k, v = c.Next() {
		var rec lockRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return api.Bulletin{}, fmt.Errorf("lock %q: decode: %w", k[1:], err)
		}
		l := rec.view(string(k[1:]), at)
		sr[l.Path] = lockResource{ManagedBy: "lock", Holder: l.Holder, Token: l.Token,
			AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, Expired: l.Expired}
	}
	view.Doc, err = json.Marshal(doc)
	if err != nil {
		return api.Bulletin{}, fmt.Errorf("encode bulletin: %w", err)
	}
	return view, nil
}

// Bulletin returns the bulletin as of the latest applied entry.
func (f *FSM) Bulletin() (api.Bulletin, error) {
	var out api.Bulletin
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		out, err = bulletinView(tx, lastTS(tx))
		if err != nil {
			return fmt.Errorf("fsm: bulletin: %w", err)
		}
		return nil
	})
	return out, err
}
