package transport

import (
	"context"
	"encoding/json"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// The handlers' view of the node they serve, in four small consumer-side
// interfaces (in the style of rqlite's http.Store and http.Cluster): a
// Proposer for writes and linearizable reads, a Reader for the node's own
// state, Membership for the cluster and its administration, and a
// PresenceStore for agent presence. cluster.Node implements them;
// transporttest.Service is the fake the tests serve through.
//
// Every write is an fsm command through Proposer.Apply and every read goes
// through Reader after Proposer.Linearize, so a new endpoint is an fsm op
// or query and a route: no method here or in cluster grows with it (a new
// query is one line in Reader, which *fsm.FSM already implements).

// Proposer puts commands into the replicated log and makes local reads
// linearizable. Methods return the sentinel errors of this package and of
// fsm (ErrNotFound, ErrConflict, ErrInvalid, ErrNotLeader...) for the
// handlers to map to status codes.
type Proposer interface {
	// Apply proposes one command (fsm.Encode's op and body) through Raft
	// and returns the state machine's result as JSON. A follower forwards
	// it to the leader as the encoded entry (ApplyEntry there), unless ctx
	// is marked forwarded (IsForwarded). The handler has validated body;
	// apply validates it again.
	Apply(ctx context.Context, op api.Op, body any) (json.RawMessage, error)
	// ApplyEntry commits an entry a follower already encoded (fsm.Encode)
	// and returns the state machine's result as JSON: the leader's half of
	// a forwarded Apply. A non-leader answers ErrNotLeader.
	ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error)
	// ApplyEntries commits a batch of entries a follower encoded and
	// forwarded in one request, and returns one outcome per entry, in
	// order: one entry's error (a refusal, or a failure to commit that
	// leaves its outcome unknown) fails that entry only. The error return
	// is for the whole batch (ErrNotLeader on a non-leader), when no entry
	// was proposed.
	ApplyEntries(ctx context.Context, entries [][]byte) ([]api.EntryOutcome, error)
	// Linearize returns, for Strong, once this node's state holds every
	// entry committed before the call (a follower asks the leader for its
	// read index and waits to apply it); for Local at once.
	Linearize(ctx context.Context, c api.Consistency) error
	// ReadIndex is the leader's half of Linearize: it confirms leadership
	// with a quorum and returns the commit index. ErrNotLeader elsewhere.
	ReadIndex(ctx context.Context) (uint64, error)
}

// Reader is the node's own replicated state as the handlers read it,
// after Proposer.Linearize: the queries of *fsm.FSM they use, and nothing
// that changes the state. Each method is the fsm.FSM method of the same
// name (see there for shapes and errors). It is the sum of small readers,
// one per resource, so a part of the server that needs one resource (the
// token check, the stream) holds only that one.
type Reader interface {
	MailboxReader
	AgentReader
	CoordinationReader
	RulesReader
	TaskReader
	ApprovalReader
	ArtifactReader
	SettingsReader
	TokenReader
	AppliedWatcher
}

// MailboxReader reads messages, channels, threads, receipts and inboxes.
type MailboxReader interface {
	Message(id string) (*api.Message, error)
	MessagesAfter(after uint64, limit int) (api.Page, error)
	ChannelPage(channel string, after uint64, limit int) (api.Page, error)
	Channels() ([]api.ChannelInfo, error)
	Thread(id string, after uint64, limit int) (api.ThreadPage, error)
	Receipts(id string) (api.Receipts, error)
	Inbox(agent string, q api.InboxQuery) (api.InboxPage, error)
	InboxCounts(agent string) (api.InboxCounts, error)
	OverviewFor(viewer *api.Viewer, channel string, after uint64, limit int) (api.OverviewPage, error)
}

// AgentReader reads the registry and what a watcher keeps per agent: its
// cursor, its lease, its delivery policies.
type AgentReader interface {
	Agent(id string) (*api.Agent, error)
	// AgentA2A is agent id's A2A remote with its credential: only the
	// admin-only GET /v1/agents/{id}/a2a reads it.
	AgentA2A(id string) (*api.A2ARemote, error)
	Agents(q api.AgentQuery) (api.AgentPage, error)
	Roles() (map[string]uint64, error)
	CursorOf(agent string) (api.Cursor, error)
	AgentLeaseOf(agent string) (*api.AgentLease, error)
	AgentLeases() (api.AgentLeasePage, error)
	Policies(agent string, now time.Time) (api.PolicySet, error)
}

// CoordinationReader reads the bulletin and the locks.
type CoordinationReader interface {
	Bulletin() (api.Bulletin, error)
	Locks(q api.LockQuery) (api.LockPage, error)
	CheckLock(path string, token uint64) (api.LockCheck, error)
}

// RulesReader reads the communication rules and the audit trail.
type RulesReader interface {
	Rules() (api.RulesState, error)
	CheckRules(from, fromRole, to, toRole string) (api.RulesCheck, error)
	CheckInterrupt(from, fromRole string) (api.RulesCheck, error)
	Audit(after uint64, limit int) (fsm.AuditPage, error)
}

// TaskReader reads tasks and the task events the stream carries.
type TaskReader interface {
	Task(id string) (*api.Task, error)
	Tasks(q api.TaskQuery) (api.TaskPage, error)
	TaskEvents(after uint64, limit int) (api.TaskUpdatePage, error)
	// PushConfigs is a task's push configs without credentials, for the
	// task's creator, a moderator or nil (else not found).
	PushConfigs(task string, v *api.Viewer) (api.PushConfigPage, error)
	// PushConfigsWithCredentials is the deliverer's read (admin only).
	PushConfigsWithCredentials(task string) (api.PushConfigPage, error)
	// PushCursor is the deliverer's replicated cursor.
	PushCursor() (api.PushCursor, error)
}

// ApprovalReader reads approvals and the approval events the stream
// carries.
type ApprovalReader interface {
	Approval(id string) (*api.Approval, error)
	Approvals(q api.ApprovalQuery) (api.ApprovalPage, error)
	PendingApprovalsFor(agent string) (int, error)
	ApprovalEvents(after uint64, limit int) (api.ApprovalUpdatePage, error)
}

// ArtifactReader reads artifacts' records.
type ArtifactReader interface {
	// ArtifactFor is an artifact's record as viewer reads it: one it may
	// not read is not found (fsm's canReadArtifact, beside the messages'
	// visibility rule).
	ArtifactFor(id string, viewer *api.Viewer) (*api.Artifact, error)
	Artifacts(q api.ArtifactQuery) (api.ArtifactPage, error)
	ArtifactUsage(agent string) (used, quota int64, err error)
}

// SettingsReader reads the cluster's identity and settings.
type SettingsReader interface {
	// ClusterID is the cluster's id (api.OpClusterID), "" until this node
	// applied it; requests of nodes of another cluster are refused
	// (HeaderCluster).
	ClusterID() string
	Config() (api.ClusterConfig, error)
	RetentionOf(channel string) (api.Retention, error)
}

// TokenReader reads the API tokens: what the token check needs.
type TokenReader interface {
	Tokens() ([]api.Token, error)
	TokenByHash(hash string) (*api.Token, error)
}

// AppliedWatcher is what a stream needs to wait for the state to move.
type AppliedWatcher interface {
	// Changed is closed after the next applied batch: streams wait on it.
	Changed() <-chan struct{}
	// AppliedIndex is the index of the last applied entry, stored after
	// its batch committed: a stream that reads messages and task events
	// apart goes no further than the index it read first, so the two reads
	// agree.
	AppliedIndex() uint64
}

var _ Reader = (*fsm.FSM)(nil)

// Membership is the Raft cluster as this node sees it, its
// administration, and the gossip members.
type Membership interface {
	Status(ctx context.Context) (api.Status, error)
	// Ready returns nil when the node has a known leader and has applied
	// what it knows to be committed; otherwise an error saying why not.
	Ready(ctx context.Context) error
	// Join adds a voter and records its API address (forwarded to the
	// leader from a follower, as Apply is).
	Join(ctx context.Context, req api.JoinRequest) error
	Remove(ctx context.Context, nodeID string) error
	Snapshot(ctx context.Context) (api.SnapshotResponse, error)
	TransferLeadership(ctx context.Context, to string) (api.TransferResponse, error)
	// Members lists the gossip members this node knows of.
	Members(ctx context.Context) (api.MembersResponse, error)
}

// Backend is what NewServer serves: the four parts, from one value.
// cluster.Node implements it. The server keeps the parts apart, and each
// handler uses only the part it needs.
type Backend interface {
	Proposer
	Membership
	PresenceStore
	// State is the node's own state machine, read-only, for reads after
	// Linearize. It is asked once, when the server is made.
	State() Reader
}

// PresenceStore is agent presence: soft state carried by gossip, answered
// by the node a request reaches, never in the Raft log.
type PresenceStore interface {
	// PutPresence records a heartbeat of agent, accepted by this node, and
	// gossips it: u is normalized and validated by the handler; a
	// *api.FieldError (node, timestamp) or an error wrapping
	// ErrConflict (an explicit timestamp older than the recorded one)
	// refuses it.
	PutPresence(ctx context.Context, agent string, u api.PresenceUpdate) (api.Presence, error)
	// Presence lists every agent this node knows of, sorted by id, as seen
	// now: an AWAKE agent whose heartbeat lapsed or whose node is dead or
	// left shows OFFLINE with the reason.
	Presence(ctx context.Context) ([]api.Presence, error)
	// AgentPresence is one agent's entry of Presence; api.ErrNotFound if
	// the node has no record of it.
	AgentPresence(ctx context.Context, agent string) (api.Presence, error)
}
