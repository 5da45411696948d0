package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The lock ops.
const (
	// OpLockAcquire grants or extends a lease (body: LockAcquireCommand).
	OpLockAcquire Op = "lock_acquire"
	// OpLockRenew extends a live lease by its holder (body: LockRenewCommand).
	OpLockRenew Op = "lock_renew"
	// OpLockRelease ends a lease (body: LockReleaseCommand).
	OpLockRelease Op = "lock_release"
	// OpReleaseHolderLocks ends every lease of some holders, for a node
	// declared dead (body: ReleaseHolderLocksCommand).
	OpReleaseHolderLocks Op = "release_holder_locks"
)

// Lock limits.
const (
	MinLockTTL        = time.Second
	MaxLockTTL        = 24 * time.Hour
	MaxLockPathLen    = 1024 // bytes
	MaxReleaseHolders = 1024 // holders in one release_holder_locks
)

// Outcomes of a lock command (LockResult.Outcome). The first three are
// successes; the others are refusals that changed nothing.
const (
	LockGranted  = "granted"  // acquire: a new lease with a new token
	LockExtended = "extended" // acquire by the live holder, or renew: same token, new expiry
	LockReleased = "released" // release: the lease is gone
	// LockHeld: acquire refused, another holder's lease is live.
	LockHeld = "held"
	// LockLapsed: renew refused, the lease expired at the entry's time
	// (acquire again for a new token).
	LockLapsed = "expired"
	// LockNotHolder: renew or release refused, the lock is someone else's.
	LockNotHolder = "not_holder"
	// LockStaleToken: renew or release refused, the token is not the
	// current grant's.
	LockStaleToken = "stale_token"
)

// LockTTL is a lease duration. In JSON it is a Go duration string ("90s",
// "5m", "1h30m") or a number of seconds (30, 1.5); it is written as a string.
type LockTTL time.Duration

// MarshalJSON writes the duration as a string such as "5m0s".
func (d LockTTL) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "5m" or a number of seconds.
func (d *LockTTL) UnmarshalJSON(b []byte) error {
	if v, ok, err := durationString(b, "ttl", `"30s" or "5m"`); ok {
		if err == nil {
			*d = LockTTL(v)
		}
		return err
	}
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(secs) {
		return fmt.Errorf("ttl: %s is not a duration like \"30s\" or a number of seconds", b)
	}
	// Out-of-range values are kept out of range (Validate names the limit)
	// instead of overflowing into range.
	switch ns := secs * 1e9; {
	case ns >= math.MaxInt64:
		*d = LockTTL(math.MaxInt64)
	case ns <= math.MinInt64:
		*d = LockTTL(math.MinInt64)
	default:
		*d = LockTTL(ns)
	}
	return nil
}

func (d LockTTL) validate() error { return d.validateIn(MinLockTTL, MaxLockTTL) }

// validateIn checks that the duration is set and within [lo, hi]: the one
// check of a lease's ttl, for locks and agent leases.
func (d LockTTL) validateIn(lo, hi time.Duration) error {
	if d == 0 {
		return FieldErrorf("ttl", "required: a lease duration from %s to %s, like \"5m\"", lo, hi)
	}
	if time.Duration(d) < lo || time.Duration(d) > hi {
		return FieldErrorf("ttl", "%s is outside the limits %s to %s", time.Duration(d), lo, hi)
	}
	return nil
}

// ValidLockPath returns why path cannot name a lock, or "" if it can: it
// must be non-empty UTF-8 of at most MaxLockPathLen bytes without control
// characters. Paths are opaque: "src/a.go" and "./src/a.go" are two locks,
// so agents should agree on one form (repository-relative, say).
func ValidLockPath(path string) string {
	switch {
	case path == "":
		return "required"
	case len(path) > MaxLockPathLen:
		return fmt.Sprintf("%d bytes, at most %d", len(path), MaxLockPathLen)
	case !utf8.ValidString(path):
		return "not valid UTF-8"
	case strings.IndexFunc(path, unicode.IsControl) >= 0:
		return "has control characters"
	}
	return ""
}

func validLockParties(path, holder string) error {
	if why := ValidLockPath(path); why != "" {
		return FieldErrorf("path", "%s", why)
	}
	if !ValidName(holder) {
		if holder == "" {
			return FieldErrorf("holder", "required: the agent id taking the lock")
		}
		return NameError("holder", holder)
	}
	return nil
}

// LockAcquireCommand is the body of OpLockAcquire and of POST /v1/locks.
type LockAcquireCommand struct {
	Path   string  `json:"path"`
	Holder string  `json:"holder"` // agent id
	TTL    LockTTL `json:"ttl"`    // MinLockTTL..MaxLockTTL
}

// Validate checks path, holder and ttl.
func (c *LockAcquireCommand) Validate() error {
	if err := validLockParties(c.Path, c.Holder); err != nil {
		return err
	}
	return c.TTL.validate()
}

// LockRenewCommand is the body of OpLockRenew and of POST /v1/locks/renew:
// the holder extends its live lease to entry time + TTL.
type LockRenewCommand struct {
	Path   string  `json:"path"`
	Holder string  `json:"holder"`
	Token  uint64  `json:"token"` // the token the grant returned
	TTL    LockTTL `json:"ttl"`
}

// Validate checks path, holder, token and ttl.
func (c *LockRenewCommand) Validate() error {
	if err := validLockParties(c.Path, c.Holder); err != nil {
		return err
	}
	if c.Token == 0 {
		return FieldErrorf("token", "required: the fencing token the grant returned")
	}
	return c.TTL.validate()
}

// LockReleaseCommand is the body of OpLockRelease and of POST
// /v1/locks/release. Without Force, Holder and Token must be the current
// grant's. With Force (an operator breaking a lease; authorization comes
// later) By names who forced it for the audit trail, and Holder and Token,
// when given, must still match: they pin the lease one means to break.
type LockReleaseCommand struct {
	Path   string `json:"path"`
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	Force  bool   `json:"force,omitempty"`
	By     string `json:"by,omitempty"` // required with Force
}

// Validate checks the fields for a holder's or a forced release.
func (c *LockReleaseCommand) Validate() error {
	if why := ValidLockPath(c.Path); why != "" {
		return FieldErrorf("path", "%s", why)
	}
	if c.Force {
		if !ValidName(c.By) {
			return FieldErrorf("by", "required with force: who breaks the lease (an id matching %s), for the audit trail", NamePattern)
		}
		if c.Holder != "" && !ValidName(c.Holder) {
			return NameError("holder", c.Holder)
		}
		return nil
	}
	if c.By != "" {
		return FieldErrorf("by", "only with force")
	}
	if !ValidName(c.Holder) {
		if c.Holder == "" {
			return FieldErrorf("holder", "required (or force with by)")
		}
		return NameError("holder", c.Holder)
	}
	if c.Token == 0 {
		return FieldErrorf("token", "required: the fencing token the grant returned")
	}
	return nil
}

// ReleaseHolderLocksCommand is the body of OpReleaseHolderLocks: every
// lease held by one of Holders ends, expired or not. It is the command a
// node declared dead proposes for its agents (presence work); it has no
// HTTP endpoint of its own yet.
type ReleaseHolderLocksCommand struct {
	Holders []string `json:"holders"`
	Reason  string   `json:"reason,omitempty"` // for the audit trail: "node n2 declared dead"
}

// Validate checks the holders.
func (c *ReleaseHolderLocksCommand) Validate() error {
	if len(c.Holders) == 0 {
		return FieldErrorf("holders", "required: at least one agent id")
	}
	if err := CheckNames("holders", c.Holders, MaxReleaseHolders, "entries"); err != nil {
		return err
	}
	if len(c.Reason) > MaxTitleLen {
		return FieldErrorf("reason", "%d bytes, at most %d", len(c.Reason), MaxTitleLen)
	}
	return nil
}

// Lock is a lease as the API shows it.
type Lock struct {
	Path   string `json:"path"`
	Holder string `json:"holder"`
	// Token is the fencing token: the Raft index of the entry that granted
	// the lease. Renewals keep it; each new grant of the path has a larger one.
	Token      uint64    `json:"token"`
	AcquiredAt time.Time `json:"acquired_at"`
	RenewedAt  time.Time `json:"renewed_at,omitzero"` // last renewal or re-acquire, if any
	ExpiresAt  time.Time `json:"expires_at"`          // first instant the lease no longer covers
	TTL        LockTTL   `json:"ttl"`                 // of the last grant or renewal
	// Expired: the lease ran out as of the entry that produced this answer
	// (apply results) or the latest applied entry (reads). An expired lock
	// stays listed until it is released or taken over.
	Expired bool `json:"expired"`
}

// LockResult is the result of a lock command. Outcome is one of the Lock*
// constants; for a refusal Lock is the lock as it stands and Message says
// why in a sentence.
type LockResult struct {
	Outcome string `json:"outcome"`
	Lock    *Lock  `json:"lock,omitempty"`
	// Previous is the lapsed lease a grant took over, if any.
	Previous *Lock  `json:"previous,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Refused reports whether the command was refused (and changed nothing).
func (r *LockResult) Refused() bool {
	switch r.Outcome {
	case LockGranted, LockExtended, LockReleased:
		return false
	}
	return true
}

// LockQuery selects locks for Locks: paths with Prefix, held by Holder
// (both optional), after the path After, at most Limit (as for ChannelPage).
type LockQuery struct {
	Prefix string
	Holder string
	After  string
	Limit  int
}

// LockPage is one page of locks by path. AsOf is the entry time expiry was
// judged against (the latest applied entry's).
type LockPage struct {
	Locks   []Lock    `json:"locks"`
	HasMore bool      `json:"has_more"`
	AsOf    time.Time `json:"as_of"`
}

// LockCheckCommand is the body of POST /v1/locks/check.
type LockCheckCommand struct {
	Path  string `json:"path"`
	Token uint64 `json:"token"`
}

// Validate checks path and token.
func (c *LockCheckCommand) Validate() error {
	if why := ValidLockPath(c.Path); why != "" {
		return FieldErrorf("path", "%s", why)
	}
	if c.Token == 0 {
		return FieldErrorf("token", "required: the fencing token to check")
	}
	return nil
}

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

// LockCheck answers POST /v1/locks/check: whether Token is the current
// grant of Path and has not expired as of AsOf (the latest applied
// entry's time). Holder, Token (the current grant's, 0 if none) and
// ExpiresAt describe the lock as it stands; Reason says why not current.
type LockCheck struct {
	Path      string    `json:"path"`
	Current   bool      `json:"current"`
	Holder    string    `json:"holder,omitempty"`
	Token     uint64    `json:"token,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Expired   bool      `json:"expired"`
	AsOf      time.Time `json:"as_of"`
	Reason    string    `json:"reason,omitempty"`
}
