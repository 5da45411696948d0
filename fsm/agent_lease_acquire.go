package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyAgentLeaseAcquire grants the agent's lease when there is none or
// it lapsed or was released (a new fence: this entry's index), extends it
// when the caller holds it live (same fence), or records the caller as a
// standby. Every outcome is a result: standing by is what a watcher of a
// second node does every third of its ttl, not an error.
func applyAgentLeaseAcquire(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.AgentLeaseAcquireCommand
	if err := decodeCommand(api.OpAgentLeaseAcquire, body, &cmd); err != nil {
		return nil, err
	}
	cur, ok, err := getAgentLease(tx, cmd.Agent)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpAgentLeaseAcquire, err)
	}
	ttl := time.Duration(cmd.TTL)
	switch {
	case ok && !cur.free(ts) && cur.Holder == cmd.LeaseHolder:
		cur.Renewed, cur.Expires, cur.TTL = ts, addTTL(ts, ttl), int64(ttl)
		cur.dropStandby(cmd.LeaseHolder, ts)
		putAgentLease(tx, cmd.Agent, &cur)
		return &api.AgentLeaseResult{Outcome: api.AgentLeaseExtended, Lease: cur.view(cmd.Agent, ts)}, nil
	case ok && !cur.free(ts):
		cur.standBy(cmd.LeaseHolder, ts, ttl)
		putAgentLease(tx, cmd.Agent, &cur)
		return &api.AgentLeaseResult{Outcome: api.AgentLeaseStandby, Lease: cur.view(cmd.Agent, ts)}, nil
	}
	next := agentLeaseRecord{Holder: cmd.LeaseHolder, Fence: index, Acquired: ts, Expires: addTTL(ts, ttl), TTL: int64(ttl), Reason: api.LeaseReasonFirst}
	ev := api.AuditEvent{Kind: AuditAgentLease, From: cmd.Node, Label: "AGENT_LEASE",
		Text: fmt.Sprintf("%s served by %s fence=%d ttl=%s", cmd.Agent, cmd.LeaseHolder, index, ttl)}
	if ok {
		next.Standbys = cur.Standbys
		next.Reason = api.LeaseReasonLapsed
		if cur.Released {
			next.Reason = api.LeaseReasonReleased
		}
		ev.Label, ev.From, ev.To = "AGENT_TAKEOVER", cur.Holder.Node, []string{cmd.Node}
		ev.Text = fmt.Sprintf("%s from %s (fence %d) to %s fence=%d: %s", cmd.Agent, cur.Holder, cur.Fence, cmd.LeaseHolder, index, next.Reason)
		if !cur.Released {
			ev.Text += " at " + lockTime(cur.Expires)
		}
	}
	next.dropStandby(cmd.LeaseHolder, ts)
	putAgentLease(tx, cmd.Agent, &next)
	audit(tx, index, ts, ev)
	return &api.AgentLeaseResult{Outcome: api.AgentLeaseGranted, Lease: next.view(cmd.Agent, ts)}, nil
}
