package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// SendCommand is the body of OpSend: the message as the client sent it,
// normalized and validated by the proposer (seq zero; timestamp zero unless
// the client set one).
type SendCommand struct {
	Message Message `json:"message"`
}

// SendResult is what applying a send returns: where the message is stored.
// Duplicate is true when the id was already stored with the same content and
// this entry stored nothing.
type SendResult struct {
	ID        string    `json:"id"`
	Seq       uint64    `json:"seq"`
	Timestamp time.Time `json:"timestamp"`
	Duplicate bool      `json:"-"`
}

// contentHash is the SHA-256 of the message as sent (seq zero, timestamp as
// the client gave it), so a retry of the same send matches and a reuse of
// the id for something else does not.
func contentHash(m *Message) ([32]byte, error) {
	c := *m
	c.Seq = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

func applySend(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd SendCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply send: decode: %w", err)
	}
	m := cmd.Message
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: apply send: %w", err)
	}
	sum, err := contentHash(&m)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply send: hash: %w", err)
	}
	ids := tx.Bucket(bucketIDs)
	if prev := ids.Get([]byte(m.ID)); prev != nil {
		if len(prev) != 40 || !bytes.Equal(prev[8:], sum[:]) {
			return nil, fmt.Errorf("fsm: apply send: id %s: %w", m.ID, ErrConflict)
		}
		seq := binary.BigEndian.Uint64(prev[:8])
		stored, err := getMessage(tx, seq)
		if err != nil {
			return nil, fmt.Errorf("fsm: apply send: %w", err)
		}
		return &SendResult{ID: m.ID, Seq: seq, Timestamp: stored.Timestamp, Duplicate: true}, nil
	}

	m.Seq = index
	if m.Timestamp.IsZero() {
		m.Timestamp = time.Unix(0, ts).UTC()
	}
	data, err := json.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply send: encode: %w", err)
	}
	seqKey := u64(index)
	chans := tx.Bucket(bucketChannels)
	var count, first uint64
	if v := chans.Get([]byte(m.Channel)); len(v) == 24 {
		count = binary.BigEndian.Uint64(v[:8])
		first = binary.BigEndian.Uint64(v[8:16])
	} else {
		first = index
	}
	chanVal := make([]byte, 0, 24)
	chanVal = append(append(append(chanVal, u64(count+1)...), u64(first)...), seqKey...)
	idVal := append(append(make([]byte, 0, 40), seqKey...), sum[:]...)

	for _, w := range []struct {
		bucket []byte
		k, v   []byte
	}{
		{bucketMessages, seqKey, data},
		{bucketIDs, []byte(m.ID), idVal},
		{bucketChannels, []byte(m.Channel), chanVal},
		{bucketChannelIndex, channelIndexKey(m.Channel, index), nil},
	} {
		if err := tx.Bucket(w.bucket).Put(w.k, w.v); err != nil {
			// A bbolt Put fails only on programming errors (empty key, key
			// too large) or a read-only tx; the batch is abandoned.
			panic(fmt.Sprintf("fsm: apply send: put %s: %v", w.bucket, err))
		}
	}
	return &SendResult{ID: m.ID, Seq: index, Timestamp: m.Timestamp}, nil
}
