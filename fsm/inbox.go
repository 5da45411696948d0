package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Per-agent inboxes and read state. Every entry is derived from a stored
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

// Inbox query limits.
const (
	// MaxInboxScan bounds the inbox entries one query reads when filters
	// other than unread and priority (type, from) skip entries: the page
	// then ends early with has_more and next_after, and the client goes on
	// from there.
	MaxInboxScan = 10 * api.MaxPageLimit
)

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

func applyMarkRead(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.MarkReadCommand
	if err := decodeCommand(api.OpMarkRead, body, &cmd); err != nil {
		return nil, err
	}
	if err := inboxExists(tx, cmd.Agent); err != nil {
		return nil, fmt.Errorf("fsm: apply mark_read: %w", err)
	}
	marked := 0
	if cmd.ID != "" {
		// One answer for an unknown id and for one in another inbox: the
		// second must not tell an agent that a private message exists.
		rec, ok := getID(tx, cmd.ID)
		if ok {
			_, ok = getInboxEntry(tx, cmd.Agent, rec.seq)
		}
		if !ok {
			return nil, fmt.Errorf("fsm: apply mark_read: %w", notFound("message %s is not in %s's inbox", cmd.ID, cmd.Agent))
		}
		if markRead(tx, cmd.Agent, rec.seq, ts) {
			marked++
		}
	} else {
		// Collect first: the cursor must not walk keys being deleted.
		var seqs []uint64
		for seq := range seqsAfter(tx.Bucket(bucketInboxUnread), cmd.Agent, 0) {
			if seq > cmd.Upto {
				break
			}
			seqs = append(seqs, seq)
		}
		for _, seq := range seqs {
			if markRead(tx, cmd.Agent, seq, ts) {
				marked++
			}
		}
		raiseReadMark(tx, cmd.Agent, cmd.Upto)
	}
	return &api.MarkReadResult{Agent: cmd.Agent, Marked: marked, Counts: readCounts(tx, cmd.Agent)}, nil
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

// InboxCounts returns agent's counters (one key read), or an error wrapping
// ErrNotFound for an agent that is not registered and has no inbox.
func (f *FSM) InboxCounts(agent string) (api.InboxCounts, error) {
	var out api.InboxCounts
	err := f.view(func(tx *bbolt.Tx) error {
		if err := inboxExists(tx, agent); err != nil {
			return fmt.Errorf("fsm: inbox counts: %w", err)
		}
		out = readCounts(tx, agent)
		return nil
	})
	return out, err
}

// Inbox returns a page of agent's inbox: entries with seq > q.After that
// pass the filters, oldest first. It reads the index range from q.After
// (the unread range with q.Unread) until the page is full, and the message
// of each entry that passes the index filters; with Type or From it stops
// after MaxInboxScan entries with HasMore set. An agent that is not
// registered and has no inbox is an error wrapping ErrNotFound.
func (f *FSM) Inbox(agent string, q api.InboxQuery) (api.InboxPage, error) {
	if err := q.Validate(); err != nil {
		return api.InboxPage{}, err
	}
	limit := pageLimit(q.Limit)
	page := api.InboxPage{Agent: agent, Messages: []api.InboxEntry{}}
	var wantPrio int = -1
	if q.Priority != "" {
		wantPrio = int(priorityByte(q.Priority))
	}
	err := f.view(func(tx *bbolt.Tx) error {
		if err := inboxExists(tx, agent); err != nil {
			return fmt.Errorf("fsm: inbox: %w", err)
		}
		bucket := bucketInbox
		if q.Unread {
			bucket = bucketInboxUnread
		}
		inbox := tx.Bucket(bucketInbox)
		prefix := append([]byte(agent), 0)
		scanned := 0
		c := tx.Bucket(bucket).Cursor()
		first, next := inboxRange(c, agent, prefix, q)
		for k, v := first(); k != nil && bytes.HasPrefix(k, prefix); k, v = next() {
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			if q.Newest && seq <= q.After {
				return nil
			}
			if len(page.Messages) == limit || scanned == MaxInboxScan {
				page.HasMore = true
				return nil
			}
			scanned++
			if q.Newest {
				page.NextBefore = seq
			} else {
				page.NextAfter = seq
			}
			prio := v[len(v)-1]
			if wantPrio >= 0 && int(prio) != wantPrio {
				continue
			}
			m, err := getMessage(tx, seq)
			if err != nil {
				return fmt.Errorf("fsm: inbox %s: %w", agent, err)
			}
			if (q.Type != "" && m.Type != q.Type) || (q.From != "" && m.From != q.From) {
				continue
			}
			read := true
			if e, ok := decodeInboxEntry(inbox.Get(k)); ok {
				read = e.read
			}
			page.Messages = append(page.Messages, api.InboxEntry{Message: *m, Read: read})
		}
		return nil
	})
	return page, err
}

// inboxRange returns how to walk agent's entries in c for q: oldest first
// from After, or newest first from Before.
func inboxRange(c *bbolt.Cursor, agent string, prefix []byte, q api.InboxQuery) (first, next func() ([]byte, []byte)) {
	if !q.Newest {
		return func() ([]byte, []byte) { return c.Seek(inboxKey(agent, q.After+1)) }, c.Next
	}
	return func() ([]byte, []byte) {
		// The first key at or past the bound, then one step back.
		bound := inboxKey(agent, q.Before)
		if q.Before == 0 {
			bound = append(bytes.Clone(prefix[:len(prefix)-1]), 1) // past every key of agent
		}
		if k, _ := c.Seek(bound); k == nil {
			return c.Last()
		}
		return c.Prev()
	}, c.Prev
}

// entryTime is the entry time ts as a UTC time, zero for 0.
func entryTime(ts int64) time.Time {
	if ts == 0 {
		return time.Time{}
	}
	return time.Unix(0, ts).UTC()
}
