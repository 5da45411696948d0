package fsm

import (
	"go.etcd.io/bbolt"
)

// bucketCursors: agent id → the seq (8 bytes) of the last message its
// watcher handled. Replicated, so a watcher restarted on any host resumes
// after it.

// getCursor reads agent's cursor, 0 when its watcher never recorded one.
func getCursor(tx *bbolt.Tx, agent string) uint64 {
	return getU64(tx.Bucket(bucketCursors), []byte(agent))
}
