package fsm

import (
	"encoding/json"
	"time"

	"go.etcd.io/bbolt"
)

// NextDeadline is when the next tick has work: the earliest lease end
// of a running task or deadline of a pending approval, or, when a message
// is queued, the time of the entry that queued it (due at once). ok is
// false when there is none (or the state is closed). The leader proposes
// OpTick once this is at or before its clock. It reads three keys.
func (f *FSM) NextDeadline() (deadline time.Time, ok bool) {
	_ = f.view(func(tx *bbolt.Tx) error {
		deadline, ok = nextDue(tx)
		return nil
	})
	return deadline, ok
}

// nextDue is the earliest time a tick has work: the first lease end, the
// first approval deadline, or the time of the oldest queued message,
// whichever is earliest.
func nextDue(tx *bbolt.Tx) (time.Time, bool) {
	due, found := firstPairAt(tx.Bucket(bucketTaskIndex), tidxLease)
	if d, ok := firstApprovalDeadline(tx); ok && (!found || d < due) {
		due, found = d, true
	}
	if _, v := tx.Bucket(bucketOutbox).Cursor().First(); v != nil {
		var q queuedMessage
		if json.Unmarshal(v, &q) != nil || !found || q.At < due {
			// A damaged entry is due at once: the next tick removes it.
			due, found = q.At, true
		}
	}
	if !found {
		return time.Time{}, false
	}
	return time.Unix(0, due).UTC(), true
}
