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
)
