package fsm

import (
	"unicode/utf8"

	"go.etcd.io/bbolt"
)

// OpNodeEvent records a change of gossip membership in the audit trail
// (body: NodeEventCommand). Only the leader proposes it, once per event it
// observes; presence itself never reaches the log.
const OpNodeEvent Op = "node_event"

// Node events, as observed by memberlist on the leader.
const (
	NodeEventJoin  = "join"  // a node joined gossip (or came back after dying)
	NodeEventLeave = "leave" // a node left gracefully (maosd stopped)
	NodeEventDead  = "dead"  // failure detection declared a node dead
)

// MaxNodeEventReason caps NodeEventCommand.Reason, in bytes.
const MaxNodeEventReason = 256

// NodeEventCommand is the body of OpNodeEvent.
type NodeEventCommand struct {
	// ID, fixed by the leader before its first proposal, makes the event
	// idempotent: a proposal that timed out (maybe committed) and is
	// proposed again is audited once. "" (logs written before it): no
	// dedup.
	ID     string `json:"id,omitempty"`
	NodeID string `json:"node_id"`
	Event  string `json:"event"`            // join, leave or dead
	Reason string `json:"reason,omitempty"` // free text for the audit line
}

// nodeEventLabels maps each event to its audit label.
var nodeEventLabels = map[string]string{
	NodeEventJoin:  "NODE_JOIN",
	NodeEventLeave: "NODE_LEAVE",
	NodeEventDead:  "NODE_DEAD",
}

// Validate checks the node id, the event and the reason's length, naming
// the field at fault.
func (c *NodeEventCommand) Validate() error {
	if !ValidName(c.NodeID) {
		return NameError("node_id", c.NodeID)
	}
	if _, ok := nodeEventLabels[c.Event]; !ok {
		return fieldErr("event", "%q is not join, leave or dead", c.Event)
	}
	if len(c.Reason) > MaxNodeEventReason {
		return fieldErr("reason", "%d bytes, at most %d", len(c.Reason), MaxNodeEventReason)
	}
	if !utf8.ValidString(c.Reason) {
		return fieldErr("reason", "not valid UTF-8")
	}
	if len(c.ID) > MaxIDLen {
		return fieldErr("id", "%d bytes, at most %d", len(c.ID), MaxIDLen)
	}
	return nil
}

// applyNodeEvent appends one NODE_JOIN / NODE_LEAVE / NODE_DEAD line to the
// audit trail and returns the command; an id already applied appends
// nothing.
func applyNodeEvent(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd NodeEventCommand
	if err := decodeCommand(OpNodeEvent, body, &cmd); err != nil {
		return nil, err
	}
	if cmd.ID != "" {
		ids := tx.Bucket(bucketNodeEventIDs)
		if ids.Get([]byte(cmd.ID)) != nil {
			return &cmd, nil // a retried proposal: audited already
		}
		mustPut(ids, []byte(cmd.ID), u64(index))
	}
	audit(tx, index, ts, AuditEvent{Kind: AuditNode, Label: nodeEventLabels[cmd.Event], From: cmd.NodeID, Text: cmd.Reason})
	return &cmd, nil
}
