// Package cluster is one maos node: the Raft setup (raft-boltdb/v2 log and
// stable store, file snapshot store, TCP transport), the node's lifecycle
// (Open, Bootstrap, JoinVia, Remove, TransferLeadership, Snapshot, Close),
// and the "answer locally or forward to the leader" path every write and
// every strong read takes.
//
// A Node implements transport.Backend, what the API serves: a proposer, a
// read-only view of its state, membership and presence. Writes go through
// Raft on the leader; a follower forwards them to the leader's HTTP API,
// found through the replicated node registry (api.OpRegisterNode), and
// retries through an election with bounded backoff. Because a message id is fixed before the
// first attempt and apply deduplicates by id, every retry is safe; when the
// retries run out the caller gets api.ErrOutcomeUnknown.
//
// With Config.GossipAddr set, a node also runs memberlist: gossip
// membership with each node's API and Raft addresses as metadata, and agent
// presence as soft state disseminated over it, never written to the log
// (gossip.go, presence.go; see DESIGN.md).
package cluster
