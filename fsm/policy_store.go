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
