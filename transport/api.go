package transport

import (
	"time"

	"github.com/maos-project/maos/api"
)

// Consistency is a read's level: Local (the default) answers from the
// node's own state, possibly a few entries behind; Strong answers only after
// the leader confirmed it still leads and its state holds every entry
// committed before the read began.
type Consistency string

// Read levels, as given in ?consistency=.
const (
	Local  Consistency = "local"
	Strong Consistency = "strong"
)

// SendResponse is the body of a committed POST /v1/messages. Blocked
// lists the resolved recipients the communication rules kept the message
// from; the others got it. (When the rules block every recipient the send
// fails with 403 instead.)
type SendResponse struct {
	ID        string                 `json:"id"`
	Seq       uint64                 `json:"seq"`
	Timestamp time.Time              `json:"timestamp"`
	Blocked   []api.BlockedRecipient `json:"blocked,omitempty"`
}

// ChannelsResponse is the body of GET /v1/channels.
type ChannelsResponse struct {
	Channels []api.ChannelInfo `json:"channels"`
}

// Voter is one server of the Raft configuration.
type Voter struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr,omitempty"` // empty until the node registered
	Suffrage string `json:"suffrage"`           // "voter", "nonvoter", "staging"
}

// Status is the body of GET /v1/cluster/status: this node's view.
type Status struct {
	NodeID string `json:"node_id"`
	// ClusterID is the cluster's id (api.OpClusterID), fixed at bootstrap;
	// "" until this node applied it.
	ClusterID string `json:"cluster_id,omitempty"`
	// ClusterIDs says the node's build applies cluster ids
	// (api.OpClusterID): a leader fixes the id only once every voter
	// says so, so no node of an older build skips the entry.
	ClusterIDs    bool    `json:"cluster_ids,omitempty"`
	State         string  `json:"state"` // leader, follower, candidate, shutdown
	LeaderID      string  `json:"leader_id"`
	LeaderAPIAddr string  `json:"leader_api_addr"`
	Term          uint64  `json:"term"`
	CommitIndex   uint64  `json:"commit_index"`
	AppliedIndex  uint64  `json:"applied_index"`
	LastIndex     uint64  `json:"last_index"`
	APIAddr       string  `json:"api_addr"`
	RaftAddr      string  `json:"raft_addr"`
	Voters        []Voter `json:"voters"`
	// GossipAddr is the node's advertised memberlist address ("" when it
	// runs without gossip): a node joining through this node's API joins
	// gossip there. GossipEncrypted says whether that gossip needs a key.
	GossipAddr      string `json:"gossip_addr,omitempty"`
	GossipEncrypted bool   `json:"gossip_encrypted,omitempty"`
}

// JoinRequest is the body of POST /v1/cluster/join: the server to add as a
// voter. Any node accepts it and forwards it to the leader.
type JoinRequest struct {
	NodeID   string `json:"node_id"`
	RaftAddr string `json:"raft_addr"` // advertised host:port of its Raft transport
	APIAddr  string `json:"api_addr"`  // advertised host:port of its HTTP API
	// Replace says the node takes the place of the voter that has its id
	// (or its Raft address) on purpose: a dead node rebuilt with a new data
	// dir. Without it such a join is refused (409); with it, it is still
	// refused while the old voter's Raft address answers.
	Replace bool `json:"replace,omitempty"`
}

// SnapshotResponse is the body of POST /v1/cluster/snapshot.
type SnapshotResponse struct {
	NodeID string `json:"node_id"`
	ID     string `json:"id"`    // snapshot id in the node's snapshot store
	Index  uint64 `json:"index"` // last Raft index the snapshot covers
	Term   uint64 `json:"term"`
}

// TransferRequest is the body of POST /v1/cluster/transfer-leadership. An
// empty NodeID lets raft pick the most up-to-date follower.
type TransferRequest struct {
	NodeID string `json:"node_id,omitempty"`
}

// TransferResponse reports the leader after a transfer.
type TransferResponse struct {
	LeaderID string `json:"leader_id"`
}

// ReadIndexResponse is the body of GET /v1/internal/read-index.
type ReadIndexResponse struct {
	Index uint64 `json:"index"`
}

// HeaderForwarded marks a request forwarded by a node.
const HeaderForwarded = "X-Maos-Forwarded"

// HeaderCluster carries the calling node's cluster id (api.OpClusterID) on
// every call a node makes to another (Client.WithCluster): a node whose
// cluster id is another refuses the request (409), so a node started on
// another cluster's data dir, or pointed at another cluster, cannot act in
// this one. A request without it (clients, a node that has not applied
// its cluster's id yet) is not checked.
const HeaderCluster = "X-Maos-Cluster"

// AgentSummary is the body of GET /v1/agents/{id}/summary: what a status
// line shows, read in one request. HasInbox is false (and Counts zero) for
// an agent that never registered nor received mail. PendingApprovals is
// how many pending approvals the agent may decide and has not decided
// (fsm.FSM.PendingApprovalsFor).
type AgentSummary struct {
	Agent            string          `json:"agent"`
	HasInbox         bool            `json:"has_inbox"`
	Counts           api.InboxCounts `json:"counts"`
	PendingApprovals int             `json:"pending_approvals"`
	Bulletin         api.Bulletin    `json:"bulletin"`
}

// WhoAmI is the body of GET /v1/whoami: whether the node authenticates,
// and if so the agent, role and token id of the request's bearer token
// (Agent "" for the admin bootstrap token).
type WhoAmI struct {
	Auth    bool   `json:"auth"`
	Agent   string `json:"agent,omitempty"`
	Role    Role   `json:"role,omitempty"`
	TokenID string `json:"token_id,omitempty"`
}

// MaySpeakFor reports whether this identity may act as agent: auth is off,
// or Identity.ActsAs (the token is agent's or agent's parent's, or an
// admin token).
func (w WhoAmI) MaySpeakFor(agent string) bool {
	return !w.Auth || ActsAs(w.Agent, w.Role, agent)
}
