package fsm

import (
	"encoding/json"
	"sort"

	"go.etcd.io/bbolt"
)

// Nodes returns every registered node, by node id.
func (f *FSM) Nodes() ([]NodeInfo, error) {
	var out []NodeInfo
	err := f.view(func(tx *bbolt.Tx) (err error) {
		out, err = decodeAll[NodeInfo](tx.Bucket(bucketNodes), "node")
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, err
}

// Node returns one registered node, or an error wrapping ErrNotFound.
func (f *FSM) Node(id string) (NodeInfo, error) {
	var n NodeInfo
	err := f.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketNodes).Get([]byte(id))
		if v == nil {
			return notFound("node %s", id)
		}
		return json.Unmarshal(v, &n)
	})
	return n, err
}
