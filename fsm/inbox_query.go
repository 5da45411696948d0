package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Inbox query limits.
const (
	// MaxInboxScan bounds the inbox entries one query reads when filters
	// other than unread and priority (type, from) skip entries: the page
	// then ends early with has_more and next_after, and the client goes on
	// from there.
	MaxInboxScan = 10 * api.MaxPageLimit
)

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
