package fsm

import (
	"errors"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Threads.
//
// bucketThreads: thread id ‖ 0x00 ‖ seq (8 bytes BE) → empty. The thread
// id of a stored message is ThreadOf(m): its thread_id, or its own id for
// a root. A reply sent without thread_id gets one at apply time (its
// parent's thread), so the entry is derived from the stored message alone.

// addToThread adds message seq to thread.
func addToThread(tx *bbolt.Tx, thread string, seq uint64) {
	mustPut(appendBucket(tx, bucketThreads), channelIndexKey(thread, seq), nil)
}

// dropFromThread removes message seq from thread.
func dropFromThread(tx *bbolt.Tx, thread string, seq uint64) {
	mustDelete(tx.Bucket(bucketThreads), channelIndexKey(thread, seq))
}

// parentOf reads the message m answers (in_reply_to): nil when m answers
// nothing, a message never stored or trimmed by retention, or one reader
// may not read (Viewer.CanRead; nil reads all).
func parentOf(tx *bbolt.Tx, m *api.Message, reader *api.Viewer) (*api.Message, error) {
	if m.InReplyTo == "" {
		return nil, nil
	}
	parent, err := messageByID(tx, m.InReplyTo)
	if errors.Is(err, api.ErrNotFound) || err == nil && !reader.CanRead(parent) {
		// A parent its sender may not read is one it cannot know: the
		// reply gets neither its thread nor its visibility.
		return nil, nil
	}
	return parent, err
}

// fillThread sets the thread_id of a reply sent without one: its parent's
// thread if the parent is stored (parent not nil), otherwise the parent's
// id.
func fillThread(m, parent *api.Message) {
	if m.ThreadID != "" || m.InReplyTo == "" {
		return
	}
	m.ThreadID = m.InReplyTo
	if parent != nil {
		m.ThreadID = api.ThreadOf(parent)
	}
}

// dropMessageIndexes deletes every per-message index entry of the stored
// message m: each recipient's inbox and unread entries (adjusting its counts
// exactly: total, and unread by priority if it was unread), the receipts
// and the thread entry. It leaves the message, its id, the channel entries
// and the audit trail to the caller. Retention calls it for each trimmed
// message inside its apply transaction.
func dropMessageIndexes(tx *bbolt.Tx, m *api.Message) {
	for _, agent := range m.Recipients {
		removeFromInbox(tx, agent, m.Seq)
	}
	deleteReceipts(tx, m.Seq)
	dropFromThread(tx, api.ThreadOf(m), m.Seq)
}
