package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
