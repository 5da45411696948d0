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
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// --- storage ---

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

// --- the command ---

func (f *FSM) applySetRules(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.SetRulesCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: decode: %w", err)
	}
	r, data, err := cmd.Prepare()
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: %w", err)
	}
	rb := rulesBucketOf(tx)
	text := "removed: everyone may message everyone"
	if cmd.Clear {
		rb.remove()
	} else {
		f.rules.put(rb.put(data), r)
		text = "replaced: " + cmd.Rules.Summary()
	}
	rb.stamp(index, ts)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditRules, Label: "RULES", Text: text})
	st, err := f.readRulesState(tx)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: %w", err)
	}
	return &st, nil
}

// --- the queries ---

func (f *FSM) readRulesState(tx *bbolt.Tx) (api.RulesState, error) {
	r, err := f.rules.load(tx)
	if err != nil {
		return api.RulesState{}, err
	}
	st := api.RulesState{Rules: r.Document(), Default: r.Document().EffectiveDefault()}
	st.Index, st.UpdatedAt = rulesBucketOf(tx).changed()
	return st, nil
}

// Rules returns the rules document and when it was last set.
func (f *FSM) Rules() (api.RulesState, error) {
	var st api.RulesState
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		st, err = f.readRulesState(tx)
		return err
	})
	return st, err
}

// CheckRules answers whether a message from from to to would pass the
// rules now, with the roles a send would use: the registered role of each;
// for an unregistered sender DefaultRole (a send registers it so), for
// an unregistered recipient none. fromRole or toRole, when not "", replace
// the looked-up role ("what if" questions).
func (f *FSM) CheckRules(from, fromRole, to, toRole string) (api.RulesCheck, error) {
	out := api.RulesCheck{From: from, To: to}
	err := f.view(func(tx *bbolt.Tx) error {
		r, err := f.rules.load(tx)
		if err != nil {
			return err
		}
		out.FromRole, out.ToRole = fromRole, toRole
		if out.FromRole == "" {
			var ok bool
			if out.FromRole, ok = rulesAgentRole(tx, from); !ok {
				out.FromRole = api.DefaultRole
			}
		}
		if out.ToRole == "" {
			out.ToRole, _ = rulesAgentRole(tx, to)
		}
		out.Allowed, out.Reason = r.Allows(out.From, out.FromRole, out.To, out.ToRole)
		return nil
	})
	return out, err
}

// rulesAgentRole is the role of a registered agent, read from the agent
// registry (bucketAgents: id → the agent's JSON with a "role" field).
func rulesAgentRole(tx *bbolt.Tx, id string) (string, bool) {
	v := tx.Bucket(bucketAgents).Get([]byte(id))
	if v == nil {
		return "", false
	}
	var a struct {
		Role string `json:"role"`
	}
	if json.Unmarshal(v, &a) != nil {
		return "", true
	}
	return a.Role, true
}
