package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/maos-project/maos/api"
)

// CommandVersion is the envelope version this build writes and the highest
// it applies. An entry with a higher version fails to apply with an error
// result rather than being half-understood.
//
// Version 1 is a JSON object {"v":1,"op","ts","body"}; version 2 is binary,
// because decoding a JSON envelope scans the whole body twice more before
// the op decodes it: byte 0x02, uvarint len(op), op, varint ts, then the
// body's JSON to the end. An entry's first byte tells them apart ('{' or
// 0x02), so logs written by version 1 still apply.
const CommandVersion = 2

// envelopeV2 is the first byte of a version-2 entry.
const envelopeV2 = 0x02

// maxOpLen bounds an op name in a binary envelope.
const maxOpLen = 64

// Command is a decoded log entry.
type Command struct {
	V  int    `json:"v"`
	Op api.Op `json:"op"`
	TS int64  `json:"ts"` // proposer's clock, Unix nanoseconds
	// Body is the op's own JSON object.
	Body json.RawMessage `json:"body"`
}

// maxBodyDepth bounds the nesting of a whole command body: MaxJSONDepth
// for the values its fields carry, and a few levels for the command's own
// objects around them.
const maxBodyDepth = api.MaxJSONDepth + 8

// Encode builds the log entry bytes for op with body, stamped with ts
// (Unix nanoseconds) by the proposing node, in envelope version 2. It is
// the last step before a proposal, so it refuses what apply could not
// decode on every node: a body that is not valid UTF-8 or nests deeper
// than MaxJSONDepth (and a few levels of the command's own); the error is
// a *FieldError (ErrInvalid). CheckText names the field first where a
// command declares it.
func Encode(op api.Op, ts int64, body any) ([]byte, error) {
	if len(op) == 0 || len(op) > maxOpLen {
		return nil, fmt.Errorf("fsm: encode: op %q: must be 1..%d bytes", op, maxOpLen)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", op, err)
	}
	// Marshal wrote valid JSON; what it may carry is a RawMessage too deep
	// or not UTF-8.
	if err := api.CheckShape(string(op)+" command", b, maxBodyDepth); err != nil {
		return nil, err
	}
	out := make([]byte, 0, 1+binary.MaxVarintLen64*2+len(op)+len(b))
	out = append(out, envelopeV2)
	out = binary.AppendUvarint(out, uint64(len(op)))
	out = append(out, op...)
	out = binary.AppendVarint(out, ts)
	return append(out, b...), nil
}

// DecodeCommand reads a log entry's envelope, of either version; the body
// is left for the op to decode and check. Errors name what is malformed.
func DecodeCommand(data []byte) (Command, error) { return decode(data) }

func decode(data []byte) (Command, error) {
	if len(data) > 0 && data[0] == envelopeV2 {
		return decodeV2(data[1:])
	}
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("fsm: decode command: %w", err)
	}
	if c.V != 1 {
		return c, fmt.Errorf("fsm: command version %d in a JSON envelope, this build applies 1..%d", c.V, CommandVersion)
	}
	return c, nil
}

func decodeV2(b []byte) (Command, error) {
	c := Command{V: 2}
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > maxOpLen || uint64(len(b)-k) < n {
		return c, errors.New("fsm: decode command: bad op length in a version 2 envelope")
	}
	c.Op, b = api.Op(b[k:k+int(n)]), b[k+int(n):]
	ts, k := binary.Varint(b)
	if k <= 0 {
		return c, errors.New("fsm: decode command: bad timestamp in a version 2 envelope")
	}
	// The body is validated once, by the op's own decoder.
	c.TS, c.Body = ts, b[k:]
	return c, nil
}

// validator is a command body that checks itself (a *FieldError on bad input).
type validator interface{ Validate() error }

// decodeCommand is the first step of an apply function: it decodes an
// entry's JSON body into cmd and checks it, so every op refuses bad input
// the same way, before it writes anything. Errors are "fsm: apply OP:
// decode: ..." or "fsm: apply OP: <the *FieldError>".
func decodeCommand(op api.Op, body []byte, cmd validator) error {
	if err := json.Unmarshal(body, cmd); err != nil {
		return fmt.Errorf("fsm: apply %s: decode: %w", op, err)
	}
	if err := cmd.Validate(); err != nil {
		return fmt.Errorf("fsm: apply %s: %w", op, err)
	}
	return nil
}
