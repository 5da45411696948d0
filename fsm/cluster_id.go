package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"
)

// OpClusterID fixes the cluster's id (body: ClusterIDCommand): the leader
// proposes it once, at the first term of a new cluster (or the first term
// after an upgrade, for a data dir written before cluster ids: the
// cluster adopts one then). The first applied wins; a later one naming
// another id is refused, the same one is a no-op. So every member's state
// file holds the same id, nodes carry it on their calls to each other, and
// a node of another cluster (another data dir, another id) is refused.
const OpClusterID Op = "cluster_id"

// ClusterIDCommand is the body of OpClusterID.
type ClusterIDCommand struct {
	ClusterID string `json:"cluster_id"`
}

// keyClusterID is the cluster id's key in bucketMeta.
var keyClusterID = []byte("cluster_id")

// ValidClusterID reports whether id can be a cluster id: a name
// (NamePattern), as the leader makes them ("c" and 32 hex digits).
func ValidClusterID(id string) bool { return ValidName(id) }

// Validate checks the id.
func (c *ClusterIDCommand) Validate() error {
	if !ValidClusterID(c.ClusterID) {
		return NameError("cluster_id", c.ClusterID)
	}
	return nil
}

func applyClusterID(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd ClusterIDCommand
	if err := decodeCommand(OpClusterID, body, &cmd); err != nil {
		return nil, err
	}
	meta := tx.Bucket(bucketMeta)
	switch cur := string(meta.Get(keyClusterID)); cur {
	case "":
		mustPut(meta, keyClusterID, []byte(cmd.ClusterID))
	case cmd.ClusterID:
	default:
		return nil, &ConflictError{Reason: fmt.Sprintf("the cluster's id is %s already; it cannot become %s", cur, cmd.ClusterID)}
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
