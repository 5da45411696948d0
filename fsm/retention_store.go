package fsm

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketRetention: channel → Retention JSON: the channel's policy and what
// it has trimmed so far.

// MaxTrimPerEntry bounds the messages one trim entry removes, so one apply
// batch stays small; TrimResult.More says another trim is due.
const MaxTrimPerEntry = 10000

func loadRetention(tx *bbolt.Tx, channel string) (api.Retention, bool) {
	v := tx.Bucket(bucketRetention).Get([]byte(channel))
	if v == nil {
		return api.Retention{Channel: channel}, false
	}
	var r api.Retention
	if json.Unmarshal(v, &r) != nil {
		return api.Retention{Channel: channel}, false
	}
	return r, true
}

func putRetention(tx *bbolt.Tx, r api.Retention) {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("fsm: retention: encode: %v", err))
	}
	if err := tx.Bucket(bucketRetention).Put([]byte(r.Channel), data); err != nil {
		panic(fmt.Sprintf("fsm: retention: put: %v", err))
	}
}

func applySetRetention(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.SetRetentionCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply set_retention: decode: %w", err)
	}
	age, err := cmd.Validate()
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_retention: %w", err)
	}
	r, _ := loadRetention(tx, cmd.Channel)
	r.MaxAge, r.MaxMessages = age, cmd.MaxMessages
	putRetention(tx, r)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditTrim, Label: "RETENTION",
		Text: fmt.Sprintf("channel %s: max_age=%v max_messages=%d", cmd.Channel, age, cmd.MaxMessages)})
	return trim(tx, index, ts, r), nil
}

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

// Retentions lists every channel policy, by channel.
func (f *FSM) Retentions() ([]api.Retention, error) {
	var out []api.Retention
	err := f.view(func(tx *bbolt.Tx) (err error) {
		out, err = decodeAll[api.Retention](tx.Bucket(bucketRetention), "retention of channel")
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Channel < out[j].Channel })
	return out, err
}

// RetentionOf returns one channel's policy, or an error wrapping
// ErrNotFound.
func (f *FSM) RetentionOf(channel string) (api.Retention, error) {
	var r api.Retention
	err := f.view(func(tx *bbolt.Tx) error {
		var ok bool
		if r, ok = loadRetention(tx, channel); !ok {
			return notFound("channel %s has no retention policy", channel)
		}
		return nil
	})
	return r, err
}

// TrimDue reports whether trimming channel as of now would remove
// anything. It is the leader's hint for proposing a trim only when one is
// due (now is the leader's clock); the trim entry itself decides what goes
// from its own timestamp.
func (f *FSM) TrimDue(channel string, now time.Time) (bool, error) {
	due := false
	err := f.view(func(tx *bbolt.Tx) error {
		r, ok := loadRetention(tx, channel)
		ch, hasMessages := getChannel(tx, channel)
		if !ok || !hasMessages {
			return nil
		}
		if r.MaxMessages > 0 && ch.count > r.MaxMessages {
			due = true
			return nil
		}
		if r.MaxAge > 0 {
			first, err := getMessage(tx, ch.first)
			due = err == nil && first.Timestamp.Before(now.Add(-r.MaxAge))
		}
		return nil
	})
	return due, err
}
