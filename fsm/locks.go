package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
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

// ReleaseHolderLocksResult lists the leases release_holder_locks ended, by
// holder in the order given, then by path.
type ReleaseHolderLocksResult struct {
	Released []api.Lock `json:"released"`
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

func (r *lockRecord) view(path string, at int64) *api.Lock {
	l := &api.Lock{
		Path: path, Holder: r.Holder, Token: r.Token,
		AcquiredAt: time.Unix(0, r.Acquired).UTC(),
		ExpiresAt:  time.Unix(0, r.Expires).UTC(),
		TTL:        api.LockTTL(r.TTL),
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
	var cmd api.LockAcquireCommand
	if err := decodeCommand(api.OpLockAcquire, body, &cmd); err != nil {
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
			return &api.LockResult{Outcome: api.LockHeld, Lock: cur.view(cmd.Path, ts),
				Message: fmt.Sprintf("lock %q is held by %s (token %d) until %s",
					cmd.Path, cur.Holder, cur.Token, lockTime(cur.Expires))}, nil
		}
		// The live holder asks again: extend, keep the token.
		cur.Renewed, cur.Expires, cur.TTL = ts, addTTL(ts, ttl), int64(ttl)
		putLock(b, "lock_acquire", cmd.Path, &cur)
		audit(tx, index, ts, api.AuditEvent{Kind: AuditLock, From: cmd.Holder, Label: "LOCK_RENEW",
			Text: lockAudit(cmd.Path, &cur) + " (re-acquired)"})
		return &api.LockResult{Outcome: api.LockExtended, Lock: cur.view(cmd.Path, ts)}, nil
	}
	var prev *api.Lock
	if held {
		prev = cur.view(cmd.Path, ts)
		deleteLock(b, "lock_acquire", cmd.Path, cur.Holder)
		audit(tx, index, ts, api.AuditEvent{Kind: AuditLock, From: cur.Holder, Label: "LOCK_EXPIRED",
			Text: fmt.Sprintf("%s token=%d expired at %s; taken over by %s", cmd.Path, cur.Token, lockTime(cur.Expires), cmd.Holder)})
	}
	rec := lockRecord{Holder: cmd.Holder, Token: index, Acquired: ts, Expires: addTTL(ts, ttl), TTL: int64(ttl)}
	putLock(b, "lock_acquire", cmd.Path, &rec)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditLock, From: cmd.Holder, Label: "LOCK_ACQUIRE", Text: lockAudit(cmd.Path, &rec)})
	return &api.LockResult{Outcome: api.LockGranted, Lock: rec.view(cmd.Path, ts), Previous: prev}, nil
}

// currentGrant loads the lease on path that a renew or release (op) acts
// on. No lease is an error wrapping ErrNotFound; a holder or token that is
// not the lease's is a refusal ("" holder skips the holder check, for a
// forced release; 0 token the token check).
func currentGrant(b *bbolt.Bucket, op api.Op, path, holder string, token uint64, ts int64) (lockRecord, *api.LockResult, error) {
	cur, held, err := getLock(b, path)
	if err != nil {
		return cur, nil, fmt.Errorf("fsm: apply %s: %w", op, err)
	}
	if !held {
		return cur, nil, fmt.Errorf("fsm: apply %s: %w", op, notFound("no lock on %q (released, or never granted)", path))
	}
	switch {
	case holder != "" && cur.Holder != holder:
		return cur, &api.LockResult{Outcome: api.LockNotHolder, Lock: cur.view(path, ts),
			Message: fmt.Sprintf("lock %q is held by %s (token %d), not %s", path, cur.Holder, cur.Token, holder)}, nil
	case token != 0 && cur.Token != token:
		return cur, &api.LockResult{Outcome: api.LockStaleToken, Lock: cur.view(path, ts),
			Message: fmt.Sprintf("lock %q: token %d is not the current grant's (%d); acquire it again", path, token, cur.Token)}, nil
	}
	return cur, nil, nil
}

func applyLockRenew(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.LockRenewCommand
	if err := decodeCommand(api.OpLockRenew, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketLocks)
	cur, refused, err := currentGrant(b, api.OpLockRenew, cmd.Path, cmd.Holder, cmd.Token, ts)
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return refused, nil
	}
	if cur.expiredAt(ts) {
		return &api.LockResult{Outcome: api.LockLapsed, Lock: cur.view(cmd.Path, ts),
			Message: fmt.Sprintf("lock %q (token %d) expired at %s, before this renewal at %s; acquire it again for a new token",
				cmd.Path, cur.Token, lockTime(cur.Expires), lockTime(ts))}, nil
	}
	ttl := time.Duration(cmd.TTL)
	cur.Renewed, cur.Expires, cur.TTL = ts, addTTL(ts, ttl), int64(ttl)
	putLock(b, "lock_renew", cmd.Path, &cur)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditLock, From: cmd.Holder, Label: "LOCK_RENEW", Text: lockAudit(cmd.Path, &cur)})
	return &api.LockResult{Outcome: api.LockExtended, Lock: cur.view(cmd.Path, ts)}, nil
}

func applyLockRelease(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.LockReleaseCommand
	if err := decodeCommand(api.OpLockRelease, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketLocks)
	cur, refused, err := currentGrant(b, api.OpLockRelease, cmd.Path, cmd.Holder, cmd.Token, ts)
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return refused, nil
	}
	deleteLock(b, "lock_release", cmd.Path, cur.Holder)
	ev := api.AuditEvent{Kind: AuditLock, From: cur.Holder, Label: "LOCK_RELEASE", Text: fmt.Sprintf("%s token=%d", cmd.Path, cur.Token)}
	if cmd.Force {
		ev.From, ev.To = cmd.By, []string{cur.Holder}
		ev.Text += " forced by " + cmd.By
	}
	audit(tx, index, ts, ev)
	return &api.LockResult{Outcome: api.LockReleased, Lock: cur.view(cmd.Path, ts)}, nil
}

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

// lastTS is the time of the latest applied entry.
func lastTS(tx *bbolt.Tx) int64 { return int64(getU64(tx.Bucket(bucketMeta), keyLastTS)) }

// Locks returns a page of locks in path order. It reads Limit+1 keys of
// the path (or, with Holder, the holder) index, whatever the number of
// locks.
func (f *FSM) Locks(q api.LockQuery) (api.LockPage, error) {
	limit := pageLimit(q.Limit)
	page := api.LockPage{Locks: []api.Lock{}}
	if q.Holder != "" && !api.ValidName(q.Holder) {
		return page, fmt.Errorf("fsm: locks: %w", api.NameError("holder", q.Holder))
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

// CheckLock reports whether token is the current, unexpired grant of path.
// An unknown path is not an error: the answer is simply "not current".
func (f *FSM) CheckLock(path string, token uint64) (api.LockCheck, error) {
	out := api.LockCheck{Path: path}
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
