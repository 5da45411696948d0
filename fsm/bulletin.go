package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The global bulletin: one replicated JSON document every agent reads for
// shared awareness (the seed's global_bulletin/status.json):
//
//	{"system_status": "normal", "current_phase": "implementation",
//	 "warnings": [], "shared_resources": {"api_server": "available"}, ...}
//
// bucketBulletin: "doc" → the document as written (canonical JSON: keys
// sorted, numbers kept as written); "version" → u64, the Raft index of the
// last change; "updated_at" → i64 entry time; "updated_by" → who changed it.
//
// Locks in shared_resources. Every lock shows in the document read back as
// shared_resources[path] = {"managed_by":"lock","holder","token",
// "acquired_at","expires_at","expired"}. These entries are not stored in
// the document: they are composed at read time from the locks bucket in
// the same read transaction, so they always agree with the locks, cost no
// second write, and the 64 KiB document limit does not cap the number of
// locks. Writers own everything else, including other keys of
// shared_resources ("api_server": "available"). A PUT or PATCH that carries
// entries with "managed_by":"lock" has them dropped, so reading the
// bulletin, editing it and putting it back is safe; a written key equal to
// a locked path is shadowed by the lock's entry while the lock exists.
// Lock changes do not move the version: compare-and-set protects what
// bulletin writers write, and lock churn must not fail their writes.

var (
	keyBulletinDoc       = []byte("doc")
	keyBulletinVersion   = []byte("version")
	keyBulletinUpdatedAt = []byte("updated_at")
	keyBulletinUpdatedBy = []byte("updated_by")
)

// mergePatch applies an RFC 7396 merge patch to target.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

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

func applySetBulletin(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.BulletinCommand
	if err := decodeCommand(api.OpSetBulletin, body, &cmd); err != nil {
		return nil, err
	}
	cur, version, err := loadBulletin(tx)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	if cmd.IfVersion != nil && *cmd.IfVersion != version {
		view, err := bulletinView(tx, ts)
		if err != nil {
			return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
		}
		return &api.BulletinResult{Bulletin: view, Conflict: true}, nil
	}
	in, _ := api.DecodeBulletin(cmd.Doc) // Validate parsed it
	api.DropLockEntries(in)
	old, _ := api.DecodeBulletin(mustJSON(cur)) // a copy: the merge below edits in place
	next := in
	if cmd.Merge {
		next = mergePatch(cur, in).(map[string]any)
		if err := api.CheckBulletinKeys(next, false); err != nil {
			return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
		}
	}
	data, err := api.EncodeBulletin(next)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	changed := changedKeys(old, next)

	putBulletin(tx, data, index, ts, cmd.By)
	mode := "replaced"
	if cmd.Merge {
		mode = "merged"
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditOther, From: cmd.By, Label: "BULLETIN",
		Text: fmt.Sprintf("%s, version %d: %s", mode, index, describeChanges(changed, next))})
	view, err := bulletinView(tx, ts)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	return &api.BulletinResult{Bulletin: view, Changed: changed}, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode: %v", err))
	}
	return b
}

// changedKeys lists, sorted, the top-level keys added, removed or altered.
func changedKeys(old, next map[string]any) []string {
	var out []string
	for k, v := range next {
		if ov, ok := old[k]; !ok || !bytes.Equal(mustJSON(ov), mustJSON(v)) {
			out = append(out, k)
		}
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// describeChanges renders changed keys for the audit line, with the new
// value of the short well-known ones: "system_status=degraded, warnings".
func describeChanges(changed []string, doc map[string]any) string {
	if len(changed) == 0 {
		return "no change"
	}
	parts := make([]string, 0, len(changed))
	for _, k := range changed {
		v, ok := doc[k]
		switch {
		case !ok:
			parts = append(parts, k+" deleted")
		case k == "system_status" || k == "current_phase":
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		default:
			parts = append(parts, k)
		}
	}
	return api.FirstLine(strings.Join(parts, ", "), 400)
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
