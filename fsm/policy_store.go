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
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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

func (r policyRec) policy(agent, from string) api.Policy {
	p := api.Policy{Agent: agent, From: from, Mode: r.Mode, SetBy: r.By, SetAt: time.Unix(0, r.At).UTC()}
	if r.Until != 0 {
		p.Until = time.Unix(0, r.Until).UTC()
	}
	return p
}

// getPolicies reads agent's stored policies in key order (agent-wide first).
func getPolicies(tx *bbolt.Tx, agent string) ([]api.Policy, error) {
	out := []api.Policy{}
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
	var cmd api.SetPolicyCommand
	if err := decodeCommand(api.OpSetPolicy, body, &cmd); err != nil {
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
	if cmd.Mode != "" && cmd.From != "" && overrides >= api.MaxPolicyOverrides {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpSetPolicy, api.FieldErrorf("from",
			"agent %s has %d per-sender overrides, the most allowed (%d): clear one first", cmd.Agent, overrides, api.MaxPolicyOverrides))
	}
	for _, p := range stored {
		if !p.InForce(now) || p.From == cmd.From {
			deletePolicy(tx, cmd.Agent, p.From)
		}
	}
	if cmd.Mode == "" {
		return &api.Policy{Agent: cmd.Agent, From: cmd.From, SetBy: cmd.SetBy, SetAt: now.UTC(), Cleared: exists}, nil
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
func (f *FSM) Policies(agent string, now time.Time) (api.PolicySet, error) {
	var out api.PolicySet
	err := f.view(func(tx *bbolt.Tx) error {
		ps, err := getPolicies(tx, agent)
		out = api.PolicySet{Agent: agent, Policies: ps}.InForce(now)
		return err
	})
	return out, err
}
