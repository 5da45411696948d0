package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
