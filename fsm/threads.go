package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"
)

// Threads.
//
// bucketThreads: thread id ‖ 0x00 ‖ seq (8 bytes BE) → empty. The thread
// id of a stored message is threadOf(m): its thread_id, or its own id for
// a root. A reply sent without thread_id gets one at apply time (its
// parent's thread), so the entry is derived from the stored message alone.

// threadOf is the thread a stored message belongs to.
func threadOf(m *Message) string {
	if m.ThreadID != "" {
		return m.ThreadID
	}
	return m.ID
}

// fillThread sets the thread_id of a reply sent without one: the parent's
// thread if the parent is stored, otherwise the parent's id.
func fillThread(tx *bbolt.Tx, m *Message) error {
	if m.ThreadID != "" || m.InReplyTo == "" {
		return nil
	}
	m.ThreadID = m.InReplyTo
	v := tx.Bucket(bucketIDs).Get([]byte(m.InReplyTo))
	if len(v) < 8 {
		return nil
	}
	parent, err := getMessage(tx, binary.BigEndian.Uint64(v[:8]))
	if err != nil {
		return err
	}
	m.ThreadID = threadOf(parent)
	return nil
}

// ThreadPage is one page of a thread in seq order.
type ThreadPage struct {
	ThreadID string     `json:"thread_id"`
	Messages []*Message `json:"messages"`
	HasMore  bool       `json:"has_more"`
}

// Thread returns up to limit messages of the thread id with seq > after
// (limit as for ChannelPage). id may also be the id of any message of the
// thread: its thread is returned. An id that is neither is an error wrapping
// ErrNotFound. It reads limit+1 index keys and limit messages.
func (f *FSM) Thread(id string, after uint64, limit int) (ThreadPage, error) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	limit = min(limit, MaxPageLimit)
	page := ThreadPage{ThreadID: id, Messages: []*Message{}}
	err := f.view(func(tx *bbolt.Tx) error {
		threads := tx.Bucket(bucketThreads)
		prefix := append([]byte(id), 0)
		if k, _ := threads.Cursor().Seek(prefix); k == nil || !bytes.HasPrefix(k, prefix) {
			v := tx.Bucket(bucketIDs).Get([]byte(id))
			if len(v) < 8 {
				return fmt.Errorf("fsm: thread %s: %w", id, ErrNotFound)
			}
			m, err := getMessage(tx, binary.BigEndian.Uint64(v[:8]))
			if err != nil {
				return fmt.Errorf("fsm: thread %s: %w", id, err)
			}
			page.ThreadID = threadOf(m)
			prefix = append([]byte(page.ThreadID), 0)
		}
		c := threads.Cursor()
		for k, _ := c.Seek(channelIndexKey(page.ThreadID, after+1)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(page.Messages) == limit {
				page.HasMore = true
				return nil
			}
			m, err := getMessage(tx, binary.BigEndian.Uint64(k[len(prefix):]))
			if err != nil {
				return fmt.Errorf("fsm: thread %s: %w", page.ThreadID, err)
			}
			page.Messages = append(page.Messages, m)
		}
		return nil
	})
	return page, err
}

// dropMessageIndexes deletes every per-message index entry of the stored
// message m: each recipient's inbox and unread entries (adjusting its counts
// exactly: total, and unread by priority if it was unread), the receipts
// and the thread entry. It leaves the message, its id, the channel entries
// and the audit trail to the caller. Retention calls it for each trimmed
// message inside its apply transaction.
func dropMessageIndexes(tx *bbolt.Tx, m *Message) {
	inbox, unread, counts := tx.Bucket(bucketInbox), tx.Bucket(bucketInboxUnread), tx.Bucket(bucketInboxCounts)
	for _, agent := range m.Recipients {
		k := inboxKey(agent, m.Seq)
		v := inbox.Get(k)
		if len(v) != 2 {
			continue
		}
		c, _ := getCounts(counts, agent)
		c[0]--
		if v[0]&inboxRead == 0 {
			c[1]--
			c[2+int(v[1])]--
		}
		putCounts(counts, agent, c)
		mustDelete(inbox, k)
		mustDelete(unread, k)
	}
	receipts := tx.Bucket(bucketReceipts)
	prefix := u64(m.Seq)
	var keys [][]byte
	c := receipts.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		mustDelete(receipts, k)
	}
	mustDelete(tx.Bucket(bucketThreads), channelIndexKey(threadOf(m), m.Seq))
}
