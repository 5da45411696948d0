package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// AgentLeaseOf returns agent's lease as of the latest applied entry; a
// *NotFoundError when none was ever granted.
func (f *FSM) AgentLeaseOf(agent string) (*api.AgentLease, error) {
	var out *api.AgentLease
	err := f.view(func(tx *bbolt.Tx) error {
		rec, ok, err := getAgentLease(tx, agent)
		if err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		if !ok {
			return notFound("agent %s has no lease", agent)
		}
		out = rec.view(agent, lastTS(tx))
		return nil
	})
	return out, err
}

// AgentLeases returns every agent lease by agent id, as of the latest
// applied entry. It reads every lease: there is one per agent configured
// on a watcher, a bounded set.
func (f *FSM) AgentLeases() (api.AgentLeasePage, error) {
	page := api.AgentLeasePage{Leases: []api.AgentLease{}}
	err := f.view(func(tx *bbolt.Tx) error {
		at := lastTS(tx)
		page.AsOf = time.Unix(0, at).UTC()
		return tx.Bucket(bucketAgentLeases).ForEach(func(k, v []byte) error {
			var rec agentLeaseRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("fsm: agent lease %s: decode: %w", k, err)
			}
			page.Leases = append(page.Leases, *rec.view(string(k), at))
			return nil
		})
	})
	return page, err
}
