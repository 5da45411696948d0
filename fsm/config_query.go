package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Config returns the cluster settings.
func (f *FSM) Config() (api.ClusterConfig, error) {
	var cfg api.ClusterConfig
	err := f.view(func(tx *bbolt.Tx) error {
		cfg = readConfig(tx)
		return nil
	})
	return cfg, err
}
