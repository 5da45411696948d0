package fsm

import (
	"unicode/utf8"

	"go.etcd.io/bbolt"
)

// OpNodeEvent records a change of membership in the audit trail (body:
// NodeEventCommand): of gossip (join, leave, dead, as the leader's
// memberlist observes them) and of the Raft configuration (join, remove,
// replace, leadership transfer, as the leader carries them out). Only the
// leader proposes it, once per event; presence itself never reaches the
// log.
const OpNodeEvent Op = "node_event"

// Node events: of gossip, as observed by memberlist on the leader, and of
// the Raft configuration, as the leader changes it. Join is both: the
// reason says which (a voter added, or a member seen on gossip).
const (
	NodeEventJoin  = "join"  // a voter was added, or a node joined gossip (or came back after dying)
	NodeEventLeave = "leave" // a node left gracefully (maosd stopped)
	NodeEventDead  = "dead"  // failure detection declared a node dead
	// NodeEventRemove: a voter was taken out of the Raft configuration.
	NodeEventRemove = "remove"
	// NodeEventReplace: a voter was replaced by a node of the same id (or
	// Raft address) on purpose (transport.JoinRequest.Replace).
	NodeEventReplace = "replace"
	// NodeEventTransfer: leadership was handed over on request; NodeID is
	// the new leader.
	NodeEventTransfer = "transfer"
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
	Event  string `json:"event"`            // join, leave, dead, remove, replace or transfer
	Reason string `json:"reason,omitempty"` // free text for the audit line
}

// NodeEventLabels maps each event to its audit label.
var NodeEventLabels = map[string]string{
	NodeEventJoin:  "NODE_JOIN",
	NodeEventLeave: "NODE_LEAVE",
	NodeEventDead:  "NODE_DEAD",

	NodeEventRemove:   "NODE_REMOVE",
	NodeEventReplace:  "NODE_REPLACE",
	NodeEventTransfer: "LEADER_TRANSFER",
}

// Validate checks the node id, the event and the reason's length, naming
// the field at fault.
func (c *NodeEventCommand) Validate() error {
	if !ValidName(c.NodeID) {
		return NameError("node_id", c.NodeID)
	}
	if _, ok := NodeEventLabels[c.Event]; !ok {
		return FieldErrorf("event", "%q is not join, leave, dead, remove, replace or transfer", c.Event)
	}
	if len(c.Reason) > MaxNodeEventReason {
		return FieldErrorf("reason", "%d bytes, at most %d", len(c.Reason), MaxNodeEventReason)
	}
	if !utf8.ValidString(c.Reason) {
		return FieldErrorf("reason", "not valid UTF-8")
	}
	if len(c.ID) > MaxIDLen {
		return FieldErrorf("id", "%d bytes, at most %d", len(c.ID), MaxIDLen)
	}
	return nil
}

// applyNodeEvent appends one NODE_JOIN / NODE_LEAVE / NODE_DEAD /
// NODE_REMOVE / NODE_REPLACE / LEADER_TRANSFER line to the audit trail and returns the command; an id already applied appends
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
	audit(tx, index, ts, AuditEvent{Kind: AuditNode, Label: NodeEventLabels[cmd.Event], From: cmd.NodeID, Text: cmd.Reason})
	return &cmd, nil
}
