package fsm

import (
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
