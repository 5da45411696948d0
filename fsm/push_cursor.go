package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyPushCursor moves the deliverer's cursor to Index; a cursor never
// moves back (a lower one, from a deposed leader's late write, changes
// nothing). The result is the cursor as stored.
func applyPushCursor(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd api.PushCursorCommand
	if err := decodeCommand(api.OpPushCursor, body, &cmd); err != nil {
		return nil, err
	}
	b := tx.Bucket(bucketPush)
	if cmd.Index > getU64(b, keyPushCursor) {
		mustPut(b, keyPushCursor, u64(cmd.Index))
	}
	return &api.PushCursor{Index: getU64(b, keyPushCursor), Since: getU64(b, keyPushSince)}, nil
}
