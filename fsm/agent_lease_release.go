package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyAgentLeaseRelease ends the holder's lease under its fence: the
// record stays (its fence, its standbys) marked released, so the next
// acquire takes over at once and the audit says why. Releasing a lease
// already released under the same fence answers as the first release did
// (a retried release).
func applyAgentLeaseRelease(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.AgentLeaseReleaseCommand
	if err := decodeCommand(api.OpAgentLeaseRelease, body, &cmd); err != nil {
		return nil, err
	}
	cur, ok, err := getAgentLease(tx, cmd.Agent)
	if err != nil {
		return nil, wrapOp(api.OpAgentLeaseRelease, err)
	}
	if ok && cur.Released && cur.Fence == cmd.Fence && cur.Holder == cmd.LeaseHolder {
		return &api.AgentLeaseResult{Outcome: api.AgentLeaseReleased, Lease: cur.view(cmd.Agent, ts)}, nil
	}
	cur, err = currentLease(tx, api.OpAgentLeaseRelease, cmd.Agent, cmd.LeaseHolder, cmd.Fence)
	if err != nil {
		return nil, err
	}
	cur.Released, cur.Expires = true, min(cur.Expires, ts)
	putAgentLease(tx, cmd.Agent, &cur)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditAgentLease, From: cmd.Node, Label: "AGENT_RELEASE",
		Text: fmt.Sprintf("%s released by %s fence=%d", cmd.Agent, cmd.LeaseHolder, cur.Fence)})
	return &api.AgentLeaseResult{Outcome: api.AgentLeaseReleased, Lease: cur.view(cmd.Agent, ts)}, nil
}

// wrapOp is err as an apply of op reports it: "fsm: apply OP: …".
func wrapOp(op api.Op, err error) error { return fmt.Errorf("fsm: apply %s: %w", op, err) }
