package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// CursorOf returns an agent's cursor (Seq 0 when its watcher never
// recorded one).
func (f *FSM) CursorOf(agent string) (api.Cursor, error) {
	c := api.Cursor{Agent: agent}
	err := f.view(func(tx *bbolt.Tx) error {
		c.Seq = getCursor(tx, agent)
		return nil
	})
	return c, err
}
