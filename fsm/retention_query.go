package fsm

import (
	"sort"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
