package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func applyMarkRead(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.MarkReadCommand
	if err := decodeCommand(api.OpMarkRead, body, &cmd); err != nil {
		return nil, err
	}
	if err := inboxExists(tx, cmd.Agent); err != nil {
		return nil, fmt.Errorf("fsm: apply mark_read: %w", err)
	}
	marked := 0
	if cmd.ID != "" {
		// One answer for an unknown id and for one in another inbox: the
		// second must not tell an agent that a private message exists.
		rec, ok := getID(tx, cmd.ID)
		if ok {
			_, ok = getInboxEntry(tx, cmd.Agent, rec.seq)
		}
		if !ok {
			return nil, fmt.Errorf("fsm: apply mark_read: %w", notFound("message %s is not in %s's inbox", cmd.ID, cmd.Agent))
		}
		if markRead(tx, cmd.Agent, rec.seq, ts) {
			marked++
		}
	} else {
		// Collect first: the cursor must not walk keys being deleted.
		var seqs []uint64
		for seq := range seqsAfter(tx.Bucket(bucketInboxUnread), cmd.Agent, 0) {
			if seq > cmd.Upto {
				break
			}
			seqs = append(seqs, seq)
		}
		for _, seq := range seqs {
			if markRead(tx, cmd.Agent, seq, ts) {
				marked++
			}
		}
		raiseReadMark(tx, cmd.Agent, cmd.Upto)
	}
	return &api.MarkReadResult{Agent: cmd.Agent, Marked: marked, Counts: readCounts(tx, cmd.Agent)}, nil
}
