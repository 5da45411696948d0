package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Delivery receipts, one per (message, recipient).
//
// bucketReceipts: message seq (8 bytes BE) ‖ agent id → receiptRec JSON
// {"d": delivered ts, "r": read ts, "a": answered ts, "reply": reply id,
// "blocked": reason, and what the recipient's watcher reported
// (receipt_state.go): "q": queued ts, "t": typed (delivered to the agent)
// ts, "i": interrupted ts}; times are entry times (Unix ns), 0 (left out) when
// not reached. A receipt is written for every resolved recipient when the
// message is stored: delivered, or blocked by the rules. All receipts of a
// message share its seq as prefix, so a trim deletes them with one range.

type receiptRec struct {
	DeliveredAt int64  `json:"d,omitempty"`
	ReadAt      int64  `json:"r,omitempty"`
	AnsweredAt  int64  `json:"a,omitempty"`
	ReplyID     string `json:"reply,omitempty"`
	Blocked     string `json:"blocked,omitempty"`
	// Reported by the recipient's watcher (OpReceiptState).
	QueuedAt      int64 `json:"q,omitempty"`
	TypedAt       int64 `json:"t,omitempty"`
	InterruptedAt int64 `json:"i,omitempty"`
}

func receiptKey(seq uint64, agent string) []byte {
	return append(u64(seq), agent...)
}

func putReceipt(tx *bbolt.Tx, seq uint64, agent string, r receiptRec) {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("fsm: receipt: encode: %v", err))
	}
	mustPut(appendBucket(tx, bucketReceipts), receiptKey(seq, agent), data)
}

// deleteReceipts deletes every receipt of the message at seq.
func deleteReceipts(tx *bbolt.Tx, seq uint64) {
	receipts := tx.Bucket(bucketReceipts)
	prefix := u64(seq)
	// Collect first: the cursor must not walk keys being deleted.
	var keys [][]byte
	c := receipts.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		mustDelete(receipts, k)
	}
}

// updateReceipt applies fn to the receipt of (seq, agent), if there is one.
func updateReceipt(tx *bbolt.Tx, seq uint64, agent string, fn func(*receiptRec)) {
	v := tx.Bucket(bucketReceipts).Get(receiptKey(seq, agent))
	if v == nil {
		return
	}
	var r receiptRec
	if err := json.Unmarshal(v, &r); err != nil {
		panic(fmt.Sprintf("fsm: receipt %d/%s: decode: %v", seq, agent, err))
	}
	fn(&r)
	putReceipt(tx, seq, agent, r)
}

// recordAnswer marks the receipt of m's parent for m's sender answered by
// m, at ts, unless it was answered before or the sender was not one of the
// parent's recipients.
func recordAnswer(tx *bbolt.Tx, m *api.Message, ts int64) {
	if m.InReplyTo == "" {
		return
	}
	parent, ok := getID(tx, m.InReplyTo)
	if !ok {
		return
	}
	updateReceipt(tx, parent.seq, m.From, func(r *receiptRec) {
		if r.AnsweredAt == 0 && r.Blocked == "" {
			r.AnsweredAt, r.ReplyID = ts, m.ID
		}
	})
}

// blockedOf lists the blocked recipients of the message at seq, from its
// receipts (so a retried send answers the same list).
func blockedOf(tx *bbolt.Tx, seq uint64) []api.BlockedRecipient {
	var out []api.BlockedRecipient
	prefix := u64(seq)
	c := tx.Bucket(bucketReceipts).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r receiptRec
		if json.Unmarshal(v, &r) == nil && r.Blocked != "" {
			out = append(out, api.BlockedRecipient{ID: string(k[8:]), Reason: r.Blocked})
		}
	}
	return out
}
