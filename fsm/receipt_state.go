package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// OpReceiptState records what a recipient's watcher did with a message in
// its inbox (body: ReceiptStateCommand): holding it for an agent that is
// busy (queued), typing it into the agent's pane or handing it to the CLI
// (delivered), or typing it after interrupting the agent (interrupted).
const OpReceiptState Op = "receipt_state"

// The states a watcher reports (ReceiptStateCommand.State). delivered is
// ReceiptDelivered: once a watcher reported queued, the receipt says
// delivered only when the watcher says so.
const (
	ReceiptQueued      = "queued"      // held by the watcher until the agent is idle
	ReceiptInterrupted = "interrupted" // typed after the agent was interrupted
)

// ReceiptStateCommand reports State (queued, delivered or interrupted) of
// message ID for recipient Agent. The receipt only moves forward: queued
// or interrupted after a delivery changes nothing, a second delivered keeps
// the first time, and read and answered are never touched (a report is
// kept beside them).
type ReceiptStateCommand struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	State string `json:"state"`
}

// Validate checks the id, the agent id and the state.
func (c *ReceiptStateCommand) Validate() error {
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "must be a message id matching %s", idRE)
	}
	if !ValidName(c.Agent) {
		return NameError("agent", c.Agent)
	}
	switch c.State {
	case ReceiptQueued, ReceiptDelivered, ReceiptInterrupted:
		return nil
	}
	return FieldErrorf("state", "%q: want %s, %s or %s", c.State, ReceiptQueued, ReceiptDelivered, ReceiptInterrupted)
}

// applyReceiptState applies OpReceiptState: an error wrapping ErrNotFound
// when the message is not stored or Agent is not among its recipients (one
// answer for both, as mark_read gives), ErrConflict when the rules blocked
// it for Agent; otherwise the receipt after the report.
func applyReceiptState(tx *bbolt.Tx, _ uint64, ts int64, body []byte) (any, error) {
	var cmd ReceiptStateCommand
	if err := decodeCommand(OpReceiptState, body, &cmd); err != nil {
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
	case ReceiptQueued:
		if r.QueuedAt != 0 || r.TypedAt != 0 {
			return false
		}
		r.QueuedAt = ts
	case ReceiptDelivered:
		if r.TypedAt != 0 {
			return false
		}
		r.TypedAt = ts
	case ReceiptInterrupted:
		if r.TypedAt != 0 {
			return false
		}
		r.InterruptedAt, r.TypedAt = ts, ts
	}
	return true
}
