package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Locks returns a page of locks in path order. It reads Limit+1 keys of
// the path (or, with Holder, the holder) index, whatever the number of
// locks.
func (f *FSM) Locks(q api.LockQuery) (api.LockPage, error) {
	limit := pageLimit(q.Limit)
	page := api.LockPage{Locks: []api.Lock{}}
	if q.Holder != "" && !api.ValidName(q.Holder) {
		return page, fmt.Errorf("fsm: locks: %w", api.NameError("holder", q.Holder))
	}
	var prefix []byte
	if q.Holder != "" {
		prefix = lockHolderKey(q.Holder, "")
	} else {
		prefix = []byte{'p'}
	}
	start := q.Prefix
	if q.After >= start {
		start = q.After
	}
	err := f.view(func(tx *bbolt.Tx) error {
		at := lastTS(tx)
		page.AsOf = time.Unix(0, at).UTC()
		b := tx.Bucket(bucketLocks)
		c := b.Cursor()
		for k, v := c.Seek(append(bytes.Clone(prefix), start...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			path := string(k[len(prefix):])
			if q.After != "" && path == q.After {
				continue
			}
			if !strings.HasPrefix(path, q.Prefix) {
				return nil
			}
			if len(page.Locks) == limit {
				page.HasMore = true
				return nil
			}
			if q.Holder != "" {
				v = b.Get(lockPathKey(path))
			}
			var rec lockRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("fsm: lock %q: decode: %w", path, err)
			}
			page.Locks = append(page.Locks, *rec.view(path, at))
		}
		return nil
	})
	return page, err
}

// CheckLock reports whether token is the current, unexpired grant of path.
// An unknown path is not an error: the answer is simply "not current".
func (f *FSM) CheckLock(path string, token uint64) (api.LockCheck, error) {
	out := api.LockCheck{Path: path}
	err := f.view(func(tx *bbolt.Tx) error {
		at := lastTS(tx)
		out.AsOf = time.Unix(0, at).UTC()
		rec, ok, err := getLock(tx.Bucket(bucketLocks), path)
		if err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		if !ok {
			out.Reason = "no lock on this path"
			return nil
		}
		out.Holder, out.Token, out.ExpiresAt, out.Expired = rec.Holder, rec.Token, time.Unix(0, rec.Expires).UTC(), rec.expiredAt(at)
		switch {
		case rec.Token != token:
			out.Reason = fmt.Sprintf("token %d is not the current grant (%d, held by %s)", token, rec.Token, rec.Holder)
		case out.Expired:
			out.Reason = fmt.Sprintf("the lease expired at %s", lockTime(rec.Expires))
		default:
			out.Current = true
		}
		return nil
	})
	return out, err
}
