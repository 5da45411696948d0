package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func applyRegisterNode(tx *bbolt.Tx, index uint64, _ int64, body []byte) (any, error) {
	var cmd api.RegisterNodeCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply register_node: decode: %w", err)
	}
	if cmd.NodeID == "" {
		return nil, fmt.Errorf("fsm: apply register_node: %w", api.FieldErrorf("node_id", "required"))
	}
	// The id is a bbolt key: one over bbolt's key limit would make Put fail
	// and every node panic on this entry.
	if len(cmd.NodeID) > api.MaxIDLen {
		return nil, fmt.Errorf("fsm: apply register_node: %w", api.FieldErrorf("node_id", "%d bytes, at most %d", len(cmd.NodeID), api.MaxIDLen))
	}
	if cmd.APIAddr == "" {
		return nil, fmt.Errorf("fsm: apply register_node: %w", api.FieldErrorf("api_addr", "required"))
	}
	info := NodeInfo{NodeID: cmd.NodeID, APIAddr: cmd.APIAddr, RaftAddr: cmd.RaftAddr, Index: index}
	putNode(tx, &info)
	return &info, nil
}
