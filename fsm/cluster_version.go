package fsm

import (
	"fmt"
	"strconv"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// MaxStateVersion is the highest state-machine version this build
// applies. The cluster runs the lowest version among its servers' builds,
// as the leader committed it (api.OpClusterVersion); an op whose registry
// entry needs a higher version than the committed one is refused before
// it is proposed (CheckVersion).
//
// Version 1 is every build before versions (which report none); version 2
// is the first build that reports its version and applies
// api.OpClusterVersion. A build that brings an op older builds would not
// apply raises this and gives the op that version in the registry.
// Version 3 stores an agent's A2A remote (api.RegisterAgentCommand.A2A),
// which a build of 2 would drop (registerAgentVersion).
const MaxStateVersion = 3

// keyClusterVersion is the committed cluster version's key in bucketMeta:
// the version as a decimal string; absent means 1.
var keyClusterVersion = []byte("cluster_version")

// StateVersionError says the state or the log holds a cluster version
// higher than this build applies: the node must not go on, since the
// entries after it may be ops it would refuse or misapply, and its state
// would diverge from the others'. Open returns it for a state file that
// holds such a version; applying an entry that raises the version past
// this build's stops the node (ApplyBatch panics with it).
type StateVersionError struct {
	Cluster int // the cluster's version
	Build   int // the highest this build applies
}

func (e *StateVersionError) Error() string {
	return fmt.Sprintf("the cluster runs state version %d and this build applies versions up to %d: "+
		"run a build of version %d or later on this node (a node is never downgraded below the cluster's version)",
		e.Cluster, e.Build, e.Cluster)
}

// setVersions sets the FSM's highest version (0: MaxStateVersion) and
// raises the versions of the ops named in ops (Options.OpVersions).
func (f *FSM) setVersions(max int, ops map[api.Op]int) error {
	if max < 0 || max > MaxStateVersion {
		return fmt.Errorf("fsm: options: max_state_version %d: want 1..%d (or 0 for this build's)", max, MaxStateVersion)
	}
	f.maxVersion = max
	if max == 0 {
		f.maxVersion = MaxStateVersion
	}
	for op, v := range ops {
		spec, ok := f.ops[op]
		switch {
		case !ok:
			return fmt.Errorf("fsm: options: op_versions: %q is not an op of the registry", op)
		case v < 1 || v > MaxStateVersion:
			return fmt.Errorf("fsm: options: op_versions[%s]: %d: want 1..%d", op, v, MaxStateVersion)
		}
		spec.version = v
		f.ops[op] = spec
	}
	return nil
}

// MaxStateVersion is the highest state version this FSM applies: this
// build's, unless Options.MaxStateVersion said less.
func (f *FSM) MaxStateVersion() int { return f.maxVersion }

// OpVersion is the state version op needs (its registry entry's); 0 for an
// op this build does not know.
func (f *FSM) OpVersion(op api.Op) int { return f.ops[op].version }

// CheckVersion refuses op with body with a *api.ClusterVersionError while
// the cluster's committed version is below what they need (the op's, or
// more for a body its registry entry says so of: opSpec.bodyVersion): the
// one check before a write is proposed (cluster's Node.Apply). Writes of
// version 1 never read the state. An unknown op passes (apply refuses it).
func (f *FSM) CheckVersion(op api.Op, body any) error {
	spec := f.ops[op]
	need := spec.version
	if spec.bodyVersion != nil {
		need = max(need, spec.bodyVersion(body))
	}
	if need <= 1 {
		return nil
	}
	if runs := f.ClusterVersion(); runs < need {
		return &api.ClusterVersionError{Op: op, Needs: need, Runs: runs}
	}
	return nil
}

// ClusterVersion is the cluster's state version as this state has applied
// it: 1 until an api.OpClusterVersion raised it (and on a closed FSM).
func (f *FSM) ClusterVersion() int {
	v := 1
	_ = f.view(func(tx *bbolt.Tx) error {
		v = clusterVersion(tx)
		return nil
	})
	return v
}

// clusterVersion reads the committed version in tx: 1 when absent.
func clusterVersion(tx *bbolt.Tx) int {
	b := tx.Bucket(bucketMeta).Get(keyClusterVersion)
	if b == nil {
		return 1
	}
	v, err := strconv.Atoi(string(b))
	if err != nil || v < 1 {
		return 1 // never written so: apply stores a version ≥ 1 as digits
	}
	return v
}

// checkStateVersion refuses a state file whose committed version is above
// this FSM's (Open).
func (f *FSM) checkStateVersion() error {
	var err error
	_ = f.db.View(func(tx *bbolt.Tx) error {
		if v := clusterVersion(tx); v > f.maxVersion {
			err = fmt.Errorf("fsm: open %s: %w", f.path, &StateVersionError{Cluster: v, Build: f.maxVersion})
		}
		return nil
	})
	return err
}

// applyClusterVersion raises the committed version. The same version
// again is a no-op; a lower one is refused (*api.ConflictError), so the
// version never goes down whatever a leader proposes. A version above
// this build's is a *StateVersionError, which stops the node
// (ApplyBatch): it would apply what comes next wrongly.
func (f *FSM) applyClusterVersion(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd api.ClusterVersionCommand
	if err := decodeCommand(api.OpClusterVersion, body, &cmd); err != nil {
		return nil, err
	}
	if cmd.Version > f.maxVersion {
		return nil, &StateVersionError{Cluster: cmd.Version, Build: f.maxVersion}
	}
	cur := clusterVersion(tx)
	switch {
	case cmd.Version < cur:
		return nil, &api.ConflictError{Reason: fmt.Sprintf("the cluster runs state version %d; it is never lowered to %d", cur, cmd.Version)}
	case cmd.Version > cur:
		mustPut(tx.Bucket(bucketMeta), keyClusterVersion, []byte(strconv.Itoa(cmd.Version)))
	}
	return &api.ClusterVersionCommand{Version: max(cur, cmd.Version)}, nil
}
