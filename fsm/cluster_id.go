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
