package fsm

import (
	"go.etcd.io/bbolt"
)

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
