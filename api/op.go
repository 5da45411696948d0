package api

// Op names a command type. Each op has one file in this package holding its
// body type and its apply function, and one entry in the registry.
type Op string

// The ops of the log.
const (
	// OpSend stores a message (body: SendCommand).
	OpSend Op = "send"
	// OpRegisterNode records a node's API address (body: RegisterNodeCommand).
	OpRegisterNode Op = "register_node"
	// OpNoop changes nothing (body: {}). A leader proposes one after it
	// applied a write and holds nothing newer, so that its AppendEntries
	// tells the followers the write is committed (cluster/commitpush.go).
	// A build that does not know it skips it as an unknown op, which
	// leaves the state exactly as applying it does.
	OpNoop Op = "noop"
)
