package fsm

import (
	"fmt"
	"math"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Advisory locks: leases on shared files and resources.
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

// addTTL is ts+ttl, saturating at the largest time instead of wrapping.
func addTTL(ts int64, ttl time.Duration) int64 {
	if ts > math.MaxInt64-int64(ttl) {
		return math.MaxInt64
	}
	return ts + int64(ttl)
}

func lockTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// lockAudit renders the audit text of a lease: "src/a.go token=42 until 2026-...".
func lockAudit(path string, r *lockRecord) string {
	return fmt.Sprintf("%s token=%d ttl=%s until %s", path, r.Token, time.Duration(r.TTL), lockTime(r.Expires))
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
