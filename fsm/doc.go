// Package fsm is maos's replicated state machine: the envelope of the
// commands that travel through the Raft log (their bodies are package
// api's), their deterministic application to an on-disk bbolt state, the
// queries served from that state, and snapshot/restore.
//
// The model: every write is one Raft log entry holding a versioned Command
// envelope {v, op, ts, body} (version 2 is binary: op and ts before the
// body's JSON; see Encode). The proposing node stamps ts; Apply never reads
// the local clock, random numbers or anything outside the entry and the
// state, so every node that applies the same entries holds the same state.
// A message's seq is the Raft index of the entry that stored it, which gives
// the cluster one total order.
//
// The state is a bbolt file written once per applied batch, with the last
// applied index in the same transaction. On restart the node keeps that file
// (raft's NoSnapshotRestoreOnStart) and Apply skips every entry at or below
// the stored index, because hashicorp/raft replays the log after its last
// snapshot. Indexes (by id, by channel) are written at apply time, so every
// query costs the page it returns, not the log.
package fsm
