package fsm

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// pageLimit is the size of a page asked for with limit: DefaultPageLimit
// for 0 or less, at most MaxPageLimit.
func pageLimit(limit int) int {
	if limit <= 0 {
		return api.DefaultPageLimit
	}
	return min(limit, api.MaxPageLimit)
}

// Message returns the message with the given id, or an error wrapping
// ErrNotFound.
func (f *FSM) Message(id string) (*api.Message, error) {
	var m *api.Message
	err := f.view(func(tx *bbolt.Tx) error {
		rec, ok := getID(tx, id)
		if !ok {
			return MessageNotFound(id)
		}
		var err error
		m, err = getMessage(tx, rec.seq)
		return err
	})
	return m, err
}

// ChannelPage returns up to limit messages of channel with seq > after, in
// seq order. limit ≤ 0 means DefaultPageLimit; it is capped at MaxPageLimit.
// It reads limit+1 index keys and limit messages, whatever the log's size.
// An unknown channel yields an empty page.
func (f *FSM) ChannelPage(channel string, after uint64, limit int) (api.Page, error) {
	limit = pageLimit(limit)
	page := api.Page{Messages: []*api.Message{}}
	err := f.view(func(tx *bbolt.Tx) error {
		for seq := range seqsAfter(tx.Bucket(bucketChannelIndex), channel, after) {
			if len(page.Messages) == limit {
				page.HasMore = true
				return nil
			}
			m, err := getMessage(tx, seq)
			if err != nil {
				return fmt.Errorf("fsm: channel %s: %w", channel, err)
			}
			page.Messages = append(page.Messages, m)
		}
		return nil
	})
	return page, err
}

// MessagesAfter returns up to limit messages of every channel with seq >
// after, in seq order (limit as for ChannelPage). It reads limit+1 keys.
func (f *FSM) MessagesAfter(after uint64, limit int) (api.Page, error) {
	limit = pageLimit(limit)
	page := api.Page{Messages: []*api.Message{}}
	err := f.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketMessages).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if len(page.Messages) == limit {
				page.HasMore = true
				return nil
			}
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("fsm: message at seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			page.Messages = append(page.Messages, m)
		}
		return nil
	})
	return page, err
}

// Channels lists every channel with its counts, by name.
func (f *FSM) Channels() ([]api.ChannelInfo, error) {
	out := []api.ChannelInfo{}
	err := f.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketChannels).ForEach(func(k, v []byte) error {
			rec, ok := decodeChannel(v)
			if !ok {
				return fmt.Errorf("fsm: channel %s: bad record", k)
			}
			out = append(out, api.ChannelInfo{Name: string(k), Count: rec.count, FirstSeq: rec.first, LastSeq: rec.last})
			return nil
		})
	})
	return out, err
}
