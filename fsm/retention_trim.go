package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// MaxTrimPerEntry bounds the messages one trim entry removes, so one apply
// batch stays small; TrimResult.More says another trim is due.
const MaxTrimPerEntry = 10000

func applyTrim(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.TrimCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply trim: decode: %w", err)
	}
	if !api.ValidName(cmd.Channel) {
		return nil, fmt.Errorf("fsm: apply trim: %w", api.NameError("channel", cmd.Channel))
	}
	r, ok := loadRetention(tx, cmd.Channel)
	if !ok {
		return nil, fmt.Errorf("fsm: apply trim: %w", notFound("channel %s has no retention policy", cmd.Channel))
	}
	return trim(tx, index, ts, r), nil
}

// trim removes the channel's oldest messages that the policy no longer
// keeps as of ts: beyond MaxMessages, or older than ts-MaxAge. It walks the
// channel index from the oldest message and stops at the first one kept,
// so it reads what it removes plus one. Each removed message loses its
// message record, channel-index entry, inbox, unread, receipt and thread
// entries; its id stays reserved (see applySend), and the audit trail keeps
// its line. The artifacts it names lose its reference (unrefArtifacts).
func trim(tx *bbolt.Tx, index uint64, ts int64, r api.Retention) *api.TrimResult {
	res := &api.TrimResult{Channel: r.Channel}
	ch, ok := getChannel(tx, r.Channel)
	if !ok || (r.MaxAge == 0 && r.MaxMessages == 0) {
		res.Retention = r
		return res
	}
	count := ch.count
	cutoff := ts - int64(r.MaxAge)
	// Collect first: the cursor must not walk keys being deleted.
	var drop []uint64
	var newFirst uint64
	for seq := range seqsAfter(tx.Bucket(bucketChannelIndex), r.Channel, 0) {
		remaining := count - uint64(len(drop))
		overCount := r.MaxMessages > 0 && remaining > r.MaxMessages
		tooOld := false
		if r.MaxAge > 0 && !overCount {
			m, err := getMessage(tx, seq)
			tooOld = err == nil && m.Timestamp.UnixNano() < cutoff
		}
		if !overCount && !tooOld {
			newFirst = seq
			break
		}
		if len(drop) == MaxTrimPerEntry {
			res.More = true
			newFirst = seq
			break
		}
		drop = append(drop, seq)
	}
	for _, seq := range drop {
		if m, err := getMessage(tx, seq); err == nil {
			dropMessageIndexes(tx, m)
			unrefArtifacts(tx, m)
		}
		deleteMessage(tx, seq)
		removeFromChannel(tx, r.Channel, seq)
		res.UpToSeq = seq
	}
	res.Trimmed = len(drop)
	if res.Trimmed > 0 {
		if left := count - uint64(len(drop)); left == 0 {
			deleteChannel(tx, r.Channel)
		} else {
			putChannel(tx, r.Channel, channelRecord{count: left, first: newFirst, last: ch.last})
		}
		r.Trimmed += uint64(res.Trimmed)
		r.LastTrimSeq = res.UpToSeq
		putRetention(tx, r)
		audit(tx, index, ts, api.AuditEvent{Kind: AuditTrim, Label: "TRIM",
			Text: fmt.Sprintf("channel %s: %d messages up to seq %d", r.Channel, res.Trimmed, res.UpToSeq)})
	}
	res.Retention = r
	return res
}
