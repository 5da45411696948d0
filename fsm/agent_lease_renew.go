package fsm

import (
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyAgentLeaseRenew extends the holder's live lease under its fence.
// A lease that lapsed is refused even if nobody took it over: its holder
// may have stopped answering for a while, so it acquires again for a new
// fence. Refusals are *FenceError values and write nothing.
func applyAgentLeaseRenew(tx *bbolt.Tx, _ uint64, ts int64, body []byte) (any, error) {
	var cmd api.AgentLeaseRenewCommand
	if err := decodeCommand(api.OpAgentLeaseRenew, body, &cmd); err != nil {
		return nil, err
	}
	return renewAgentLease(tx, ts, &cmd)
}

// renewAgentLease is one renewal at entry time ts, for applyAgentLeaseRenew
// and applyAgentLeaseRenewMany alike.
func renewAgentLease(tx *bbolt.Tx, ts int64, cmd *api.AgentLeaseRenewCommand) (*api.AgentLeaseResult, error) {
	cur, err := currentLease(tx, api.OpAgentLeaseRenew, cmd.Agent, cmd.LeaseHolder, cmd.Fence)
	if err != nil {
		return nil, err
	}
	if ts >= cur.Expires {
		return nil, wrapOp(api.OpAgentLeaseRenew, fenced("agent %s: the lease (fence %d) expired at %s, before this renewal at %s: acquire it again for a new fence",
			cmd.Agent, cur.Fence, lockTime(cur.Expires), lockTime(ts)))
	}
	ttl := time.Duration(cmd.TTL)
	cur.Renewed, cur.Expires, cur.TTL = ts, addTTL(ts, ttl), int64(ttl)
	cur.dropStandby(cmd.LeaseHolder, ts)
	putAgentLease(tx, cmd.Agent, &cur)
	return &api.AgentLeaseResult{Outcome: api.AgentLeaseExtended, Lease: cur.view(cmd.Agent, ts)}, nil
}
