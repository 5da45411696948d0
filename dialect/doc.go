// Package dialect maps the message formats of the seeds' file-based
// systems onto api.Message: seed 000's mailbox messages (content a
// string), seed 001's channel files (session_id, content{text, code,
// artifacts}), seed 002's ADR-008 messages (subject, body, context) and
// seed 004's orchestrator messages (message_type, message_id,
// from_agent, to_agent; the rest kept under metadata). Seed 004's
// task_delegation and task_completion map onto task commands instead
// (MapTask), for the API to create and complete tasks.
//
// It is the one mapping behind both ways such a message enters maos:
// maosctl import reads files (package bridge supplies the file's Place)
// and POST /v1/messages accepts the same JSON from a live agent (package
// transport, when Is says the body is a dialect). It is pure: no I/O, no
// state; it imports fsm for the message type and its checks.
package dialect
