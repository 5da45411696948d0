package fsm

import (
	"go.etcd.io/bbolt"
)

// bucketCursors: agent id → the seq (8 bytes) of the last message its
// watcher handled. Replicated, so a watcher restarted on any host resumes
// after it.

// OpSetCursor records a watcher's progress (body: SetCursorCommand).
const OpSetCursor Op = "set_cursor"

// SetCursorCommand moves an agent's cursor to Seq. A cursor never moves
// back: a lower Seq (a late retry, a second watcher behind the first)
// leaves it where it is.
type SetCursorCommand struct {
	Agent string `json:"agent"`
	Seq   uint64 `json:"seq"`
	// AgentFence, when set, must be the agent's current lease fence
	// (agent_lease.go): a watcher that lost the lease cannot move the
	// cursor its successor resumes from. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
}

// Cursor is an agent's watcher cursor.
type Cursor struct {
	Agent string `json:"agent"`
	Seq   uint64 `json:"seq"` // 0: nothing handled yet
}

// Validate checks the agent id.
func (c *SetCursorCommand) Validate() error {
	if !ValidName(c.Agent) {
		return NameError("agent", c.Agent)
	}
	return nil
}

func applySetCursor(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd SetCursorCommand
	if err := decodeCommand(OpSetCursor, body, &cmd); err != nil {
		return nil, err
	}
	if err := checkAgentFence(tx, cmd.Agent, cmd.AgentFence); err != nil {
		return nil, wrapOp(OpSetCursor, err)
	}
	cur := getCursor(tx, cmd.Agent)
	if cmd.Seq > cur {
		mustPut(tx.Bucket(bucketCursors), []byte(cmd.Agent), u64(cmd.Seq))
		cur = cmd.Seq
	}
	return &Cursor{Agent: cmd.Agent, Seq: cur}, nil
}

// getCursor reads agent's cursor, 0 when its watcher never recorded one.
func getCursor(tx *bbolt.Tx, agent string) uint64 {
	return getU64(tx.Bucket(bucketCursors), []byte(agent))
}

// CursorOf returns an agent's cursor (Seq 0 when its watcher never
// recorded one).
func (f *FSM) CursorOf(agent string) (Cursor, error) {
	c := Cursor{Agent: agent}
	err := f.view(func(tx *bbolt.Tx) error {
		c.Seq = getCursor(tx, agent)
		return nil
	})
	return c, err
}
