package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// OverviewEntry is one message as the supervisor's overview lists it: the
// headers without the content (the seed's "Master sees: Developer →
// Reviewer | Title: ..."). The whole message is one GET /v1/messages/{id}
// away.
type OverviewEntry struct {
	Seq       uint64    `json:"seq"`
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Channel   string    `json:"channel"`
	From      string    `json:"from"`
	// To is "to" as written; Recipients the agents it was delivered to.
	To         []string `json:"to"`
	Recipients []string `json:"recipients,omitempty"`
	Type       string   `json:"type,omitempty"`
	Priority   string   `json:"priority,omitempty"`
	// Title is "(private)" for a private message.
	Title   string `json:"title,omitempty"`
	Private bool   `json:"private,omitempty"`
}

// OverviewPage is one page of the overview in seq order.
type OverviewPage struct {
	Messages []OverviewEntry `json:"messages"`
	// HasMore is true when messages after the last one on the page exist.
	HasMore bool `json:"has_more"`
}

// PrivateText replaces the title of a private message in the overview
// (and the text of its audit events on the API) until readers
// authenticate.
const PrivateText = "(private)"

// overviewHeaders is the part of a stored message the overview decodes:
// the content is skipped, not copied.
type overviewHeaders struct {
	Seq        uint64     `json:"seq"`
	ID         string     `json:"id"`
	Timestamp  time.Time  `json:"timestamp"`
	Channel    string     `json:"channel"`
	From       string     `json:"from"`
	To         Recipients `json:"to"`
	Recipients []string   `json:"recipients"`
	Type       string     `json:"type"`
	Priority   string     `json:"priority"`
	Title      string     `json:"title"`
	Visibility string     `json:"visibility"`
}

func overviewEntry(data []byte) (OverviewEntry, error) {
	var h overviewHeaders
	if err := json.Unmarshal(data, &h); err != nil {
		return OverviewEntry{}, err
	}
	e := OverviewEntry{
		Seq: h.Seq, ID: h.ID, Timestamp: h.Timestamp, Channel: h.Channel, From: h.From,
		To: []string(h.To), Recipients: h.Recipients, Type: h.Type, Priority: h.Priority, Title: h.Title,
	}
	if e.To == nil {
		e.To = []string{}
	}
	if h.Visibility == "private" {
		e.Private, e.Title = true, PrivateText
	}
	return e, nil
}

// Overview returns up to limit messages with seq > after, in seq order, as
// headers without content: those of channel when channel is not "" (from
// the channel index), else of every channel (from the log itself). limit
// ≤ 0 means DefaultPageLimit; it is capped at MaxPageLimit. It reads
// limit+1 keys and limit messages whatever the log's size. An unknown
// channel yields an empty page.
func (f *FSM) Overview(channel string, after uint64, limit int) (OverviewPage, error) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	limit = min(limit, MaxPageLimit)
	page := OverviewPage{Messages: []OverviewEntry{}}
	add := func(seq uint64, data []byte) error {
		if len(page.Messages) == limit {
			page.HasMore = true
			return errOverviewFull
		}
		if data == nil {
			return fmt.Errorf("message at seq %d: %w", seq, ErrNotFound)
		}
		e, err := overviewEntry(data)
		if err != nil {
			return fmt.Errorf("message at seq %d: decode: %w", seq, err)
		}
		page.Messages = append(page.Messages, e)
		return nil
	}
	err := f.view(func(tx *bbolt.Tx) error {
		msgs := tx.Bucket(bucketMessages)
		if channel == "" {
			c := msgs.Cursor()
			for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
				if err := add(binary.BigEndian.Uint64(k), v); err != nil {
					return err
				}
			}
			return nil
		}
		prefix := append([]byte(channel), 0)
		c := tx.Bucket(bucketChannelIndex).Cursor()
		for k, _ := c.Seek(channelIndexKey(channel, after+1)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			if err := add(seq, msgs.Get(u64(seq))); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errOverviewFull) {
		err = nil
	}
	if err != nil {
		return page, fmt.Errorf("fsm: overview: %w", err)
	}
	return page, nil
}

// errOverviewFull stops a page scan once the page is full.
var errOverviewFull = errors.New("page full")
