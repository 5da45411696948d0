// Package api is maos's vocabulary: the types a client of the HTTP API and
// the server share, with no storage behind them. It holds the message
// (Message, ids, names, priorities, visibility, replies and threads), every
// command body that travels in a Raft entry (SendCommand, TaskCreateCommand,
// ApprovalDecideCommand, ...) with its Normalize and Validate and the free
// text it declares (FreeText), the ops that name them (Op), the queries and
// the pages and results the API answers with, durations as the API spells
// them, and the error values a client branches on (ErrInvalid, ErrNotFound,
// ErrConflict, ErrForbidden, ErrFenced; *FieldError names the field).
//
// Nothing here reads a clock, a disk or the network: fsm applies these
// commands to its bbolt state, transport serves them, and clients (maosctl,
// watchers, the MCP server, bench, the bridge) build them. So a client links
// neither bbolt, Raft nor the secret scanner to get a Message.
package api
