package fsm

import (
	"crypto/sha256"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// rulesBucket is the rules bucket of one transaction:
//
//	"document" → the document's JSON (absent: no rules)
//	"sum"      → its SHA-256 (absent with the document)
//	"index"    → u64 Raft index of the last set_rules (kept after a removal)
//	"ts"       → u64 Unix ns of the last set_rules (kept after a removal)
//
// A failed write panics, as every write of an apply does: the batch's
// transaction cannot go on without it.
type rulesBucket struct{ b *bbolt.Bucket }

var (
	keyRulesDoc   = []byte("document")
	keyRulesSum   = []byte("sum")
	keyRulesIndex = []byte("index")
	keyRulesTS    = []byte("ts")
)

func rulesBucketOf(tx *bbolt.Tx) rulesBucket { return rulesBucket{tx.Bucket(bucketRules)} }

// document returns the stored JSON (nil: no document), valid for the
// transaction only, and its SHA-256.
func (rb rulesBucket) document() (data []byte, sum [32]byte) {
	data = rb.b.Get(keyRulesDoc)
	if data == nil {
		return nil, sum
	}
	if s := rb.b.Get(keyRulesSum); len(s) == len(sum) {
		copy(sum[:], s)
	} else {
		sum = sha256.Sum256(data)
	}
	return data, sum
}

// put stores data as the document and returns its SHA-256.
func (rb rulesBucket) put(data []byte) [32]byte {
	sum := sha256.Sum256(data)
	rb.must(rb.b.Put(keyRulesDoc, data), keyRulesDoc)
	rb.must(rb.b.Put(keyRulesSum, sum[:]), keyRulesSum)
	return sum
}

// remove deletes the document: no rules.
func (rb rulesBucket) remove() {
	rb.must(rb.b.Delete(keyRulesDoc), keyRulesDoc)
	rb.must(rb.b.Delete(keyRulesSum), keyRulesSum)
}

// stamp records the index and time of a set_rules.
func (rb rulesBucket) stamp(index uint64, ts int64) {
	rb.must(rb.b.Put(keyRulesIndex, u64(index)), keyRulesIndex)
	rb.must(rb.b.Put(keyRulesTS, u64(uint64(ts))), keyRulesTS)
}

// changed is the index and time of the last set_rules (0 and the zero
// time if there was none).
func (rb rulesBucket) changed() (uint64, time.Time) {
	index := getU64(rb.b, keyRulesIndex)
	if index == 0 {
		return 0, time.Time{}
	}
	return index, time.Unix(0, int64(getU64(rb.b, keyRulesTS))).UTC()
}

func (rb rulesBucket) must(err error, key []byte) {
	if err != nil {
		panic(fmt.Sprintf("fsm: apply set_rules: write %s: %v", key, err))
	}
}
