package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// keyClusterID is the cluster id's key in bucketMeta.
var keyClusterID = []byte("cluster_id")

func applyClusterID(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd api.ClusterIDCommand
	if err := decodeCommand(api.OpClusterID, body, &cmd); err != nil {
		return nil, err
	}
	meta := tx.Bucket(bucketMeta)
	switch cur := string(meta.Get(keyClusterID)); cur {
	case "":
		mustPut(meta, keyClusterID, []byte(cmd.ClusterID))
	case cmd.ClusterID:
	default:
		return nil, &api.ConflictError{Reason: fmt.Sprintf("the cluster's id is %s already; it cannot become %s", cur, cmd.ClusterID)}
	}
	return &cmd, nil
}

// ClusterID is the cluster's id as this state has applied it, "" before
// the entry fixing it (OpClusterID) is applied.
func (f *FSM) ClusterID() string {
	var id string
	_ = f.view(func(tx *bbolt.Tx) error {
		id = string(tx.Bucket(bucketMeta).Get(keyClusterID))
		return nil
	})
	return id
}
