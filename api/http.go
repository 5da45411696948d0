package api

import (
	"errors"
	"strings"
	"time"
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
	ID        string             `json:"id"`
	Seq       uint64             `json:"seq"`
	Timestamp time.Time          `json:"timestamp"`
	Blocked   []BlockedRecipient `json:"blocked,omitempty"`
}

// ChannelsResponse is the body of GET /v1/channels.
type ChannelsResponse struct {
	Channels []ChannelInfo `json:"channels"`
}

// Voter is one server of the Raft configuration.
type Voter struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr,omitempty"` // empty until the node registered
	Suffrage string `json:"suffrage"`           // "voter", "nonvoter", "staging"
	// Reach is whether the answering node hears from this voter (one of
	// the Reach… values); Via says how it knows (ViaRaft: the leader's
	// heartbeats to a follower, a follower's last contact with its
	// leader; ViaGossip: its membership view), LastContact when it last
	// heard from it (for gossip, when it was declared dead or left), zero
	// when it cannot say.
	Reach       string    `json:"reach,omitempty"`
	Via         string    `json:"via,omitempty"`
	LastContact time.Time `json:"last_contact,omitzero"`
}

// The values of Voter.Reach and Voter.Via.
const (
	ReachSelf        = "self"
	ReachReachable   = "reachable"
	ReachUnreachable = "unreachable"
	ReachUnknown     = "unknown"

	ViaRaft   = "raft"
	ViaGossip = "gossip"
)

// Status is the body of GET /v1/cluster/status: this node's view.
type Status struct {
	NodeID string `json:"node_id"`
	// Version is the node's build version, as its --version prints it.
	Version string `json:"version,omitempty"`
	// ClusterID is the cluster's id (OpClusterID), fixed at bootstrap;
	// "" until this node applied it.
	ClusterID string `json:"cluster_id,omitempty"`
	// ClusterIDs says the node's build applies cluster ids
	// (OpClusterID): a leader fixes the id only once every voter
	// says so, so no node of an older build skips the entry.
	ClusterIDs bool `json:"cluster_ids,omitempty"`
	// StateVersion is the highest state-machine version this node's build
	// applies (fsm.MaxStateVersion); absent (0) from a build before
	// versions, which applies version 1 only. The leader raises the
	// cluster's version to the lowest of its servers' (OpClusterVersion).
	StateVersion int `json:"state_version,omitempty"`
	// ClusterVersion is the cluster's committed state version as this
	// node applied it: 1 until the leader committed a higher one; absent
	// (0) from a build before versions. An op that needs a higher version
	// is refused (ClusterVersionError) until every voter is upgraded.
	ClusterVersion int    `json:"cluster_version,omitempty"`
	State          string `json:"state"` // leader, follower, candidate, shutdown
	LeaderID       string `json:"leader_id"`
	LeaderAPIAddr  string `json:"leader_api_addr"`
	Term           uint64 `json:"term"`
	// CommitIndex is the highest log index this node knows committed: at
	// least its AppliedIndex (only committed entries are applied), since
	// raft's own value starts at 0 after a restart until the leader tells
	// it more.
	CommitIndex  uint64  `json:"commit_index"`
	AppliedIndex uint64  `json:"applied_index"`
	LastIndex    uint64  `json:"last_index"`
	APIAddr      string  `json:"api_addr"`
	RaftAddr     string  `json:"raft_addr"`
	Voters       []Voter `json:"voters"`
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
	// StateVersion is the highest state-machine version the joining
	// node's build applies (0 from a build before versions: 1). The
	// leader refuses a node whose build cannot apply the cluster's
	// committed version.
	StateVersion int `json:"state_version,omitempty"`
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

// HeaderCluster carries the calling node's cluster id (OpClusterID) on
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
	Agent            string      `json:"agent"`
	HasInbox         bool        `json:"has_inbox"`
	Counts           InboxCounts `json:"counts"`
	PendingApprovals int         `json:"pending_approvals"`
	Bulletin         Bulletin    `json:"bulletin"`
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

// RolesResponse is the body of GET /v1/roles: the role summary.
type RolesResponse struct {
	Roles map[string]uint64 `json:"roles"`
}

// MarkReadRequest is the body of POST /v1/agents/{id}/read: one message
// by id, or every message up to and including seq upto. Exactly one is
// given.
type MarkReadRequest struct {
	ID   string `json:"id,omitempty"`
	Upto uint64 `json:"upto,omitempty"`
}

// ReceiptStateRequest is the body of PUT /v1/agents/{id}/receipts/{msg}:
// what the agent's watcher did with message msg (ReceiptStateCommand:
// queued, delivered or interrupted).
type ReceiptStateRequest struct {
	State string `json:"state"`
}

// AuditEntry is one event of the audit trail with its line in the seed
// format: "[2025-10-20T14:30:00Z] [orchestrator→triage] TASK_ASSIGN: Triage new issue #123".
type AuditEntry struct {
	AuditEvent
	Line string `json:"line"`
}

// AuditResponse is the body of GET /v1/audit: events with seq > after,
// oldest first.
type AuditResponse struct {
	Events  []AuditEntry `json:"events"`
	HasMore bool         `json:"has_more"`
}

// RulesCheckRequest is the body of POST /v1/rules/check: may From message
// To, or, with Interrupt (and no To), may From interrupt an agent?
// FromRole and ToRole, when given, replace the registered roles ("what
// if").
type RulesCheckRequest struct {
	From      string `json:"from"`
	To        string `json:"to,omitempty"`
	FromRole  string `json:"from_role,omitempty"`
	ToRole    string `json:"to_role,omitempty"`
	Interrupt bool   `json:"interrupt,omitempty"`
}

// Validate checks the ids and roles are names, and that a check names a
// recipient or asks about interrupting, not both.
func (q *RulesCheckRequest) Validate() error {
	if q.Interrupt && (q.To != "" || q.ToRole != "") {
		return &FieldError{Field: "interrupt", Reason: "asks who may interrupt any agent: leave to and to_role out"}
	}
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"from", q.From, true}, {"to", q.To, !q.Interrupt}, {"from_role", q.FromRole, false}, {"to_role", q.ToRole, false}} {
		switch {
		case f.v == "" && f.required:
			return &FieldError{Field: f.name, Reason: "required: an agent id"}
		case f.v != "" && !ValidName(f.v):
			return NameError(f.name, f.v)
		}
	}
	return nil
}

// PolicyRequest is the body of PUT /v1/agents/{id}/policy.
type PolicyRequest struct {
	// Mode is one of PolicyModes.
	Mode string `json:"mode"`
	// From makes it a per-sender override: mail from that agent only.
	From string `json:"from,omitempty"`
	// ForSeconds ends it that long after it commits (at most
	// MaxPolicyFor); 0: until cleared.
	ForSeconds int64 `json:"for_seconds,omitempty"`
	// SetBy names who set it when the token names no agent (an admin
	// token, or a node without auth); default the agent itself. An
	// agent's token always sets its own name.
	SetBy string `json:"set_by,omitempty"`
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	Agent string `json:"agent"`
	// Role is TokenRoleAgent (the default when empty),
	// TokenRoleModerator or TokenRoleAdmin.
	Role string `json:"role,omitempty"`
	// AgentRole and Capabilities are what the token's agent (and its
	// forks) may register itself with (Token): without them it
	// registers with the default role and no capability.
	AgentRole    string   `json:"agent_role,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// TokenCreated is the answer to POST /v1/tokens. Token is the secret to
// send as Authorization: Bearer; it is not stored and cannot be shown
// again.
type TokenCreated struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	Role  string `json:"role"`
	// AgentRole and Capabilities: the token's grant (TokenRequest).
	AgentRole    string    `json:"agent_role,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	Token        string    `json:"token"`
}

// TokensResponse is the body of GET /v1/tokens.
type TokensResponse struct {
	Tokens []Token `json:"tokens"`
}

// BulletinConflictBody is the 409 answer to a compare-and-set that lost:
// Version is the bulletin's current version.
type BulletinConflictBody struct {
	Error   *APIError `json:"error"`
	Version uint64    `json:"version"`
}

// LockConflictBody is the 409 answer to a refused lock command. Outcome is
// one of LockHeld, LockLapsed ("expired"), LockNotHolder,
// LockStaleToken; Lock is the lock as it stands (its holder, token and
// expiry).
type LockConflictBody struct {
	Error   *APIError `json:"error"`
	Outcome string    `json:"outcome"`
	Lock    *Lock     `json:"lock,omitempty"`
}

// InterruptRequest is the body of POST /v1/agents/{id}/interrupt.
type InterruptRequest struct {
	// From is the interrupting agent (the token's own, with --auth).
	From string `json:"from"`
	// Reason says why: the alert's text is "[INTERRUPT] " and Reason.
	Reason string `json:"reason"`
	// Channel is where the alert is posted; default the channel of the
	// agent's presence.
	Channel string `json:"channel,omitempty"`
	// ID is the alert's id, fixed by the caller before its first attempt so
	// that a retry stores the alert once; generated when empty.
	ID string `json:"id,omitempty"`
	// LocalPane says the caller presses ESC in a pane of its own (maosctl
	// interrupt --tmux-target): the node posts the alert only.
	LocalPane bool `json:"local_pane,omitempty"`
}

// Validate checks the request for agent (the path's id): names, a reason,
// a channel and an id if given, and that nobody interrupts itself.
func (q *InterruptRequest) Validate(agent string) error {
	q.Reason = strings.TrimSpace(q.Reason)
	switch {
	case !ValidName(agent):
		return NameError("id", agent)
	case q.From == "":
		return &FieldError{Field: "from", Reason: "required: the interrupting agent"}
	case !ValidName(q.From):
		return NameError("from", q.From)
	case q.From == agent:
		return &FieldError{Field: "from", Reason: "is the agent to interrupt: an agent cannot interrupt itself"}
	case q.Reason == "":
		return &FieldError{Field: "reason", Reason: "required: why the agent must stop"}
	case q.Channel != "" && !ValidName(q.Channel):
		return NameError("channel", q.Channel)
	}
	return nil
}

// ArtifactUpload describes an upload: the name to fetch it as (required),
// its media type (default DefaultArtifactContentType) and the
// uploading agent (default: the token's agent).
type ArtifactUpload struct {
	Name        string
	ContentType string
	From        string
}

// BulletinWrite are the options of a bulletin PUT or PATCH.
type BulletinWrite struct {
	// IfVersion makes the write conditional (sent as If-Match): it applies
	// only if the bulletin is still at that version, 0 meaning never
	// written. nil writes unconditionally.
	IfVersion *uint64
	// By names the writer for the audit trail (an agent id), optional.
	By string
}

// RetryAfter returns how long a rate-limited call (errors.Is(err,
// ErrRateLimited)) asks its caller to wait, from the answer's Retry-After
// header; 0 if err says nothing about it.
func RetryAfter(err error) time.Duration {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.RetryAfter
	}
	return 0
}

// InterruptResponse is the answer of an interrupt whose alert committed:
// the alert's place in the log (ID, Seq, Timestamp), the node presence
// places the agent on ("" without presence), and whether ESC reached the
// agent's pane; when not, NoEscape says why (no presence, no pane on the
// node, LocalPane).
type InterruptResponse struct {
	Agent     string    `json:"agent"`
	Node      string    `json:"node,omitempty"`
	ID        string    `json:"id,omitempty"`
	Seq       uint64    `json:"seq,omitempty"`
	Timestamp time.Time `json:"timestamp,omitzero"`
	Escape    bool      `json:"escape"`
	NoEscape  string    `json:"no_escape,omitempty"`
}
