package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"go.etcd.io/bbolt"
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

// OpSetBulletin replaces or merges the bulletin (body: BulletinCommand).
const OpSetBulletin Op = "set_bulletin"

// MaxBulletinBytes caps the stored document (its canonical JSON).
const MaxBulletinBytes = 64 << 10

// The values of system_status.
const (
	BulletinNormal      = "normal"
	BulletinDegraded    = "degraded"
	BulletinMaintenance = "maintenance"
)

// BulletinStatuses lists the valid system_status values.
var BulletinStatuses = []string{BulletinNormal, BulletinDegraded, BulletinMaintenance}

// BulletinIfVersionKey is the reserved top-level key of a PUT or PATCH body
// that carries the compare-and-set version; it is never stored.
const BulletinIfVersionKey = "if_version"

var (
	keyBulletinDoc       = []byte("doc")
	keyBulletinVersion   = []byte("version")
	keyBulletinUpdatedAt = []byte("updated_at")
	keyBulletinUpdatedBy = []byte("updated_by")
)

// BulletinCommand is the body of OpSetBulletin.
type BulletinCommand struct {
	// Doc is the whole new document (Merge false: PUT) or a JSON merge
	// patch (Merge true: PATCH, RFC 7396: objects merge recursively, null
	// deletes a key, anything else replaces). A JSON object either way.
	Doc   json.RawMessage `json:"doc"`
	Merge bool            `json:"merge,omitempty"`
	// IfVersion, when set, makes the change conditional: it applies only
	// if the bulletin is still at that version (0: never written).
	IfVersion *uint64 `json:"if_version,omitempty"`
	// By names the writer for the audit trail (an agent id), optional.
	By string `json:"by,omitempty"`
}

// Validate checks the document (or patch): a JSON object without the
// reserved if_version key, system_status one of BulletinStatuses,
// current_phase a string, warnings an array, shared_resources an object
// (each may be null in a patch, which deletes it), and for a PUT at most
// MaxBulletinBytes. A patch's result is checked again when it is applied.
func (c *BulletinCommand) Validate() error {
	if c.By != "" && !ValidName(c.By) {
		return NameError("by", c.By)
	}
	doc, err := DecodeBulletin(c.Doc)
	if err != nil {
		return err
	}
	if _, ok := doc[BulletinIfVersionKey]; ok {
		return FieldErrorf(BulletinIfVersionKey, "reserved for compare-and-set; it is not a bulletin key")
	}
	DropLockEntries(doc)
	if err := CheckBulletinKeys(doc, c.Merge); err != nil {
		return err
	}
	if !c.Merge {
		if _, err := EncodeBulletin(doc); err != nil {
			return err
		}
	}
	return nil
}

// DecodeBulletin parses a document or patch: one JSON object, numbers kept
// as written.
func DecodeBulletin(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, FieldErrorf("bulletin", "required: a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, FieldErrorf("bulletin", "not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, FieldErrorf("bulletin", "trailing data after the JSON object")
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, FieldErrorf("bulletin", "want a JSON object, got %s", jsonKind(v))
	}
	return doc, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// EncodeBulletin is the canonical form of doc, refused over the limit.
func EncodeBulletin(doc map[string]any) ([]byte, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, FieldErrorf("bulletin", "cannot encode: %v", err)
	}
	if len(data) > MaxBulletinBytes {
		return nil, FieldErrorf("bulletin", "%d bytes, over the limit of %d bytes (64 KiB)", len(data), MaxBulletinBytes)
	}
	return data, nil
}

// DropLockEntries removes shared_resources entries that are views of locks
// ({"managed_by":"lock",...}): they are composed at read time, never
// written.
func DropLockEntries(doc map[string]any) {
	sr, ok := doc["shared_resources"].(map[string]any)
	if !ok {
		return
	}
	for k, v := range sr {
		if m, ok := v.(map[string]any); ok && m["managed_by"] == "lock" {
			delete(sr, k)
		}
	}
}

// CheckBulletinKeys checks the well-known keys; nullOK admits null (a
// patch deleting the key).
func CheckBulletinKeys(doc map[string]any, nullOK bool) error {
	for _, k := range []string{"system_status", "current_phase", "warnings", "shared_resources"} {
		v, ok := doc[k]
		if !ok || (v == nil && nullOK) {
			continue
		}
		switch k {
		case "system_status":
			if s, _ := v.(string); !slices.Contains(BulletinStatuses, s) {
				return FieldErrorf(k, "want one of %s, got %s", strings.Join(BulletinStatuses, ", "), compactJSON(v))
			}
		case "current_phase":
			if _, ok := v.(string); !ok {
				return FieldErrorf(k, "want a string, got %s", jsonKind(v))
			}
		case "warnings":
			if _, ok := v.([]any); !ok {
				return FieldErrorf(k, "want an array, got %s", jsonKind(v))
			}
		case "shared_resources":
			if _, ok := v.(map[string]any); !ok {
				return FieldErrorf(k, "want an object, got %s", jsonKind(v))
			}
		}
	}
	return nil
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return FirstLine(string(b), 64)
}

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

// Bulletin is the document as read: GET /v1/bulletin.
type Bulletin struct {
	// Version is the Raft index of the last PUT or PATCH (0: never
	// written). Lock changes do not move it.
	Version   uint64    `json:"version"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	// AsOf is the entry time the locks' expired flags are judged against.
	AsOf time.Time `json:"as_of"`
	// Doc is the document with defaults (system_status "normal", empty
	// warnings and shared_resources) and the locks in shared_resources.
	Doc json.RawMessage `json:"bulletin"`
}

// BulletinResult is the result of OpSetBulletin: the bulletin after the
// change. Conflict means if_version did not match and nothing changed;
// Version is then the current one.
type BulletinResult struct {
	Bulletin
	Conflict bool `json:"conflict,omitempty"`
	// Changed lists the top-level keys whose value the change altered.
	Changed []string `json:"changed,omitempty"`
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
	doc, err := DecodeBulletin(raw)
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
func bulletinView(tx *bbolt.Tx, at int64) (Bulletin, error) {
	doc, version, err := loadBulletin(tx)
	if err != nil {
		return Bulletin{}, err
	}
	b := tx.Bucket(bucketBulletin)
	view := Bulletin{Version: version, UpdatedBy: string(b.Get(keyBulletinUpdatedBy)), AsOf: time.Unix(0, at).UTC()}
	if ts := int64(getU64(b, keyBulletinUpdatedAt)); ts != 0 {
		view.UpdatedAt = time.Unix(0, ts).UTC()
	}
	if _, ok := doc["system_status"]; !ok {
		doc["system_status"] = BulletinNormal
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
			return Bulletin{}, fmt.Errorf("lock %q: decode: %w", k[1:], err)
		}
		l := rec.view(string(k[1:]), at)
		sr[l.Path] = lockResource{ManagedBy: "lock", Holder: l.Holder, Token: l.Token,
			AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, Expired: l.Expired}
	}
	view.Doc, err = json.Marshal(doc)
	if err != nil {
		return Bulletin{}, fmt.Errorf("encode bulletin: %w", err)
	}
	return view, nil
}

func applySetBulletin(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd BulletinCommand
	if err := decodeCommand(OpSetBulletin, body, &cmd); err != nil {
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
		return &BulletinResult{Bulletin: view, Conflict: true}, nil
	}
	in, _ := DecodeBulletin(cmd.Doc) // Validate parsed it
	DropLockEntries(in)
	old, _ := DecodeBulletin(mustJSON(cur)) // a copy: the merge below edits in place
	next := in
	if cmd.Merge {
		next = mergePatch(cur, in).(map[string]any)
		if err := CheckBulletinKeys(next, false); err != nil {
			return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
		}
	}
	data, err := EncodeBulletin(next)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	changed := changedKeys(old, next)

	putBulletin(tx, data, index, ts, cmd.By)
	mode := "replaced"
	if cmd.Merge {
		mode = "merged"
	}
	audit(tx, index, ts, AuditEvent{Kind: AuditOther, From: cmd.By, Label: "BULLETIN",
		Text: fmt.Sprintf("%s, version %d: %s", mode, index, describeChanges(changed, next))})
	view, err := bulletinView(tx, ts)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	return &BulletinResult{Bulletin: view, Changed: changed}, nil
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
	return FirstLine(strings.Join(parts, ", "), 400)
}

// Bulletin returns the bulletin as of the latest applied entry.
func (f *FSM) Bulletin() (Bulletin, error) {
	var out Bulletin
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
