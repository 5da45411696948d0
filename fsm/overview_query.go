package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// PrivateText stands for what is hidden of a private message: its title
// in the overview and the text of its audit events, for readers who are
// not authenticated (a node without --auth), and the text of a redacted
// audit event (RedactEvent).
const PrivateText = "(private)"

// overviewHeaders is the part of a stored message the overview decodes:
// the content is skipped, not copied.
type overviewHeaders struct {
	Seq        uint64         `json:"seq"`
	ID         string         `json:"id"`
	Timestamp  time.Time      `json:"timestamp"`
	Channel    string         `json:"channel"`
	From       string         `json:"from"`
	To         api.Recipients `json:"to"`
	Recipients []string       `json:"recipients"`
	Type       string         `json:"type"`
	Priority   api.Priority   `json:"priority"`
	Title      string         `json:"title"`
	Visibility string         `json:"visibility"`
}

// overviewEntry decodes the headers of a stored message as viewer sees
// them: ok is false when viewer may not read it. A nil viewer gets every
// entry, private titles as PrivateText.
func overviewEntry(viewer *api.Viewer, v []byte) (e api.OverviewEntry, ok bool, err error) {
	data, err := messageJSON(v)
	if err != nil {
		return api.OverviewEntry{}, false, err
	}
	var h overviewHeaders
	if err := json.Unmarshal(data, &h); err != nil {
		return api.OverviewEntry{}, false, err
	}
	e = api.OverviewEntry{
		Seq: h.Seq, ID: h.ID, Timestamp: h.Timestamp, Channel: h.Channel, From: h.From,
		To: []string(h.To), Recipients: h.Recipients, Type: h.Type, Priority: h.Priority, Title: h.Title,
	}
	if e.To == nil {
		e.To = []string{}
	}
	if api.Restricted(h.Visibility) {
		m := api.Message{From: h.From, To: h.To, Recipients: h.Recipients, Visibility: h.Visibility}
		if !viewer.CanRead(&m) {
			return api.OverviewEntry{}, false, nil
		}
		e.Private = true
		if viewer == nil {
			e.Title = PrivateText
		}
	}
	return e, true, nil
}

// Overview returns up to limit messages with seq > after, in seq order, as
// headers without content: those of channel when channel is not "" (from
// the channel index), else of every channel (from the log itself). limit
// ≤ 0 means DefaultPageLimit; it is capped at MaxPageLimit. It reads
// limit+1 keys and limit messages whatever the log's size. An unknown
// channel yields an empty page. Private messages are listed with their
// title as PrivateText: this is the overview of a node without
// authentication (OverviewFor with a nil Viewer).
func (f *FSM) Overview(channel string, after uint64, limit int) (api.OverviewPage, error) {
	return f.OverviewFor(nil, channel, after, limit)
}

// OverviewFor is Overview as viewer sees it. A nil viewer sees what
// Overview lists. Otherwise the private messages viewer may not read
// (Viewer.CanRead) are left out and those it may read keep their title
// (marked Private). The page reads on past the messages it leaves out
// until it holds limit entries, so a page with HasMore always ends on an
// entry whose seq is the next cursor; the price is that a page also costs
// the messages it skipped.
func (f *FSM) OverviewFor(viewer *api.Viewer, channel string, after uint64, limit int) (api.OverviewPage, error) {
	limit = pageLimit(limit)
	page := api.OverviewPage{Messages: []api.OverviewEntry{}}
	add := func(seq uint64, data []byte) error {
		if len(page.Messages) == limit {
			page.HasMore = true
			return errOverviewFull
		}
		if data == nil {
			return fmt.Errorf("message at seq %d: %w", seq, api.ErrNotFound)
		}
		e, ok, err := overviewEntry(viewer, data)
		if err != nil {
			return fmt.Errorf("message at seq %d: decode: %w", seq, err)
		}
		if ok {
			page.Messages = append(page.Messages, e)
		}
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
		for seq := range seqsAfter(tx.Bucket(bucketChannelIndex), channel, after) {
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
