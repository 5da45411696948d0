package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
