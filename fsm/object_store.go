package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// Tasks and approvals keep their events alike (task_store.go,
// approval_store.go): a history bucket, object seq (8) ‖ entry index (8)
// → the event, and an events bucket, entry index (8) ‖ object seq (8) →
// the object as the entry left it. These are the one copy of the
// accessors over such a pair and of the pages read from their indexes;
// what names the object ("task", "approval") in errors and panics.

// objectByID reads the object id names in the ids bucket (readIDRecord)
// with get, or the *NotFoundError notFound makes for id.
func objectByID[T any](tx *bbolt.Tx, ids []byte, id string, get func(*bbolt.Tx, uint64) (T, error), notFound func(string) error) (T, error) {
	rec, ok := readIDRecord(tx.Bucket(ids), id)
	if !ok {
		var zero T
		return zero, notFound(id)
	}
	return get(tx, rec.seq)
}

// commandSum is the SHA-256 of command c (a cmd, such as "create") of
// object who as applied, so a retry of the same command matches and
// another under the same id does not.
func commandSum(c any, who, cmd string) [32]byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("fsm: %s: encode the %s: %v", who, cmd, err))
	}
	return sha256.Sum256(b)
}

// putObjectEvent writes event ev of object seq (id) at entry index in
// the history bucket hist, and snap, the object as the entry left it, in
// the events bucket events. Encoding cannot fail for these types: a
// failure panics, as every apply does on a broken invariant.
func putObjectEvent(tx *bbolt.Tx, hist, events []byte, what, id string, seq, index uint64, ev, snap any) {
	evData, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("fsm: %s %s: encode event: %v", what, id, err))
	}
	mustPut(tx.Bucket(hist), taskPairKey(0, seq, index), evData)
	snapData, err := json.Marshal(snap)
	if err != nil {
		panic(fmt.Sprintf("fsm: %s %s: encode: %v", what, id, err))
	}
	mustPut(tx.Bucket(events), taskPairKey(0, index, seq), snapData)
}

// objectHistory reads the events E of object seq in the history bucket
// hist, oldest first (never nil); an event that does not decode is an
// error naming the object's seq and the event's index.
func objectHistory[E any](tx *bbolt.Tx, hist []byte, what string, seq uint64) ([]E, error) {
	out := []E{}
	prefix := u64(seq)
	c := tx.Bucket(hist).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var ev E
		if err := json.Unmarshal(v, &ev); err != nil {
			return nil, fmt.Errorf("%s at seq %d: event %d: decode: %w", what, seq, binary.BigEndian.Uint64(k[8:]), err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// objectEventAt reads the event E of object seq at entry index in the
// history bucket hist; a missing or undecodable one is an error.
func objectEventAt[E any](tx *bbolt.Tx, hist []byte, what string, seq, index uint64) (E, error) {
	var ev E
	v := tx.Bucket(hist).Get(taskPairKey(0, seq, index))
	if v == nil {
		return ev, fmt.Errorf("%s at seq %d: no event at index %d", what, seq, index)
	}
	if err := json.Unmarshal(v, &ev); err != nil {
		return ev, fmt.Errorf("%s at seq %d: event %d: decode: %w", what, seq, index, err)
	}
	return ev, nil
}

// objectEvents reads the page of updates U of the entries after index
// after in the events bucket events, oldest first, each built from the
// object's seq, the entry's index and the stored snapshot. A page holds
// whole entries only: it ends at the first entry boundary where it holds
// limit updates or more (pageLimit), so resuming after its last entry
// loses nothing. It returns the updates (never nil), whether entries
// after them made updates, and build's first error as it is.
func objectEvents[U any](tx *bbolt.Tx, events []byte, after uint64, limit int,
	build func(seq, index uint64, snap []byte) (U, error)) ([]U, bool, error) {
	limit = pageLimit(limit)
	out := []U{}
	c := tx.Bucket(events).Cursor()
	var at uint64
	for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
		index, seq := binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])
		if index != at && len(out) >= limit {
			return out, true, nil
		}
		at = index
		u, err := build(seq, index, v)
		if err != nil {
			return out, false, err
		}
		out = append(out, u)
	}
	return out, false, nil
}

// seqPage reads the objects get returns for the seqs next yields, in its
// order, keeps those match accepts, up to limit (pageLimit): the page
// (never nil), whether a matching object follows it, and get's first
// error as it is.
func seqPage[T any](next func() (uint64, bool), limit int, get func(seq uint64) (T, error), match func(T) bool) ([]T, bool, error) {
	limit = pageLimit(limit)
	out := []T{}
	for seq, ok := next(); ok; seq, ok = next() {
		v, err := get(seq)
		if err != nil {
			return out, false, err
		}
		if !match(v) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, v)
	}
	return out, false, nil
}

// pairSeqsUpTo lists the seqs of the keys kind ‖ at (8, Unix ns) ‖ seq
// (8) in the index bucket b whose at is ts or before, earliest first: the
// leases and deadlines a tick acts on.
func pairSeqsUpTo(b *bbolt.Bucket, kind byte, ts int64) []uint64 {
	var out []uint64
	c := b.Cursor()
	for k, _ := c.Seek([]byte{kind}); k != nil && k[0] == kind; k, _ = c.Next() {
		if int64(binary.BigEndian.Uint64(k[1:])) > ts {
			break
		}
		out = append(out, binary.BigEndian.Uint64(k[9:]))
	}
	return out
}

// firstPairAt is the earliest at of the keys kind ‖ at (8, Unix ns) ‖
// seq (8) in the index bucket b; false when there is none.
func firstPairAt(b *bbolt.Bucket, kind byte) (int64, bool) {
	k, _ := b.Cursor().Seek([]byte{kind})
	if k == nil || k[0] != kind {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[1:])), true
}
