package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The outbox: messages SystemSender (or, for an approval a task opened, an
// agent) sends about objects other than an entry's own message, stored by
// the ticks that follow, one each, oldest first. One entry stores one
// message (a message's seq is its entry's index), so a cascade's replies,
// a timeout's incident, an approval's expiry and escalation notices wait
// here; NextDeadline counts a queued message as due at once.
//
//	task_outbox: entry index (8) ‖ n (4) → queuedMessage JSON
//
// The bucket kept the name it had when only tasks queued messages: state
// files and snapshots already hold it.

// queuedMessage is an outbox value: a message SystemSender will send, and
// the time of the entry that queued it (when it became due).
type queuedMessage struct {
	At      int64       `json:"at"`
	Message api.Message `json:"message"`
}

// queue appends m to the outbox as the n-th message queued by entry index
// at ts.
func queue(tx *bbolt.Tx, index uint64, n uint32, ts int64, m *api.Message) {
	data, err := json.Marshal(queuedMessage{At: ts, Message: *m})
	if err != nil {
		panic(fmt.Sprintf("fsm: queue message %s: encode: %v", m.ID, err))
	}
	k := binary.BigEndian.AppendUint32(u64(index), n)
	mustPut(tx.Bucket(bucketOutbox), k, data)
}

// dequeue removes and returns the oldest queued message; ok is false when
// the outbox is empty. A value that does not decode is removed and
// returned as err, so one damaged entry cannot block the rest.
func dequeue(tx *bbolt.Tx) (q queuedMessage, ok bool, err error) {
	b := tx.Bucket(bucketOutbox)
	k, v := b.Cursor().First()
	if k == nil {
		return q, false, nil
	}
	err = json.Unmarshal(v, &q)
	mustDelete(b, bytes.Clone(k))
	if err != nil {
		return q, true, fmt.Errorf("queued message %x: decode: %w", k, err)
	}
	return q, true, nil
}

// deliverQueued stores the oldest queued message, if any, in entry index
// at ts, and returns its id ("" when the outbox is empty). A message that
// cannot be stored (it does not decode; its id was taken by a client's
// message with other content) is dropped with an UNDELIVERED audit line,
// so it cannot block the ones behind it; the tick goes on either way.
func (f *FSM) deliverQueued(tx *bbolt.Tx, index uint64, ts int64) string {
	q, ok, err := dequeue(tx)
	if !ok {
		return ""
	}
	if err == nil {
		var res *SendResult
		if res, err = f.send(tx, index, ts, &api.SendCommand{Message: q.Message}, true); err == nil {
			return res.ID
		}
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditOther, From: api.SystemSender, To: q.Message.To, Label: "UNDELIVERED",
		Text: api.FirstLine(fmt.Sprintf("%s %s: %v", q.Message.Type, q.Message.ID, err), 300), MessageID: q.Message.ID})
	return ""
}
