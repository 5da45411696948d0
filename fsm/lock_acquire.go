package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
