package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyAgentLeaseRenewMany renews several leases in one entry, each as
// applyAgentLeaseRenew would alone at this entry's time: a refused renewal
// (a lost or lapsed lease, an agent with none) is that renewal's error in
// the result and writes nothing; the others are renewed. Only a body that
// does not decode or validate refuses the whole entry.
func applyAgentLeaseRenewMany(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.AgentLeaseRenewManyCommand
	if err := decodeCommand(api.OpAgentLeaseRenewMany, body, &cmd); err != nil {
		return nil, err
	}
	out := &api.AgentLeaseRenewManyResult{Results: make([]api.AgentLeaseRenewal, len(cmd.Renewals))}
	for i := range cmd.Renewals {
		r := &cmd.Renewals[i]
		out.Results[i].Agent = r.Agent
		res, err := renewAgentLease(tx, ts, r)
		if err != nil {
			out.Results[i].Error = api.ToAPIError(err)
			continue
		}
		out.Results[i].Lease = res.Lease
	}
	return out, nil
}
