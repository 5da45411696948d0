package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketCursors: agent id → the seq (8 bytes) of the last message its
// watcher handled. Replicated, so a watcher restarted on any host resumes
// after it.

func applySetCursor(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd api.SetCursorCommand
	if err := decodeCommand(api.OpSetCursor, body, &cmd); err != nil {
		return nil, err
	}
	if err := checkAgentFence(tx, cmd.Agent, cmd.AgentFence); err != nil {
		return nil, wrapOp(api.OpSetCursor, err)
	}
	cur := getCursor(tx, cmd.Agent)
	if cmd.Seq > cur {
		mustPut(tx.Bucket(bucketCursors), []byte(cmd.Agent), u64(cmd.Seq))
		cur = cmd.Seq
	}
	return &api.Cursor{Agent: cmd.Agent, Seq: cur}, nil
}

// getCursor reads agent's cursor, 0 when its watcher never recorded one.
func getCursor(tx *bbolt.Tx, agent string) uint64 {
	return getU64(tx.Bucket(bucketCursors), []byte(agent))
}

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
