package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Receipts returns the receipts of the message id (one per resolved
// recipient), or an error wrapping ErrNotFound. A receipt that would read
// delivered (in the inbox, nothing reported) for a name no agent answers
// to reads no_such_agent.
func (f *FSM) Receipts(id string) (api.Receipts, error) {
	out := api.Receipts{ID: id, Receipts: []api.Receipt{}}
	err := f.view(func(tx *bbolt.Tx) error {
		rec, ok := getID(tx, id)
		if !ok {
			return MessageNotFound(id)
		}
		out.Seq = rec.seq
		m, err := getMessage(tx, out.Seq)
		if err != nil {
			return fmt.Errorf("fsm: receipts of %s: %w", id, err)
		}
		out.From = m.From
		book := agentBook{tx: tx}
		prefix := u64(out.Seq)
		c := tx.Bucket(bucketReceipts).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r receiptRec
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("fsm: receipts of %s: %s: %w", id, k[8:], err)
			}
			p := r.public(string(k[8:]))
			if p.State == api.ReceiptDelivered && r.TypedAt == 0 && !book.known(p.Agent) {
				p.State = api.ReceiptNoSuchAgent
			}
			out.Receipts = append(out.Receipts, p)
		}
		return nil
	})
	return out, err
}

func (r receiptRec) public(agent string) api.Receipt {
	p := api.Receipt{Agent: agent, DeliveredAt: entryTime(r.DeliveredAt), ReadAt: entryTime(r.ReadAt),
		AnsweredAt: entryTime(r.AnsweredAt), ReplyID: r.ReplyID, Blocked: r.Blocked,
		QueuedAt: entryTime(r.QueuedAt), TypedAt: entryTime(r.TypedAt), InterruptedAt: entryTime(r.InterruptedAt)}
	switch {
	case r.Blocked != "":
		p.State = api.ReceiptBlocked
	case r.AnsweredAt != 0:
		p.State = api.ReceiptAnswered
	case r.ReadAt != 0:
		p.State = api.ReceiptRead
	case r.InterruptedAt != 0:
		p.State = api.ReceiptInterrupted
	case r.TypedAt != 0:
		p.State = api.ReceiptDelivered
	case r.QueuedAt != 0:
		p.State = api.ReceiptQueued
	default:
		p.State = api.ReceiptDelivered
	}
	return p
}
