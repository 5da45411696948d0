package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Agent presence states and substates: the heartbeat format agent farms
// use ({"agent_id","timestamp","state","substate","watcher_pid","channel"}).
const (
	PresenceAwake   = "AWAKE"
	PresenceOffline = "OFFLINE"

	SubstateIdle    = "IDLE"
	SubstateWorking = "WORKING"
	SubstateBlocked = "BLOCKED"
)

// Where an AWAKE agent's substate came from (Presence.Source), highest
// precedence first (cluster/DESIGN.md, "Presence sources"): the agent's own
// coding-agent hooks at its turn's edges, its watcher's reading of its tmux
// pane, its watcher's own runs. "" is a heartbeat that does not say (an
// agent's own, or an older watcher's) and ranks with watcher.
const (
	SourceHook    = "hook"
	SourcePane    = "pane"
	SourceWatcher = "watcher"
)

// SourceRank orders the sources: a report of lower rank does not change a
// substate that one of higher rank set. Unknown sources rank 0.
func SourceRank(source string) int {
	switch source {
	case SourceHook:
		return 3
	case SourcePane:
		return 2
	case SourceWatcher, "":
		return 1
	}
	return 0
}

// Presence limits. A record travels in one UDP gossip packet (memberlist's
// 1400 bytes, less its own headers), so its JSON form is capped at
// MaxPresenceWire bytes; the field caps keep an ordinary record far below.
const (
	MaxPresenceTask      = 256  // bytes of Presence.Task
	MaxPresenceReason    = 128  // bytes of Presence.Reason
	MaxPresenceLastError = 128  // bytes of AgentHealth.LastError
	MaxPresenceWire      = 1000 // bytes of one record's JSON on the gossip wire
	// MaxPresenceAhead is how far in the future a heartbeat's own
	// timestamp may be, to allow for clock skew between hosts.
	MaxPresenceAhead = time.Minute
)

// Presence is one agent's presence record as every node holds it.
//
// Records are soft state gossiped between nodes, never written to the Raft
// log. Which of two records of an agent is newer is decided by (Version,
// Origin), not by Timestamp: Version is a hybrid logical clock (Unix
// microseconds of the writing node, pushed past every version that node
// has seen), so an update made after a node saw another one always wins,
// whatever the hosts' clocks say, and concurrent ones are ordered the same
// way on every node.
type Presence struct {
	AgentID  string `json:"agent_id"`
	Node     string `json:"node"`               // node that accepted the agent's heartbeat
	State    string `json:"state"`              // AWAKE or OFFLINE
	Substate string `json:"substate,omitempty"` // IDLE, WORKING or BLOCKED while AWAKE
	// Source is where Substate came from: hook, pane or watcher ("" when
	// the heartbeat did not say; records gossiped by older nodes lack it).
	Source  string `json:"source,omitempty"`
	Channel string `json:"channel,omitempty"`
	PID     int    `json:"pid,omitempty"` // the agent's (or its watcher's) process id
	Task    string `json:"task,omitempty"`
	// Reason says why an agent is OFFLINE: "heartbeat lapsed", "node n2
	// dead", "node n2 left", or what the agent itself said.
	Reason string `json:"reason,omitempty"`
	// AgentHealth is what the agent's watcher reports of its tasks.
	AgentHealth
	// Timestamp is the last heartbeat: when the node accepted it, or the
	// heartbeat's own timestamp if it carried one.
	Timestamp time.Time `json:"timestamp"`
	Version   uint64    `json:"version"`
	Origin    string    `json:"origin"` // node that wrote this version
	// ServedBy and Standby come from the agent's lease in the replicated
	// state (AgentLease), not from gossip: the node whose watcher
	// serves the agent ("" when no live lease) and the nodes whose
	// watchers stand by to take over (JSON: an array of node ids in id
	// order). The API sets them on each answer.
	ServedBy string  `json:"served_by,omitempty"`
	Standby  NodeIDs `json:"standby,omitempty"`
}

// NodeIDs is a list of node ids held as one comma-separated string ("n2,n3"),
// so that Presence stays comparable with ==; its JSON form is an array of
// ids (["n2","n3"]). Node ids never hold a comma (ValidName).
type NodeIDs string

// JoinNodeIDs makes a NodeIDs of ids, in the order given.
func JoinNodeIDs(ids []string) NodeIDs { return NodeIDs(strings.Join(ids, ",")) }

// List is the ids, nil when there are none.
func (n NodeIDs) List() []string {
	if n == "" {
		return nil
	}
	return strings.Split(string(n), ",")
}

// MarshalJSON writes the ids as a JSON array.
func (n NodeIDs) MarshalJSON() ([]byte, error) {
	l := n.List()
	if l == nil {
		l = []string{}
	}
	return json.Marshal(l)
}

// UnmarshalJSON reads a JSON array of ids (null: none).
func (n *NodeIDs) UnmarshalJSON(b []byte) error {
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("standby: want an array of node ids: %w", err)
	}
	*n = JoinNodeIDs(l)
	return nil
}

// AgentHealth is seed 004's agent_health_check as a watcher reports it in
// each heartbeat of its agent: counts since the watcher started, the last
// task error (one line, at most MaxPresenceLastError bytes) and the mean
// run time of the finished tasks in milliseconds. A heartbeat without them
// (an agent with no watcher) leaves them zero.
type AgentHealth struct {
	TasksRunning   int    `json:"tasks_running,omitempty"`
	TasksSucceeded int    `json:"tasks_succeeded,omitempty"`
	TasksFailed    int    `json:"tasks_failed,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	MeanDurationMS int64  `json:"mean_duration_ms,omitempty"`
}

// validate checks the counts are not negative and the error is one line.
func (h *AgentHealth) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"tasks_running", int64(h.TasksRunning)}, {"tasks_succeeded", int64(h.TasksSucceeded)},
		{"tasks_failed", int64(h.TasksFailed)}, {"mean_duration_ms", h.MeanDurationMS}} {
		if f.v < 0 {
			return &FieldError{Field: f.name, Reason: fmt.Sprintf("%d is negative", f.v)}
		}
	}
	if reason := checkLine(h.LastError, MaxPresenceLastError); reason != "" {
		return &FieldError{Field: "last_error", Reason: reason}
	}
	return nil
}

// Agent health statuses (seed 004 agent_health_check "status").
const (
	HealthHealthy  = "healthy"
	HealthDegraded = "degraded"
	HealthError    = "error"
)

// HealthReport is the body of GET /v1/agents/{id}/health: the agent's
// presence and its watcher's task counts, with a status in seed 004's
// words and the share of finished tasks that failed.
type HealthReport struct {
	AgentID  string `json:"agent_id"`
	Status   string `json:"status"` // healthy, degraded or error (Presence.Health says when)
	State    string `json:"state"`
	Substate string `json:"substate,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Node     string `json:"node"`
	Task     string `json:"task,omitempty"`
	AgentHealth
	// ErrorRatePercentage is tasks_failed of the finished tasks, 0..100.
	ErrorRatePercentage float64   `json:"error_rate_percentage"`
	LastSeen            time.Time `json:"last_seen"`
}

// Health is p's health report: status "error" when the agent is OFFLINE
// (Reason says why; its task counts are gone with its watcher), "degraded" when it is BLOCKED or more of its finished
// tasks failed than succeeded, else "healthy".
func (p *Presence) Health() HealthReport {
	r := HealthReport{AgentID: p.AgentID, Status: HealthHealthy, State: p.State, Substate: p.Substate, Reason: p.Reason,
		Node: p.Node, Task: p.Task, AgentHealth: p.AgentHealth, LastSeen: p.Timestamp}
	if done := p.TasksSucceeded + p.TasksFailed; done > 0 {
		r.ErrorRatePercentage = 100 * float64(p.TasksFailed) / float64(done)
	}
	switch {
	case p.State != PresenceAwake:
		r.Status = HealthError
	case p.Substate == SubstateBlocked || p.TasksFailed > p.TasksSucceeded:
		r.Status = HealthDegraded
	}
	return r
}

// MarkOffline makes p OFFLINE for reason: no substate, and no task health
// (the counts of a watcher that is gone are stale, and an OFFLINE record
// with its reason must still fit a gossip packet).
func (p *Presence) MarkOffline(reason string) {
	p.State, p.Substate, p.Source, p.Reason, p.AgentHealth = PresenceOffline, "", "", reason, AgentHealth{}
}

// Newer reports whether p supersedes q (another record of the same agent).
func (p *Presence) Newer(q *Presence) bool {
	if p.Version != q.Version {
		return p.Version > q.Version
	}
	return p.Origin > q.Origin
}

// PresenceUpdate is the body of PUT /v1/presence/{agent}: a heartbeat. Only
// state is required. agent_id and node may be given as a check (they must
// match the path and the answering node); watcher_pid is the seed format's
// name for pid; tasks_running, tasks_succeeded, tasks_failed, last_error
// and mean_duration_ms are the watcher's AgentHealth; source says where
// the substate came from (hook, pane, watcher; optional).
type PresenceUpdate struct {
	AgentID    string `json:"agent_id,omitempty"`
	Node       string `json:"node,omitempty"`
	State      string `json:"state"`
	Substate   string `json:"substate,omitempty"`
	Source     string `json:"source,omitempty"`
	Channel    string `json:"channel,omitempty"`
	PID        int    `json:"pid,omitempty"`
	WatcherPID int    `json:"watcher_pid,omitempty"`
	Task       string `json:"task,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// AgentHealth is the watcher's report of the agent's tasks.
	AgentHealth
	// Timestamp, if given, is the heartbeat's own time; it may be at most
	// MaxPresenceAhead in the future and no older than the presence TTL.
	// Without it the node stamps the heartbeat with its clock.
	Timestamp *time.Time `json:"timestamp,omitempty"`
}

// Normalize upper-cases state and substate, lower-cases source, takes pid
// from watcher_pid when only that is given, defaults an AWAKE agent's
// substate to IDLE and drops an OFFLINE agent's task health and source (as
// Presence.MarkOffline does).
func (u *PresenceUpdate) Normalize() {
	u.State = strings.ToUpper(strings.TrimSpace(u.State))
	u.Substate = strings.ToUpper(strings.TrimSpace(u.Substate))
	u.Source = strings.ToLower(strings.TrimSpace(u.Source))
	if u.PID == 0 {
		u.PID = u.WatcherPID
	}
	u.WatcherPID = 0
	if u.State == PresenceAwake && u.Substate == "" {
		u.Substate = SubstateIdle
	}
	if u.State == PresenceOffline {
		u.AgentHealth = AgentHealth{}
		u.Source = ""
	}
}

// Validate checks a normalized update for agent (the id in the path),
// naming the field at fault and its limit.
func (u *PresenceUpdate) Validate(agent string) error {
	if !ValidName(agent) {
		return NameError("agent_id", agent)
	}
	if u.AgentID != "" && u.AgentID != agent {
		return &FieldError{Field: "agent_id", Reason: fmt.Sprintf("%q differs from the agent in the path, %q", u.AgentID, agent)}
	}
	if u.Node != "" && !ValidName(u.Node) {
		return NameError("node", u.Node)
	}
	switch u.State {
	case PresenceAwake:
		switch u.Substate {
		case SubstateIdle, SubstateWorking, SubstateBlocked:
		default:
			return &FieldError{Field: "substate", Reason: fmt.Sprintf("%q is not IDLE, WORKING or BLOCKED", u.Substate)}
		}
	case PresenceOffline:
		if u.Substate != "" {
			return &FieldError{Field: "substate", Reason: "an OFFLINE agent has no substate; leave it out"}
		}
	case "":
		return &FieldError{Field: "state", Reason: "required: AWAKE or OFFLINE"}
	default:
		return &FieldError{Field: "state", Reason: fmt.Sprintf("%q is not AWAKE or OFFLINE", u.State)}
	}
	if SourceRank(u.Source) == 0 {
		return &FieldError{Field: "source", Reason: fmt.Sprintf("%q is not hook, pane or watcher (or left out)", u.Source)}
	}
	if u.State == PresenceAwake && u.Reason != "" {
		return &FieldError{Field: "reason", Reason: "only an OFFLINE agent has a reason; leave it out or set state OFFLINE"}
	}
	if u.Channel != "" && !ValidName(u.Channel) {
		return NameError("channel", u.Channel)
	}
	if u.PID < 0 {
		return &FieldError{Field: "pid", Reason: fmt.Sprintf("%d is negative", u.PID)}
	}
	if reason := checkLine(u.Task, MaxPresenceTask); reason != "" {
		return &FieldError{Field: "task", Reason: reason}
	}
	if reason := checkLine(u.Reason, MaxPresenceReason); reason != "" {
		return &FieldError{Field: "reason", Reason: reason}
	}
	return u.AgentHealth.validate()
}

// checkLine returns why s is not one line of printable UTF-8 of at most
// limit bytes, or "".
func checkLine(s string, limit int) string {
	if len(s) > limit {
		return fmt.Sprintf("%d bytes, at most %d", len(s), limit)
	}
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) }); i >= 0 {
		return fmt.Sprintf("control character at byte %d; one line of text only", i)
	}
	return ""
}

// PresenceResponse is the body of GET /v1/presence.
type PresenceResponse struct {
	Agents []Presence `json:"agents"`
}

// Member is one node of the gossip membership, with the metadata it
// gossips.
type Member struct {
	NodeID     string `json:"node_id"`
	Status     string `json:"status"` // alive, dead or left
	GossipAddr string `json:"gossip_addr"`
	APIAddr    string `json:"api_addr,omitempty"`
	RaftAddr   string `json:"raft_addr,omitempty"`
	Version    string `json:"version,omitempty"` // maosd build version
	// LastContact is when the answering node last heard from this member
	// directly (its gossip probe answered); absent for the answering node
	// itself and for a member it never reached. A member that died keeps
	// the time of its last answer: when it was last known up.
	LastContact *time.Time `json:"last_contact,omitempty"`
}

// MembersResponse is the body of GET /v1/cluster/members: the answering
// node's view of gossip membership, members sorted by id. A node running
// without gossip lists only itself, with no gossip address.
type MembersResponse struct {
	NodeID    string   `json:"node_id"`
	Encrypted bool     `json:"encrypted"` // whether this node's gossip is encrypted
	Members   []Member `json:"members"`
}
