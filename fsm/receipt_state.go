package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyReceiptState applies OpReceiptState: an error wrapping ErrNotFound
// when the message is not stored or Agent is not among its recipients (one
// answer for both, as mark_read gives), ErrConflict when the rules blocked
// it for Agent; otherwise the receipt after the report.
func applyReceiptState(tx *bbolt.Tx, _ uint64, ts int64, body []byte) (any, error) {
	var cmd api.ReceiptStateCommand
	if err := decodeCommand(api.OpReceiptState, body, &cmd); err != nil {
		return nil, err
	}
	if err := cmd.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: apply receipt_state: %w", err)
	}
	rec, ok := getID(tx, cmd.ID)
	var v []byte
	if ok {
		v = tx.Bucket(bucketReceipts).Get(receiptKey(rec.seq, cmd.Agent))
	}
	if v == nil {
		return nil, fmt.Errorf("fsm: apply receipt_state: %w", notFound("message %s is not in %s's inbox", cmd.ID, cmd.Agent))
	}
	var r receiptRec
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("fsm: apply receipt_state: receipt %d/%s: %w", rec.seq, cmd.Agent, err)
	}
	if r.Blocked != "" {
		return nil, fmt.Errorf("fsm: apply receipt_state: %w", conflict("message %s was blocked for %s (%s): nothing to deliver", cmd.ID, cmd.Agent, r.Blocked))
	}
	changed := r.advance(cmd.State, ts)
	if changed {
		putReceipt(tx, rec.seq, cmd.Agent, r)
	}
	out := r.public(cmd.Agent)
	return &out, nil
}

// advance records state at ts where it moves the receipt forward and
// reports whether it did.
func (r *receiptRec) advance(state string, ts int64) bool {
	switch state {
	case api.ReceiptQueued:
		if r.QueuedAt != 0 || r.TypedAt != 0 {
			return false
		}
		r.QueuedAt = ts
	case api.ReceiptDelivered:
		if r.TypedAt != 0 {
			return false
		}
		r.TypedAt = ts
	case api.ReceiptInterrupted:
		if r.TypedAt != 0 {
			return false
		}
		r.InterruptedAt, r.TypedAt = ts, ts
	}
	return true
}
