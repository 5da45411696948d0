package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// NodeInfo is the stored form of a registered node.
type NodeInfo struct {
	NodeID   string `json:"node_id"`
	APIAddr  string `json:"api_addr"`
	RaftAddr string `json:"raft_addr,omitempty"`
	// Index is the Raft index of the entry that last registered the node.
	Index uint64 `json:"index"`
}

// putNode stores a node's record (bucketNodes: node id → NodeInfo JSON).
func putNode(tx *bbolt.Tx, info *NodeInfo) {
	data, err := json.Marshal(info)
	if err != nil {
		panic(fmt.Sprintf("fsm: node %s: encode: %v", info.NodeID, err))
	}
	mustPut(tx.Bucket(bucketNodes), []byte(info.NodeID), data)
}
