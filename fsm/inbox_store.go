package fsm

import (
	"encoding/binary"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Per-agent inboxes and read state in the state file. Every entry is derived from a stored
// message: message seq S with resolved recipients R has, for each agent A
// in R, exactly one inbox entry A ‖ 0x00 ‖ S, and an unread entry while A
// has not marked it read. dropMessageIndexes removes them.
//
// bucketInbox: agent ‖ 0x00 ‖ seq (8 bytes BE) → [flags, priority]:
// flags bit 0 is "read"; priority is the message's priority byte
// (priorityByte: 0 urgent … 3 low), so ?priority= filters without reading
// the message.
//
// bucketInboxUnread: agent ‖ 0x00 ‖ seq (8) → [priority], for the entries
// not yet read: ?unread=true and "mark read up to SEQ" read this range only.
//
// bucketInboxCounts: agent → total (8) ‖ unread (8) ‖ unread by priority
// (4 × 8, by priority byte): 48 bytes, kept exact at apply so counts
// cost one key.
//
// bucketReadMarks: agent → seq (8): the highest "read up to" mark given.

const inboxRead = 1 // flags bit

// inboxKey is agent ‖ 0x00 ‖ seq.
func inboxKey(agent string, seq uint64) []byte { return channelIndexKey(agent, seq) }

// inboxEntry is an inbox value: whether the agent read the message, and
// the message's priority byte.
type inboxEntry struct {
	read bool
	prio byte
}

// decodeInboxEntry reads an inbox value; ok is false for a damaged one.
func decodeInboxEntry(v []byte) (e inboxEntry, ok bool) {
	if len(v) != 2 {
		return e, false
	}
	return inboxEntry{read: v[0]&inboxRead != 0, prio: v[1]}, true
}

func (e inboxEntry) encode() []byte {
	var flags byte
	if e.read {
		flags |= inboxRead
	}
	return []byte{flags, e.prio}
}

// getInboxEntry reads agent's entry for message seq; ok is false when the
// message is not in agent's inbox.
func getInboxEntry(tx *bbolt.Tx, agent string, seq uint64) (inboxEntry, bool) {
	return decodeInboxEntry(tx.Bucket(bucketInbox).Get(inboxKey(agent, seq)))
}

// countsRec is an inbox_counts value: total, unread, then unread by
// priority byte.
type countsRec [2 + numPriorities]uint64

// getCounts reads agent's counters, zero for an agent with no inbox.
func getCounts(tx *bbolt.Tx, agent string) countsRec {
	var c countsRec
	v := tx.Bucket(bucketInboxCounts).Get([]byte(agent))
	if len(v) != 8*len(c) {
		return c
	}
	for i := range c {
		c[i] = binary.BigEndian.Uint64(v[8*i:])
	}
	return c
}

// putCounts writes agent's counters. (Callers get, change and put rather
// than pass a func: a closure over the record would put it on the heap,
// once per delivery.)
func putCounts(tx *bbolt.Tx, agent string, c countsRec) {
	v := make([]byte, 0, 8*len(c))
	for _, n := range c {
		v = binary.BigEndian.AppendUint64(v, n)
	}
	mustPut(tx.Bucket(bucketInboxCounts), []byte(agent), v)
}

// added counts a new unread entry of priority byte prio.
func (c *countsRec) added(prio byte) { c[0]++; c[1]++; c[2+int(prio)]++ }

// read counts an unread entry of priority byte prio read.
func (c *countsRec) read(prio byte) { c[1]--; c[2+int(prio)]-- }

// removed counts entry e gone.
func (c *countsRec) removed(e inboxEntry) {
	c[0]--
	if !e.read {
		c.read(e.prio)
	}
}

// deliver appends message seq (of priority byte prio) to agent's inbox,
// unread.
func deliver(tx *bbolt.Tx, agent string, seq uint64, prio byte) {
	k := inboxKey(agent, seq)
	mustPut(appendBucket(tx, bucketInbox), k, inboxEntry{prio: prio}.encode())
	mustPut(appendBucket(tx, bucketInboxUnread), k, []byte{prio})
	c := getCounts(tx, agent)
	c.added(prio)
	putCounts(tx, agent, c)
}

// removeFromInbox deletes agent's entry for message seq, if there is one,
// and counts it gone.
func removeFromInbox(tx *bbolt.Tx, agent string, seq uint64) {
	e, ok := getInboxEntry(tx, agent, seq)
	if !ok {
		return
	}
	c := getCounts(tx, agent)
	c.removed(e)
	putCounts(tx, agent, c)
	k := inboxKey(agent, seq)
	mustDelete(tx.Bucket(bucketInbox), k)
	mustDelete(tx.Bucket(bucketInboxUnread), k)
}

// markRead marks agent's entry for seq read at ts and records the read
// receipt. It reports whether the entry existed unread: an entry read
// before is left as it is, so counts are never decremented twice.
func markRead(tx *bbolt.Tx, agent string, seq uint64, ts int64) bool {
	e, ok := getInboxEntry(tx, agent, seq)
	if !ok || e.read {
		return false
	}
	k := inboxKey(agent, seq)
	e.read = true
	mustPut(tx.Bucket(bucketInbox), k, e.encode())
	mustDelete(tx.Bucket(bucketInboxUnread), k)
	c := getCounts(tx, agent)
	c.read(e.prio)
	putCounts(tx, agent, c)
	updateReceipt(tx, seq, agent, func(r *receiptRec) {
		if r.ReadAt == 0 {
			r.ReadAt = ts
		}
	})
	return true
}

// readMark is the highest "read up to" mark agent gave, 0 for none.
func readMark(tx *bbolt.Tx, agent string) uint64 {
	return getU64(tx.Bucket(bucketReadMarks), []byte(agent))
}

// raiseReadMark records the mark upto for agent unless it gave a higher one.
func raiseReadMark(tx *bbolt.Tx, agent string, upto uint64) {
	if upto > readMark(tx, agent) {
		mustPut(tx.Bucket(bucketReadMarks), []byte(agent), u64(upto))
	}
}

// inboxExists returns an error wrapping ErrNotFound when agent is neither
// registered nor has ever been sent a message.
func inboxExists(tx *bbolt.Tx, agent string) error {
	if tx.Bucket(bucketInboxCounts).Get([]byte(agent)) != nil || tx.Bucket(bucketAgents).Get([]byte(agent)) != nil {
		return nil
	}
	return notFound("agent %s: not registered and never sent a message", agent)
}

func readCounts(tx *bbolt.Tx, agent string) api.InboxCounts {
	c := getCounts(tx, agent)
	out := api.InboxCounts{Agent: agent, Total: c[0], Unread: c[1], UnreadByPriority: map[api.Priority]uint64{},
		ReadUpto: readMark(tx, agent)}
	for _, p := range api.Priorities {
		out.UnreadByPriority[p] = c[2+int(priorityByte(p))]
	}
	return out
}
