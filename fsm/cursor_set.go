package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
