package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// The agent registry.
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

func applyRegisterAgent(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.RegisterAgentCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply register_agent: decode: %w", err)
	}
	cmd.Normalize()
	if err := cmd.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: apply register_agent: %w", err)
	}
	prev, err := loadAgent(tx, cmd.ID)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply register_agent: %w", err)
	}
	a := api.Agent{
		ID: cmd.ID, Role: cmd.Role, Capabilities: cmd.Capabilities, Description: cmd.Description, Node: cmd.Node,
		RegisteredAt: time.Unix(0, ts).UTC(), UpdatedAt: time.Unix(0, ts).UTC(), Index: index,
	}
	if prev != nil {
		a.RegisteredAt = prev.RegisteredAt
	}
	putAgent(tx, prev, &a)
	text := "role " + a.Role
	if len(a.Capabilities) > 0 {
		text += ", capabilities " + strings.Join(a.Capabilities, ",")
	}
	if a.Node != "" {
		text += ", node " + a.Node
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditAgent, From: a.ID, Label: "REGISTER", Text: text})
	return &a, nil
}

func applyUnregisterAgent(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.UnregisterAgentCommand
	if err := decodeCommand(api.OpUnregisterAgent, body, &cmd); err != nil {
		return nil, err
	}
	prev, err := loadAgent(tx, cmd.ID)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply unregister_agent: %w", err)
	}
	if prev == nil {
		return nil, fmt.Errorf("fsm: apply unregister_agent: %w", notFound("agent %s", cmd.ID))
	}
	deleteAgent(tx, prev)
	// Its lease goes with it: a watcher still serving it is refused at its
	// next renewal and asks again, for a new fence.
	mustDelete(tx.Bucket(bucketAgentLeases), []byte(prev.ID))
	audit(tx, index, ts, api.AuditEvent{Kind: AuditAgent, From: prev.ID, Label: "UNREGISTER", Text: "role " + prev.Role})
	return prev, nil
}

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

// deleteAgent removes a and its index entries.
func deleteAgent(tx *bbolt.Tx, a *api.Agent) {
	dropAgentIndex(tx, a)
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

// mustPut and mustDelete write inside an apply transaction; bbolt fails
// only on programming errors (empty or oversized key, read-only tx), and
// the batch is abandoned.
func mustPut(b *bbolt.Bucket, k, v []byte) {
	if err := b.Put(k, v); err != nil {
		panic(fmt.Sprintf("fsm: put %q: %v", k, err))
	}
}

func mustDelete(b *bbolt.Bucket, k []byte) {
	if err := b.Delete(k); err != nil {
		panic(fmt.Sprintf("fsm: delete %q: %v", k, err))
	}
}

// Agent returns one registered agent, or an error wrapping ErrNotFound.
func (f *FSM) Agent(id string) (*api.Agent, error) {
	var a *api.Agent
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		if a, err = loadAgent(tx, id); err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		if a == nil {
			return notFound("agent %s", id)
		}
		return nil
	})
	return a, err
}

// Agents returns a page of registered agents in id order. With a role (or
// a capability) it reads that index range only; with both, the role's range
// filtered by capability. Without either, the whole registry from After.
func (f *FSM) Agents(q api.AgentQuery) (api.AgentPage, error) {
	if err := q.Validate(); err != nil {
		return api.AgentPage{}, err
	}
	limit := pageLimit(q.Limit)
	page := api.AgentPage{Agents: []api.Agent{}}
	err := f.view(func(tx *bbolt.Tx) error {
		var c *bbolt.Cursor
		var prefix []byte
		switch {
		case q.Role != "":
			c, prefix = tx.Bucket(bucketAgentIndex).Cursor(), agentIndexPrefix(idxRole, q.Role)
		case q.Capability != "":
			c, prefix = tx.Bucket(bucketAgentIndex).Cursor(), agentIndexPrefix(idxCapability, q.Capability)
		default:
			c = tx.Bucket(bucketAgents).Cursor()
		}
		start := append(slices.Clone(prefix), q.After...)
		if q.After != "" {
			start = append(start, 0) // just past After
		}
		for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			a, err := loadAgent(tx, string(k[len(prefix):]))
			if err != nil {
				return fmt.Errorf("fsm: agents: %w", err)
			}
			if a == nil {
				return fmt.Errorf("fsm: agents: index entry %q without an agent", k)
			}
			if q.Role != "" && q.Capability != "" && !slices.Contains(a.Capabilities, q.Capability) {
				continue
			}
			if len(page.Agents) == limit {
				page.HasMore = true
				return nil
			}
			page.Agents = append(page.Agents, *a)
		}
		return nil
	})
	return page, err
}

// Roles returns the role summary: role → number of registered agents. It
// reads one count per role.
func (f *FSM) Roles() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := f.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAgentIndex).Cursor()
		prefix := []byte{idxRoleCount}
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(v) != 8 {
				return fmt.Errorf("fsm: roles: bad count for %q", k[1:])
			}
			out[string(k[1:])] = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return out, err
}
