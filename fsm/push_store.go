package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketPush (A2A push notifications, version 3):
//
//	task id ‖ 0x00 ‖ config id → api.PushConfig JSON, credentials included
//	0x00 "cursor"              → 8 bytes: the deliverer's cursor (PushCursor.Index)
//	0x00 "since"               → 8 bytes: the entry of the first config ever set
//
// Task ids never start with 0x00 (the id pattern), so the two keys of the
// deliverer never fall in a task's range. Tasks are never deleted (not
// even by retention), so no config outlives its task.
var (
	keyPushCursor = []byte("\x00cursor")
	keyPushSince  = []byte("\x00since")
)

// pushKey is the key of config id of task.
func pushKey(task, id string) []byte {
	return append(append([]byte(task), 0), id...)
}

// pushConfigs reads task's configs in id order, credentials included.
func pushConfigs(tx *bbolt.Tx, task string) ([]api.PushConfig, error) {
	prefix := append([]byte(task), 0)
	out := []api.PushConfig{}
	c := tx.Bucket(bucketPush).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var p api.PushConfig
		if err := json.Unmarshal(v, &p); err != nil {
			return nil, fmt.Errorf("push config %q: decode: %w", k, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// putPushConfig writes p (its Index set) and, for the first config ever,
// the since key.
func putPushConfig(tx *bbolt.Tx, p *api.PushConfig) {
	data, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("fsm: push config %s/%s: encode: %v", p.TaskID, p.ID, err))
	}
	b := tx.Bucket(bucketPush)
	mustPut(b, pushKey(p.TaskID, p.ID), data)
	if getU64(b, keyPushSince) == 0 {
		mustPut(b, keyPushSince, u64(p.Index))
	}
}
