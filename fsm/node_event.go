package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyNodeEvent appends one NODE_JOIN / NODE_LEAVE / NODE_DEAD /
// NODE_REMOVE / NODE_REPLACE / LEADER_TRANSFER line to the audit trail and returns the command; an id already applied appends
// nothing.
func applyNodeEvent(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.NodeEventCommand
	if err := decodeCommand(api.OpNodeEvent, body, &cmd); err != nil {
		return nil, err
	}
	if cmd.ID != "" {
		ids := tx.Bucket(bucketNodeEventIDs)
		if ids.Get([]byte(cmd.ID)) != nil {
			return &cmd, nil // a retried proposal: audited already
		}
		mustPut(ids, []byte(cmd.ID), u64(index))
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditNode, Label: api.NodeEventLabels[cmd.Event], From: cmd.NodeID, Text: cmd.Reason})
	return &cmd, nil
}
