package fsm

import (
	"bytes"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Thread returns up to limit messages of the thread id with seq > after
// (limit as for ChannelPage). id may also be the id of any message of the
// thread: its thread is returned. An id that is neither is an error wrapping
// ErrNotFound. It reads limit+1 index keys and limit messages.
func (f *FSM) Thread(id string, after uint64, limit int) (api.ThreadPage, error) {
	limit = pageLimit(limit)
	page := api.ThreadPage{ThreadID: id, Messages: []*api.Message{}}
	err := f.view(func(tx *bbolt.Tx) error {
		threads := tx.Bucket(bucketThreads)
		prefix := append([]byte(id), 0)
		if k, _ := threads.Cursor().Seek(prefix); k == nil || !bytes.HasPrefix(k, prefix) {
			rec, ok := getID(tx, id)
			if !ok {
				return ThreadNotFound(id)
			}
			m, err := getMessage(tx, rec.seq)
			if err != nil {
				return fmt.Errorf("fsm: thread %s: %w", id, err)
			}
			page.ThreadID = api.ThreadOf(m)
		}
		for seq := range seqsAfter(threads, page.ThreadID, after) {
			if len(page.Messages) == limit {
				page.HasMore = true
				return nil
			}
			m, err := getMessage(tx, seq)
			if err != nil {
				return fmt.Errorf("fsm: thread %s: %w", page.ThreadID, err)
			}
			page.Messages = append(page.Messages, m)
		}
		return nil
	})
	return page, err
}
