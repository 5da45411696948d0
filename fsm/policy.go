package fsm

// Run-time delivery policies (issue 16, "changed at run time"). A policy
// overrides, for one agent, the delivery mode its watchers read from their
// YAML: for all its mail, or (From set) for one sender's. It is replicated,
// so every watcher of the agent follows it without a restart.
//
// bucketPolicies: agent id ‖ 0x00 ‖ sender ("" for the agent-wide policy)
// → policyRec JSON {"mode","by","at","until"}; at and until are entry
// times (Unix ns), until 0 (left out) for no end.
//
// Expiry is decided at read time, against the reader's clock
// (PolicySet.For, Policy.InForce): nothing has to happen in the state when
// a policy ends, since a watcher asks which policy applies to each message
// as it decides, so no tick entry is needed. Records that ended are
// dropped by the next set_policy of the same agent (against its entry
// time), which bounds what lingers.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"
)

// OpSetPolicy sets or clears an agent's run-time delivery policy (body:
// SetPolicyCommand).
const OpSetPolicy Op = "set_policy"

// The delivery modes a policy names (seed 003, issue 16).
const (
	// PolicyQueue delivers one message at a time, when the agent is idle.
	PolicyQueue = "queue"
	// PolicyInterrupt interrupts the agent (ESC) before delivering.
	PolicyInterrupt = "interrupt"
	// PolicyFork hands the message to a temporary agent.
	PolicyFork = "fork"
	// PolicyQuiet holds every message but urgent ones until the policy
	// ends; held mail is then delivered in seq order.
	PolicyQuiet = "quiet"
)

// PolicyModes lists the modes a policy may set, in the order help shows them.
var PolicyModes = []string{PolicyQueue, PolicyInterrupt, PolicyFork, PolicyQuiet}

// Limits of a policy.
const (
	// MaxPolicyFor bounds --for: 30 days, in seconds.
	MaxPolicyFor = 30 * 24 * 3600
	// MaxPolicyOverrides bounds the per-sender overrides of one agent.
	MaxPolicyOverrides = 64
)

// SetPolicyCommand sets agent's policy: for all its mail, or for From's
// only. Mode "" clears that policy (the YAML applies again); a clear with
// nothing to clear succeeds with Cleared false.
type SetPolicyCommand struct {
	Agent string `json:"agent"`
	// Mode is one of PolicyModes, or "" to clear.
	Mode string `json:"mode"`
	// From, when set, makes this a per-sender override: it applies to
	// mail from that agent only.
	From string `json:"from,omitempty"`
	// ForSeconds, when above 0, ends the policy that long after the
	// entry's time (at most MaxPolicyFor); 0: until cleared.
	ForSeconds int64 `json:"for_seconds,omitempty"`
	// SetBy is who set it (the caller's agent, or the agent itself).
	SetBy string `json:"set_by"`
}

// Validate checks names, the mode and the duration, naming the field and
// the limit.
func (c *SetPolicyCommand) Validate() error {
	switch {
	case !ValidName(c.Agent):
		return NameError("agent", c.Agent)
	case c.From != "" && !ValidName(c.From):
		return NameError("from", c.From)
	case !ValidName(c.SetBy):
		return NameError("set_by", c.SetBy)
	case c.Mode != "" && !slices.Contains(PolicyModes, c.Mode):
		return FieldErrorf("mode", "%q is not a mode: one of %v, or \"\" to clear", c.Mode, PolicyModes)
	case c.ForSeconds < 0 || c.ForSeconds > MaxPolicyFor:
		return FieldErrorf("for_seconds", "%d is out of range: 0 (no end) to %d (30 days)", c.ForSeconds, MaxPolicyFor)
	case c.Mode == "" && c.ForSeconds != 0:
		return FieldErrorf("for_seconds", "a clear takes no duration")
	}
	return nil
}

// Policy is one run-time policy of an agent, as queries and set_policy
// return it.
type Policy struct {
	Agent string `json:"agent"`
	// Mode is one of PolicyModes ("" in the result of a clear).
	Mode string `json:"mode"`
	// From is the sender a per-sender override applies to; "" for all mail.
	From string `json:"from,omitempty"`
	// Until is when it ends; zero for never.
	Until time.Time `json:"until,omitzero"`
	SetBy string    `json:"set_by,omitempty"`
	SetAt time.Time `json:"set_at,omitzero"`
	// Cleared, in the result of a clear, says a policy was removed.
	Cleared bool `json:"cleared,omitempty"`
}

// InForce reports whether p applies at now: it has a mode and has not ended.
func (p Policy) InForce(now time.Time) bool {
	return p.Mode != "" && (p.Until.IsZero() || now.Before(p.Until))
}

// PolicySet is an agent's stored run-time policies: the agent-wide one
// first (From ""), then the per-sender overrides by sender.
type PolicySet struct {
	Agent    string   `json:"agent"`
	Policies []Policy `json:"policies"`
}

// For is the policy that applies at now to mail from sender: that
// sender's override if one is in force, else the agent-wide policy if in
// force; false when none is (the YAML applies). The one rule watchers and
// maosctl follow.
func (s PolicySet) For(sender string, now time.Time) (Policy, bool) {
	var all Policy
	found := false
	for _, p := range s.Policies {
		if !p.InForce(now) {
			continue
		}
		if sender != "" && p.From == sender {
			return p, true
		}
		if p.From == "" {
			all, found = p, true
		}
	}
	return all, found
}

// InForce is s without the policies that ended at now.
func (s PolicySet) InForce(now time.Time) PolicySet {
	out := PolicySet{Agent: s.Agent, Policies: []Policy{}}
	for _, p := range s.Policies {
		if p.InForce(now) {
			out.Policies = append(out.Policies, p)
		}
	}
	return out
}

// policyRec is a stored policy (bucketPolicies).
type policyRec struct {
	Mode  string `json:"mode"`
	By    string `json:"by"`
	At    int64  `json:"at"`
	Until int64  `json:"until,omitempty"`
}

func policyKey(agent, from string) []byte {
	k := append([]byte(agent), 0)
	return append(k, from...)
}

func (r policyRec) policy(agent, from string) Policy {
	p := Policy{Agent: agent, From: from, Mode: r.Mode, SetBy: r.By, SetAt: time.Unix(0, r.At).UTC()}
	if r.Until != 0 {
		p.Until = time.Unix(0, r.Until).UTC()
	}
	return p
}

// getPolicies reads agent's stored policies in key order (agent-wide first).
func getPolicies(tx *bbolt.Tx, agent string) ([]Policy, error) {
	out := []Policy{}
	prefix := policyKey(agent, "")
	c := tx.Bucket(bucketPolicies).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r policyRec
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("fsm: policy %q: decode: %w", k, err)
		}
		out = append(out, r.policy(agent, string(k[len(prefix):])))
	}
	return out, nil
}

func putPolicy(tx *bbolt.Tx, agent, from string, r policyRec) {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("fsm: policy: encode: %v", err))
	}
	mustPut(tx.Bucket(bucketPolicies), policyKey(agent, from), data)
}

func deletePolicy(tx *bbolt.Tx, agent, from string) {
	mustDelete(tx.Bucket(bucketPolicies), policyKey(agent, from))
}

func applySetPolicy(tx *bbolt.Tx, _ uint64, ts int64, body []byte) (any, error) {
	var cmd SetPolicyCommand
	if err := decodeCommand(OpSetPolicy, body, &cmd); err != nil {
		return nil, err
	}
	stored, err := getPolicies(tx, cmd.Agent)
	if err != nil {
		return nil, err
	}
	now := time.Unix(0, ts)
	// Check first, then write: the override bound counts the overrides
	// still in force, other than the one this command replaces.
	exists, overrides := false, 0
	for _, p := range stored {
		if p.From == cmd.From {
			exists = p.InForce(now)
		} else if p.From != "" && p.InForce(now) {
			overrides++
		}
	}
	if cmd.Mode != "" && cmd.From != "" && overrides >= MaxPolicyOverrides {
		return nil, fmt.Errorf("fsm: apply %s: %w", OpSetPolicy, FieldErrorf("from",
			"agent %s has %d per-sender overrides, the most allowed (%d): clear one first", cmd.Agent, overrides, MaxPolicyOverrides))
	}
	for _, p := range stored {
		if !p.InForce(now) || p.From == cmd.From {
			deletePolicy(tx, cmd.Agent, p.From)
		}
	}
	if cmd.Mode == "" {
		return &Policy{Agent: cmd.Agent, From: cmd.From, SetBy: cmd.SetBy, SetAt: now.UTC(), Cleared: exists}, nil
	}
	rec := policyRec{Mode: cmd.Mode, By: cmd.SetBy, At: ts}
	if cmd.ForSeconds > 0 {
		rec.Until = ts + cmd.ForSeconds*int64(time.Second)
	}
	putPolicy(tx, cmd.Agent, cmd.From, rec)
	p := rec.policy(cmd.Agent, cmd.From)
	return &p, nil
}

// Policies returns agent's run-time policies in force at now (the
// caller's clock), the agent-wide one first; an empty set when there are
// none. Errors only when the state cannot be read.
func (f *FSM) Policies(agent string, now time.Time) (PolicySet, error) {
	var out PolicySet
	err := f.view(func(tx *bbolt.Tx) error {
		ps, err := getPolicies(tx, agent)
		out = PolicySet{Agent: agent, Policies: ps}.InForce(now)
		return err
	})
	return out, err
}
