package metrics

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RaftStates are the values of the state label of maos_raft_state.
var RaftStates = []string{"leader", "follower", "candidate", "shutdown"}

// NodeState is what a node reads of itself at each scrape.
type NodeState struct {
	// Raft: RaftState is one of RaftStates; the indexes and the term are
	// Raft's own (RaftApplied counts Raft's no-op and configuration
	// entries, StateApplied only the state machine's).
	RaftState    string
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	RaftApplied  uint64
	StateApplied uint64
	// LastContact is how long ago a follower last heard from its leader
	// (0 on the leader); negative: never.
	LastContact time.Duration
	// FSMPending is how many committed batches wait for the state machine.
	FSMPending uint64
	// Voters is the number of voters in the Raft configuration.
	Voters int
	// StateVersion is the highest state-machine version this node's build
	// applies, ClusterVersion the cluster's committed one as this node
	// applied it (0: not exported).
	StateVersion, ClusterVersion int

	// Tasks is the number of tasks by state; PendingApprovals the
	// approvals waiting for decisions (negative: not read, not
	// exported); Presence the agents by presence state (AWAKE, OFFLINE).
	// A nil map is not exported (the read failed).
	Tasks            map[string]int
	PendingApprovals int
	Presence         map[string]int
	// Err, if set, is why part of the state could not be read; it is
	// logged and the rest is exported.
	Err error
}

// Observe registers a collector that calls read at every scrape and
// exports what it returns as gauges (maos_raft_*, maos_state_applied_index,
// maos_tasks, maos_approvals_pending, maos_presence_agents). Call it once
// per Metrics.
func (m *Metrics) Observe(read func() NodeState, logger *slog.Logger) {
	if m == nil {
		return
	}
	if logger == nil {
		logger = slog.Default()
	}
	m.reg.MustRegister(&nodeCollector{read: read, logger: logger})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

var (
	descRaftState    = desc("raft_state", "1 for this node's current Raft state, 0 for the others.", "state")
	descTerm         = desc("raft_term", "This node's current Raft term.")
	descLastIndex    = desc("raft_last_log_index", "Index of the last entry in this node's Raft log.")
	descCommitIndex  = desc("raft_commit_index", "Index of the last entry this node knows is committed.")
	descRaftApplied  = desc("raft_applied_index", "Index of the last entry Raft applied on this node (its own no-op and configuration entries included).")
	descStateApplied = desc("state_applied_index", "Index of the last entry this node's state machine applied (what cluster status calls applied_index).")
	descLastContact  = desc("raft_last_contact_seconds", "Seconds since this node, a follower, last heard from its leader: 0 on the leader, -1 never.")
	descFSMPending   = desc("raft_fsm_pending", "Committed batches waiting for this node's state machine.")
	descVoters       = desc("raft_voters", "Voters in this node's Raft configuration.")
	descStateVersion = desc("state_version", "The highest state-machine version this node's build applies.")
	descClusterVer   = desc("cluster_state_version", "The cluster's committed state version, as this node applied it: below state_version while a voter runs an older build.")
	descTasks        = desc("tasks", "Tasks by state, in this node's copy of the state.", "state")
	descApprovals    = desc("approvals_pending", "Approval requests waiting for decisions, in this node's copy of the state.")
	descPresence     = desc("presence_agents", "Agents by presence state (AWAKE, OFFLINE) as this node sees them.", "state")
)

// nodeCollector exports a NodeState read at scrape time.
type nodeCollector struct {
	read   func() NodeState
	logger *slog.Logger
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descTerm, descLastIndex, descCommitIndex, descRaftApplied,
		descStateApplied, descLastContact, descFSMPending, descVoters, descStateVersion, descClusterVer,
		descTasks, descApprovals, descPresence} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read()
	if s.Err != nil {
		c.logger.Warn("metrics: read the node's state", "error", s.Err)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, st := range RaftStates {
		v := 0.0
		if st == s.RaftState {
			v = 1
		}
		gauge(descRaftState, v, st)
	}
	gauge(descTerm, float64(s.Term))
	gauge(descLastIndex, float64(s.LastIndex))
	gauge(descCommitIndex, float64(s.CommitIndex))
	gauge(descRaftApplied, float64(s.RaftApplied))
	gauge(descStateApplied, float64(s.StateApplied))
	contact := s.LastContact.Seconds()
	if s.LastContact < 0 {
		contact = -1
	}
	gauge(descLastContact, contact)
	gauge(descFSMPending, float64(s.FSMPending))
	gauge(descVoters, float64(s.Voters))
	if s.StateVersion > 0 {
		gauge(descStateVersion, float64(s.StateVersion))
	}
	if s.ClusterVersion > 0 {
		gauge(descClusterVer, float64(s.ClusterVersion))
	}
	for st, n := range s.Tasks {
		gauge(descTasks, float64(n), st)
	}
	if s.PendingApprovals >= 0 {
		gauge(descApprovals, float64(s.PendingApprovals))
	}
	for st, n := range s.Presence {
		gauge(descPresence, float64(n), st)
	}
}
