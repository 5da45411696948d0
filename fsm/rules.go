package fsm

// Communication rules in the state machine: the set_rules command, its
// apply, the stored document and its compiled form. What the document
// says and how a pair is decided is package rules'.
//
// The document is replicated like everything else: set_rules replaces it
// (or removes it) through the log, and apply checks every resolved
// recipient of a send against the document stored at that point of the
// log, so every node refuses the same sends.

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/rules"
)

// rulesCache holds the compiled form of the document this FSM last read,
// by the SHA-256 of its stored bytes, so a send compiles the document once,
// not once per send. A compiled document depends only on those bytes, so a
// hit is the value a fresh compile would give, on every node, and a state
// file swapped by Restore needs no invalidation. It belongs to one FSM
// (another in the process has its own), and one entry is enough: a state
// holds one document at a time (a read of an older transaction than the
// last set_rules compiles again).
type rulesCache struct {
	last atomic.Pointer[cachedRules]
}

type cachedRules struct {
	sum      [32]byte
	compiled *rules.Compiled // immutable, shared between goroutines
}

// load returns the compiled rules of the document stored in tx; nil
// means no document, and everyone may message everyone. An error means
// the stored document does not decode or compile (a damaged state file:
// it was valid when set).
func (c *rulesCache) load(tx *bbolt.Tx) (*rules.Compiled, error) {
	data, sum := rulesBucketOf(tx).document()
	if data == nil {
		return nil, nil
	}
	if e := c.last.Load(); e != nil && e.sum == sum {
		return e.compiled, nil
	}
	var d rules.Document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("fsm: rules: decode the stored document: %w", err)
	}
	r, err := rules.Compile(&d)
	if err != nil {
		return nil, fmt.Errorf("fsm: rules: the stored document: %w", err)
	}
	c.put(sum, r)
	return r, nil
}

func (c *rulesCache) put(sum [32]byte, r *rules.Compiled) {
	c.last.Store(&cachedRules{sum: sum, compiled: r})
}
