package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.etcd.io/bbolt"
)

// Advisory locks: leases on shared files and resources.
//
// bucketLocks holds two kinds of keys:
//
//	'p' + path                       → lockRecord JSON (the live or lapsed lease)
//	'h' + holder + 0x00 + path       → empty (holder index: a holder's locks,
//	                                   and release_holder_locks, cost their count)
//
// A path has no control characters and a holder is a ValidName, so neither
// holds the 0x00 separator.
//
// Time. Every decision about expiry uses the timestamp of the entry being
// applied (the ts apply gets, made monotonic), never a node's clock, so all
// nodes agree who holds a lock. A lease granted at entry time T with ttl D
// covers [T, T+D): an entry stamped T+D-1 still sees it held, an entry
// stamped T+D sees it expired. Reads (list, check, the bulletin) judge
// expiry against the time of the latest applied entry (meta "last_ts"),
// reported as as_of: in a cluster where nothing was applied for a while
// a lease past its time by the wall clock still reads as held until the
// next entry; the next acquire decides with its own time.
//
// Fencing. A grant's token is the Raft index of the entry that granted it,
// so tokens of one path strictly increase across grants, releases and
// takeovers. Acquiring a lock one already holds (and that has not expired)
// extends it and keeps its token; acquiring it again after it lapsed is a
// new grant with a new token, since a holder whose lease lapsed may have
// been cut off and a guarded write must be able to tell.
//
// Refusals. An acquire against a live lease, a renew of a lapsed lease or
// with a stale token, a release by another holder: these are answers the
// caller needs details of (who holds it, its token, until when), so apply
// returns them as a *LockResult with a refusal Outcome rather than an
// error value, which would lose them on the way back through a forwarding
// node. A refusal writes nothing. Invalid input and an unknown path remain
// error values (ErrInvalid, ErrNotFound).

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

// ReleaseHolderLocksResult lists the leases release_holder_locks ended, by
// holder in the order given, then by path.
type ReleaseHolderLocksResult struct {
	Released []Lock `json:"released"`
}

// lockRecord is the stored form of a lease; times are entry timestamps in
// Unix nanoseconds.
type lockRecord struct {
	Holder   string `json:"holder"`
	Token    uint64 `json:"token"`
	Acquired int64  `json:"acquired"`
	Renewed  int64  `json:"renewed,omitempty"`
	Expires  int64  `json:"expires"`
	TTL      int64  `json:"ttl"`
}

// expiredAt reports whether the lease no longer covers time ts: it covers
// [Acquired, Expires).
func (r *lockRecord) expiredAt(ts int64) bool { return ts >= r.Expires }

func (r *lockRecord) view(path string, at int64) *Lock {
	l := &Lock{
		Path: path, Holder: r.Holder, Token: r.Token,
		AcquiredAt: time.Unix(0, r.Acquired).UTC(),
		ExpiresAt:  time.Unix(0, r.Expires).UTC(),
		TTL:        LockTTL(r.TTL),
		Expired:    r.expiredAt(at),
	}
	if r.Renewed != 0 {
		l.RenewedAt = time.Unix(0, r.Renewed).UTC()
	}
	return l
}

// addTTL is ts+ttl, saturating at the largest time instead of wrapping.
func addTTL(ts int64, ttl time.Duration) int64 {
	if ts > math.MaxInt64-int64(ttl) {
		return math.MaxInt64
	}
	return ts + int64(ttl)
}

func lockPathKey(path string) []byte {
	return append([]byte{'p'}, path...)
}

func lockHolderKey(holder, path string) []byte {
	k := make([]byte, 0, len(holder)+len(path)+2)
	k = append(append(append(k, 'h'), holder...), 0)
	return append(k, path...)
}

// getLock reads the lease of path; ok is false when there is none.
func getLock(b *bbolt.Bucket, path string) (rec lockRecord, ok bool, err error) {
	v := b.Get(lockPathKey(path))
	if v == nil {
		return rec, false, nil
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, false, fmt.Errorf("lock %q: decode: %w", path, err)
	}
	return rec, true, nil
}

func putLock(b *bbolt.Bucket, op, path string, rec *lockRecord) {
	data, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("fsm: apply %s: encode: %v", op, err))
	}
	if err := b.Put(lockPathKey(path), data); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: put: %v", op, err))
	}
	if err := b.Put(lockHolderKey(rec.Holder, path), nil); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: put holder index: %v", op, err))
	}
}

func deleteLock(b *bbolt.Bucket, op, path, holder string) {
	if err := b.Delete(lockPathKey(path)); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: delete: %v", op, err))
	}
	if err := b.Delete(lockHolderKey(holder, path)); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: delete holder index: %v", op, err))
	}
}

func lockTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// lockAudit renders the audit text of a lease: "src/a.go token=42 until 2026-...".
func lockAudit(path string, r *lockRecord) string {
	return fmt.Sprintf("%s token=%d ttl=%s until %s", path, r.Token, time.Duration(r.TTL), lockTime(r.Expires))
}

func applyLockAcquire(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd LockAcquireCommand
	if err := decodeCommand(OpLockAcquire, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketLocks)
	cur, held, err := getLock(b, cmd.Path)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply lock_acquire: %w", err)
	}
	ttl := time.Duration(cmd.TTL)
	if held && !cur.expiredAt(ts) {
		if cur.Holder != cmd.Holder {
			return &LockResult{Outcome: LockHeld, Lock: cur.view(cmd.Path, ts),
				Message: fmt.Sprintf("lock %q is held by %s (token %d) until %s",
					cmd.Path, cur.Holder, cur.Token, lockTime(cur.Expires))}, nil
		}
		// The live holder asks again: extend, keep the token.
		cur.Renewed, cur.Expires, cur.TTL = ts, addTTL(ts, ttl), int64(ttl)
		putLock(b, "lock_acquire", cmd.Path, &cur)
		audit(tx, index, ts, AuditEvent{Kind: AuditLock, From: cmd.Holder, Label: "LOCK_RENEW",
			Text: lockAudit(cmd.Path, &cur) + " (re-acquired)"})
		return &LockResult{Outcome: LockExtended, Lock: cur.view(cmd.Path, ts)}, nil
	}
	var prev *Lock
	if held {
		prev = cur.view(cmd.Path, ts)
		deleteLock(b, "lock_acquire", cmd.Path, cur.Holder)
		audit(tx, index, ts, AuditEvent{Kind: AuditLock, From: cur.Holder, Label: "LOCK_EXPIRED",
			Text: fmt.Sprintf("%s token=%d expired at %s; taken over by %s", cmd.Path, cur.Token, lockTime(cur.Expires), cmd.Holder)})
	}
	rec := lockRecord{Holder: cmd.Holder, Token: index, Acquired: ts, Expires: addTTL(ts, ttl), TTL: int64(ttl)}
	putLock(b, "lock_acquire", cmd.Path, &rec)
	audit(tx, index, ts, AuditEvent{Kind: AuditLock, From: cmd.Holder, Label: "LOCK_ACQUIRE", Text: lockAudit(cmd.Path, &rec)})
	return &LockResult{Outcome: LockGranted, Lock: rec.view(cmd.Path, ts), Previous: prev}, nil
}

// currentGrant loads the lease on path that a renew or release (op) acts
// on. No lease is an error wrapping ErrNotFound; a holder or token that is
// not the lease's is a refusal ("" holder skips the holder check, for a
// forced release; 0 token the token check).
func currentGrant(b *bbolt.Bucket, op Op, path, holder string, token uint64, ts int64) (lockRecord, *LockResult, error) {
	cur, held, err := getLock(b, path)
	if err != nil {
		return cur, nil, fmt.Errorf("fsm: apply %s: %w", op, err)
	}
	if !held {
		return cur, nil, fmt.Errorf("fsm: apply %s: %w", op, notFound("no lock on %q (released, or never granted)", path))
	}
	switch {
	case holder != "" && cur.Holder != holder:
		return cur, &LockResult{Outcome: LockNotHolder, Lock: cur.view(path, ts),
			Message: fmt.Sprintf("lock %q is held by %s (token %d), not %s", path, cur.Holder, cur.Token, holder)}, nil
	case token != 0 && cur.Token != token:
		return cur, &LockResult{Outcome: LockStaleToken, Lock: cur.view(path, ts),
			Message: fmt.Sprintf("lock %q: token %d is not the current grant's (%d); acquire it again", path, token, cur.Token)}, nil
	}
	return cur, nil, nil
}

func applyLockRenew(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd LockRenewCommand
	if err := decodeCommand(OpLockRenew, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketLocks)
	cur, refused, err := currentGrant(b, OpLockRenew, cmd.Path, cmd.Holder, cmd.Token, ts)
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return refused, nil
	}
	if cur.expiredAt(ts) {
		return &LockResult{Outcome: LockLapsed, Lock: cur.view(cmd.Path, ts),
			Message: fmt.Sprintf("lock %q (token %d) expired at %s, before this renewal at %s; acquire it again for a new token",
				cmd.Path, cur.Token, lockTime(cur.Expires), lockTime(ts))}, nil
	}
	ttl := time.Duration(cmd.TTL)
	cur.Renewed, cur.Expires, cur.TTL = ts, addTTL(ts, ttl), int64(ttl)
	putLock(b, "lock_renew", cmd.Path, &cur)
	audit(tx, index, ts, AuditEvent{Kind: AuditLock, From: cmd.Holder, Label: "LOCK_RENEW", Text: lockAudit(cmd.Path, &cur)})
	return &LockResult{Outcome: LockExtended, Lock: cur.view(cmd.Path, ts)}, nil
}

func applyLockRelease(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd LockReleaseCommand
	if err := decodeCommand(OpLockRelease, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketLocks)
	cur, refused, err := currentGrant(b, OpLockRelease, cmd.Path, cmd.Holder, cmd.Token, ts)
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return refused, nil
	}
	deleteLock(b, "lock_release", cmd.Path, cur.Holder)
	ev := AuditEvent{Kind: AuditLock, From: cur.Holder, Label: "LOCK_RELEASE", Text: fmt.Sprintf("%s token=%d", cmd.Path, cur.Token)}
	if cmd.Force {
		ev.From, ev.To = cmd.By, []string{cur.Holder}
		ev.Text += " forced by " + cmd.By
	}
	audit(tx, index, ts, ev)
	return &LockResult{Outcome: LockReleased, Lock: cur.view(cmd.Path, ts)}, nil
}

// applyReleaseHolderLocks ends every lease of the given holders. A holder
// with no locks is not an error: the command is idempotent, as a dead
// node's cleanup proposed twice must be.
func applyReleaseHolderLocks(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd ReleaseHolderLocksCommand
	if err := decodeCommand(OpReleaseHolderLocks, body, &cmd); err != nil {
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
	res := &ReleaseHolderLocksResult{Released: []Lock{}}
	for _, v := range victims {
		deleteLock(b, "release_holder_locks", v.path, v.rec.Holder)
		text := fmt.Sprintf("%s token=%d released with its holder", v.path, v.rec.Token)
		if cmd.Reason != "" {
			text += ": " + FirstLine(cmd.Reason, 200)
		}
		audit(tx, index, ts, AuditEvent{Kind: AuditLock, From: v.rec.Holder, Label: "LOCK_RELEASE", Text: text})
		res.Released = append(res.Released, *v.rec.view(v.path, ts))
	}
	return res, nil
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

// lastTS is the time of the latest applied entry.
func lastTS(tx *bbolt.Tx) int64 { return int64(getU64(tx.Bucket(bucketMeta), keyLastTS)) }

// Locks returns a page of locks in path order. It reads Limit+1 keys of
// the path (or, with Holder, the holder) index, whatever the number of
// locks.
func (f *FSM) Locks(q LockQuery) (LockPage, error) {
	limit := pageLimit(q.Limit)
	page := LockPage{Locks: []Lock{}}
	if q.Holder != "" && !ValidName(q.Holder) {
		return page, fmt.Errorf("fsm: locks: %w", NameError("holder", q.Holder))
	}
	var prefix []byte
	if q.Holder != "" {
		prefix = lockHolderKey(q.Holder, "")
	} else {
		prefix = []byte{'p'}
	}
	start := q.Prefix
	if q.After >= start {
		start = q.After
	}
	err := f.view(func(tx *bbolt.Tx) error {
		at := lastTS(tx)
		page.AsOf = time.Unix(0, at).UTC()
		b := tx.Bucket(bucketLocks)
		c := b.Cursor()
		for k, v := c.Seek(append(bytes.Clone(prefix), start...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			path := string(k[len(prefix):])
			if q.After != "" && path == q.After {
				continue
			}
			if !strings.HasPrefix(path, q.Prefix) {
				return nil
			}
			if len(page.Locks) == limit {
				page.HasMore = true
				return nil
			}
			if q.Holder != "" {
				v = b.Get(lockPathKey(path))
			}
			var rec lockRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("fsm: lock %q: decode: %w", path, err)
			}
			page.Locks = append(page.Locks, *rec.view(path, at))
		}
		return nil
	})
	return page, err
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

// CheckLock reports whether token is the current, unexpired grant of path.
// An unknown path is not an error: the answer is simply "not current".
func (f *FSM) CheckLock(path string, token uint64) (LockCheck, error) {
	out := LockCheck{Path: path}
	err := f.view(func(tx *bbolt.Tx) error {
		at := lastTS(tx)
		out.AsOf = time.Unix(0, at).UTC()
		rec, ok, err := getLock(tx.Bucket(bucketLocks), path)
		if err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		if !ok {
			out.Reason = "no lock on this path"
			return nil
		}
		out.Holder, out.Token, out.ExpiresAt, out.Expired = rec.Holder, rec.Token, time.Unix(0, rec.Expires).UTC(), rec.expiredAt(at)
		switch {
		case rec.Token != token:
			out.Reason = fmt.Sprintf("token %d is not the current grant (%d, held by %s)", token, rec.Token, rec.Holder)
		case out.Expired:
			out.Reason = fmt.Sprintf("the lease expired at %s", lockTime(rec.Expires))
		default:
			out.Current = true
		}
		return nil
	})
	return out, err
}
