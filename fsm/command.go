package fsm

import (
	"encoding/json"
	"fmt"
)

// Op names a command type. Each op has one file in this package holding its
// body type and its apply function, and one entry in the registry.
type Op string

// The ops of the log.
const (
	// OpSend stores a message (body: SendCommand).
	OpSend Op = "send"
	// OpRegisterNode records a node's API address (body: RegisterNodeCommand).
	OpRegisterNode Op = "register_node"
)

// CommandVersion is the envelope version this build writes and the highest
// it applies. An entry with a higher version fails to apply with an error
// result rather than being half-understood.
const CommandVersion = 1

// Command is the envelope of every Raft log entry: {"v","op","ts","body"}.
type Command struct {
	V  int   `json:"v"`
	Op Op    `json:"op"`
	TS int64 `json:"ts"` // proposer's clock, Unix nanoseconds
	// Body is the op's own JSON object.
	Body json.RawMessage `json:"body"`
}

// Encode builds the log entry bytes for op with body, stamped with ts
// (Unix nanoseconds) by the proposing node.
func Encode(op Op, ts int64, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", op, err)
	}
	return json.Marshal(Command{V: CommandVersion, Op: op, TS: ts, Body: b})
}

func decode(data []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("fsm: decode command: %w", err)
	}
	if c.V < 1 || c.V > CommandVersion {
		return c, fmt.Errorf("fsm: command version %d, this build applies 1..%d", c.V, CommandVersion)
	}
	return c, nil
}
