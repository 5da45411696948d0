package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Advisory locks in the state file.
//
// bucketLocks holds two kinds of keys:
//
//	'p' + path                       → lockRecord JSON (the live or lapsed lease)
//	'h' + holder + 0x00 + path       → empty (holder index: a holder's locks,
//	                                   and release_holder_locks, cost their count)
//
// A path has no control characters and a holder is a ValidName, so neither
// holds the 0x00 separator.

// lockRecord is the stored form of a lease; times are entry timestamps in
// Unix nanoseconds.
type lockRecord struct {
	Holder   string `json:"holder"`
	Token    uint64 `json:"token"`
	Acquired int64  `json:"acquired"`
	Renewed  int64  `json:"renewed,omitempty"`
	Expires  int64  `json:"expires"`
	TTL      int64  `json:"ttl"`
}

// expiredAt reports whether the lease no longer covers time ts: it covers
// [Acquired, Expires).
func (r *lockRecord) expiredAt(ts int64) bool { return ts >= r.Expires }

func (r *lockRecord) view(path string, at int64) *api.Lock {
	l := &api.Lock{
		Path: path, Holder: r.Holder, Token: r.Token,
		AcquiredAt: time.Unix(0, r.Acquired).UTC(),
		ExpiresAt:  time.Unix(0, r.Expires).UTC(),
		TTL:        api.LockTTL(r.TTL),
		Expired:    r.expiredAt(at),
	}
	if r.Renewed != 0 {
		l.RenewedAt = time.Unix(0, r.Renewed).UTC()
	}
	return l
}

func lockPathKey(path string) []byte {
	return append([]byte{'p'}, path...)
}

func lockHolderKey(holder, path string) []byte {
	k := make([]byte, 0, len(holder)+len(path)+2)
	k = append(append(append(k, 'h'), holder...), 0)
	return append(k, path...)
}

// getLock reads the lease of path; ok is false when there is none.
func getLock(b *bbolt.Bucket, path string) (rec lockRecord, ok bool, err error) {
	v := b.Get(lockPathKey(path))
	if v == nil {
		return rec, false, nil
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, false, fmt.Errorf("lock %q: decode: %w", path, err)
	}
	return rec, true, nil
}

func putLock(b *bbolt.Bucket, op, path string, rec *lockRecord) {
	data, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("fsm: apply %s: encode: %v", op, err))
	}
	if err := b.Put(lockPathKey(path), data); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: put: %v", op, err))
	}
	if err := b.Put(lockHolderKey(rec.Holder, path), nil); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: put holder index: %v", op, err))
	}
}

func deleteLock(b *bbolt.Bucket, op, path, holder string) {
	if err := b.Delete(lockPathKey(path)); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: delete: %v", op, err))
	}
	if err := b.Delete(lockHolderKey(holder, path)); err != nil {
		panic(fmt.Sprintf("fsm: apply %s: delete holder index: %v", op, err))
	}
}
