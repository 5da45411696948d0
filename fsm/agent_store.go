package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The agent registry in the state file.
//
// bucketAgents: agent id → Agent JSON.
//
// bucketAgentIndex holds three kinds of keys, told apart by their first
// byte (agent ids, roles and capabilities never contain 0x00):
//
//	'r' ‖ role ‖ 0x00 ‖ agent id        → empty   (agents by role)
//	'c' ‖ capability ‖ 0x00 ‖ agent id  → empty   (agents by capability)
//	'n' ‖ role                          → count (8 bytes BE) of its agents
//
// All of them are derived from the Agent records: register rewrites an
// agent's entries, unregister deletes them.

// Index key kinds of bucketAgentIndex.
const (
	idxRole       = 'r'
	idxCapability = 'c'
	idxRoleCount  = 'n'
)

// loadAgent reads an agent inside a transaction; nil, nil if there is none.
func loadAgent(tx *bbolt.Tx, id string) (*api.Agent, error) {
	v := tx.Bucket(bucketAgents).Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	var a api.Agent
	if err := json.Unmarshal(v, &a); err != nil {
		return nil, fmt.Errorf("agent %s: decode: %w", id, err)
	}
	return &a, nil
}

// agentRole is the role in a stored Agent record, "" for none.
func agentRole(v []byte) string {
	if v == nil {
		return ""
	}
	var a struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(v, &a)
	return a.Role
}

// putAgent stores a, replacing prev (nil for a new agent) and its index
// entries.
func putAgent(tx *bbolt.Tx, prev, a *api.Agent) {
	if prev != nil {
		dropAgentIndex(tx, prev)
	}
	data, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("fsm: agent %s: encode: %v", a.ID, err))
	}
	idx := tx.Bucket(bucketAgentIndex)
	mustPut(tx.Bucket(bucketAgents), []byte(a.ID), data)
	mustPut(idx, agentIndexKey(idxRole, a.Role, a.ID), nil)
	for _, cp := range a.Capabilities {
		mustPut(idx, agentIndexKey(idxCapability, cp, a.ID), nil)
	}
	countKey := append([]byte{idxRoleCount}, a.Role...)
	mustPut(idx, countKey, u64(getU64(idx, countKey)+1))
}

// deleteAgent removes a, its index entries and its A2A remote.
func deleteAgent(tx *bbolt.Tx, a *api.Agent) {
	dropAgentIndex(tx, a)
	mustDelete(tx.Bucket(bucketAgentA2A), []byte(a.ID))
	mustDelete(tx.Bucket(bucketAgents), []byte(a.ID))
}

// dropAgentIndex deletes a's index entries and its count in its role.
func dropAgentIndex(tx *bbolt.Tx, a *api.Agent) {
	idx := tx.Bucket(bucketAgentIndex)
	mustDelete(idx, agentIndexKey(idxRole, a.Role, a.ID))
	for _, cp := range a.Capabilities {
		mustDelete(idx, agentIndexKey(idxCapability, cp, a.ID))
	}
	countKey := append([]byte{idxRoleCount}, a.Role...)
	if n := getU64(idx, countKey); n > 1 {
		mustPut(idx, countKey, u64(n-1))
	} else {
		mustDelete(idx, countKey)
	}
}

// agentIndexPrefix is kind ‖ name ‖ 0x00.
func agentIndexPrefix(kind byte, name string) []byte {
	k := make([]byte, 0, len(name)+2)
	k = append(k, kind)
	k = append(k, name...)
	return append(k, 0)
}

// agentIndexKey is kind ‖ name ‖ 0x00 ‖ id.
func agentIndexKey(kind byte, name, id string) []byte {
	return append(agentIndexPrefix(kind, name), id...)
}

// putAgentA2A stores agent's A2A remote (bucketAgentA2A), or deletes it
// for nil.
func putAgentA2A(tx *bbolt.Tx, agent string, r *api.A2ARemote) {
	b := tx.Bucket(bucketAgentA2A)
	if r == nil {
		mustDelete(b, []byte(agent))
		return
	}
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("fsm: agent %s: encode a2a: %v", agent, err))
	}
	mustPut(b, []byte(agent), data)
}

// loadAgentA2A reads agent's A2A remote; nil, nil if it has none.
func loadAgentA2A(tx *bbolt.Tx, agent string) (*api.A2ARemote, error) {
	v := tx.Bucket(bucketAgentA2A).Get([]byte(agent))
	if v == nil {
		return nil, nil
	}
	var r api.A2ARemote
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("agent %s: decode a2a: %w", agent, err)
	}
	return &r, nil
}
