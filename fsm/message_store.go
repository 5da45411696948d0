package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The message log: typed accessors over the buckets a stored message
// lives in, so apply functions and queries read and write messages, ids,
// channels and index entries rather than byte layouts.
//
//	messages:      seq (8 bytes BE) → message record (messageValue)
//	ids:           message id → seq (8) ‖ SHA-256 of the sent form (32)
//	channels:      channel → count (8) ‖ first seq (8) ‖ last seq (8)
//	channel_index: channel ‖ 0x00 ‖ seq (8) → empty
//
// A trimmed message loses its messages and channel_index entries and
// keeps its ids entry, so its id is never stored again.

// A messages value is the message's JSON, or that JSON compressed as one
// zstd frame when that saves at least an eighth of it (issue 19: the text
// is most of a message's bytes on disk). The first byte tells them apart:
// JSON begins with '{', a zstd frame with its magic 0x28 b5 2f fd. Files
// written before compression hold JSON only and read as they are. Values
// under messageCompressMin bytes stay JSON: too short to gain. The
// encoder is zstd's default level on one goroutine, whose output for the
// same input and library version is the same on every node, so the state
// stays byte-identical across nodes of one build.
const messageCompressMin = 256

var (
	messageEncoder = mustZstdEncoder()
	messageDecoder = mustZstdDecoder()
)

func mustZstdEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(fmt.Sprintf("fsm: zstd encoder: %v", err))
	}
	return enc
}

// mustZstdDecoder's memory bound is far above any message (the API caps
// a request's body at a few MiB), so only a damaged value reaches it.
func mustZstdDecoder() *zstd.Decoder {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		panic(fmt.Sprintf("fsm: zstd decoder: %v", err))
	}
	return dec
}

// messageValue is the messages value of a message's JSON (see above).
func messageValue(data []byte) []byte {
	if len(data) < messageCompressMin {
		return data
	}
	c := messageEncoder.EncodeAll(data, make([]byte, 0, len(data)))
	if len(c) > len(data)-len(data)/8 {
		return data
	}
	return c
}

// messageJSON is the JSON a messages value holds: v itself, or v
// decompressed. A damaged frame is an error.
func messageJSON(v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, zstdMagic) {
		return v, nil
	}
	data, err := messageDecoder.DecodeAll(v, nil)
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return data, nil
}

// decodeMessage decodes a messages value.
func decodeMessage(v []byte) (*api.Message, error) {
	data, err := messageJSON(v)
	if err != nil {
		return nil, err
	}
	var m api.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// getMessage reads the message stored at seq, or an error wrapping
// ErrNotFound.
func getMessage(tx *bbolt.Tx, seq uint64) (*api.Message, error) {
	v := tx.Bucket(bucketMessages).Get(u64(seq))
	if v == nil {
		return nil, fmt.Errorf("message at seq %d: %w", seq, api.ErrNotFound)
	}
	m, err := decodeMessage(v)
	if err != nil {
		return nil, fmt.Errorf("message at seq %d: decode: %w", seq, err)
	}
	return m, nil
}

// getRecord reads the JSON record at seq in b (messages, tasks), what
// naming it in errors: one wrapping ErrNotFound when there is none, a
// decode error for a damaged one.
func getRecord[T any](b *bbolt.Bucket, seq uint64, what string) (*T, error) {
	v := b.Get(u64(seq))
	if v == nil {
		return nil, fmt.Errorf("%s at seq %d: %w", what, seq, api.ErrNotFound)
	}
	var x T
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, fmt.Errorf("%s at seq %d: decode: %w", what, seq, err)
	}
	return &x, nil
}

// putMessage stores m, which apply has given its seq, under that seq.
func putMessage(tx *bbolt.Tx, m *api.Message) {
	data, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("fsm: message %s: encode: %v", m.ID, err))
	}
	mustPut(appendBucket(tx, bucketMessages), u64(m.Seq), messageValue(data))
}

// deleteMessage removes the message stored at seq.
func deleteMessage(tx *bbolt.Tx, seq uint64) { mustDelete(tx.Bucket(bucketMessages), u64(seq)) }

// idRecord is an ids or task_ids value, seq (8) ‖ sum (32): where the id
// is stored and the SHA-256 of what was sent under it (a message's
// contentHash, a task's createSum), so a retry matches and other content
// under the same id does not.
type idRecord struct {
	seq uint64
	sum [32]byte
}

// readIDRecord reads the record of id in b (ids or task_ids); ok is false
// for an id never stored. A value of another size than 40 bytes (a
// damaged file) reads as seq 0 with a zero sum, which no retry matches.
func readIDRecord(b *bbolt.Bucket, id string) (rec idRecord, ok bool) {
	v := b.Get([]byte(id))
	if v == nil {
		return rec, false
	}
	if len(v) == 8+len(rec.sum) {
		rec.seq = binary.BigEndian.Uint64(v)
		copy(rec.sum[:], v[8:])
	}
	return rec, true
}

// writeIDRecord records in b (ids or task_ids) that id is stored at rec.seq.
func writeIDRecord(b *bbolt.Bucket, id string, rec idRecord) {
	v := make([]byte, 8, 8+len(rec.sum))
	binary.BigEndian.PutUint64(v, rec.seq)
	mustPut(b, []byte(id), append(v, rec.sum[:]...))
}

// getID reads the record of message id (readIDRecord).
func getID(tx *bbolt.Tx, id string) (idRecord, bool) { return readIDRecord(tx.Bucket(bucketIDs), id) }

// putID records that message id is stored at rec.seq.
func putID(tx *bbolt.Tx, id string, rec idRecord) { writeIDRecord(tx.Bucket(bucketIDs), id, rec) }

// messageByID reads the message with id, or an error wrapping ErrNotFound
// (never stored, or trimmed).
func messageByID(tx *bbolt.Tx, id string) (*api.Message, error) {
	rec, ok := getID(tx, id)
	if !ok {
		return nil, MessageNotFound(id)
	}
	return getMessage(tx, rec.seq)
}

// channelRecord is a channels value.
type channelRecord struct {
	count, first, last uint64
}

// channelRecordLen is the size of a channels value.
const channelRecordLen = 24

// decodeChannel reads a channels value; ok is false for a damaged one.
func decodeChannel(v []byte) (rec channelRecord, ok bool) {
	if len(v) != channelRecordLen {
		return rec, false
	}
	return channelRecord{
		count: binary.BigEndian.Uint64(v),
		first: binary.BigEndian.Uint64(v[8:]),
		last:  binary.BigEndian.Uint64(v[16:]),
	}, true
}

// getChannel reads the record of channel; ok is false for a channel with
// no message stored (or a damaged record).
func getChannel(tx *bbolt.Tx, channel string) (channelRecord, bool) {
	return decodeChannel(tx.Bucket(bucketChannels).Get([]byte(channel)))
}

// putChannel writes the record of channel.
func putChannel(tx *bbolt.Tx, channel string, rec channelRecord) {
	v := make([]byte, channelRecordLen)
	binary.BigEndian.PutUint64(v, rec.count)
	binary.BigEndian.PutUint64(v[8:], rec.first)
	binary.BigEndian.PutUint64(v[16:], rec.last)
	mustPut(tx.Bucket(bucketChannels), []byte(channel), v)
}

// deleteChannel removes the record of channel (its last message went).
func deleteChannel(tx *bbolt.Tx, channel string) {
	mustDelete(tx.Bucket(bucketChannels), []byte(channel))
}

// channelIndexKey is channel ‖ 0x00 ‖ seq; inbox and thread keys have the
// same shape.
func channelIndexKey(channel string, seq uint64) []byte {
	k := make([]byte, 0, len(channel)+9)
	k = append(k, channel...)
	k = append(k, 0)
	return append(k, u64(seq)...)
}

// seqsAfter yields, oldest first, the seqs above after that b, a bucket
// keyed name ‖ 0x00 ‖ seq (channel_index, threads, inbox), holds under
// name. It reads one key per seq yielded, plus one.
func seqsAfter(b *bbolt.Bucket, name string, after uint64) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		prefix := append([]byte(name), 0)
		c := b.Cursor()
		for k, _ := c.Seek(channelIndexKey(name, after+1)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if !yield(binary.BigEndian.Uint64(k[len(prefix):])) {
				return
			}
		}
	}
}

// removeFromChannel deletes message seq's channel index entry; the
// channel's record is the caller's (trim rewrites it once).
func removeFromChannel(tx *bbolt.Tx, channel string, seq uint64) {
	mustDelete(tx.Bucket(bucketChannelIndex), channelIndexKey(channel, seq))
}

// appendToChannel adds message seq, the newest, to channel: its index
// entry and its record (count, first, last).
func appendToChannel(tx *bbolt.Tx, channel string, seq uint64) {
	rec, ok := getChannel(tx, channel)
	if !ok {
		rec = channelRecord{first: seq}
	}
	rec.count++
	rec.last = seq
	putChannel(tx, channel, rec)
	mustPut(appendBucket(tx, bucketChannelIndex), channelIndexKey(channel, seq), nil)
}

// storeMessage writes a checked message m (seq, timestamp and recipients
// set) and the indexes every message has: its id with sum (contentHash of
// the sent form), its channel and its thread. Inboxes and receipts are
// the caller's: they depend on the rules' verdicts.
func storeMessage(tx *bbolt.Tx, m *api.Message, sum [32]byte) {
	putMessage(tx, m)
	putID(tx, m.ID, idRecord{seq: m.Seq, sum: sum})
	appendToChannel(tx, m.Channel, m.Seq)
	addToThread(tx, api.ThreadOf(m), m.Seq)
}
