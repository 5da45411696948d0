package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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

// AgentA2A returns agent id's A2A remote with its credential (the relay's
// read, admin only: GET /v1/agents/{id}/a2a), or an error wrapping
// ErrNotFound when there is no such agent or it is no A2A remote.
func (f *FSM) AgentA2A(id string) (*api.A2ARemote, error) {
	var r *api.A2ARemote
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		if r, err = loadAgentA2A(tx, id); err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		if r == nil {
			return notFound("agent %s as an A2A remote", id)
		}
		return nil
	})
	return r, err
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
