package cluster

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/metrics"
)

// Metrics is the node's metrics (a registry of its own): what the API
// serves on GET /metrics and maosd on --metrics-addr, what the node's
// watchers report to. Never nil after Open.
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// meteredFSM is the state machine as Raft sees it: fsm.FSM, with each
// batch's size and apply time recorded around it. The state machine
// itself never touches metrics (its apply must stay deterministic).
type meteredFSM struct {
	*fsm.FSM
	m *metrics.Metrics
}

// ApplyBatch applies logs and records the batch.
func (f meteredFSM) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	out := f.FSM.ApplyBatch(logs)
	f.m.ApplyBatch(len(logs), time.Since(start))
	return out
}

// Apply is ApplyBatch of one entry (raft calls ApplyBatch, as fsm.FSM is
// a raft.BatchingFSM; this keeps a single entry metered too).
func (f meteredFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

var _ raft.BatchingFSM = meteredFSM{}

// MetricsState is what the node's metrics read of it at each scrape:
// Raft's state, term and indexes (raft.Stats), the state machine's
// applied index, tasks by state, pending approvals and presence by state.
// A read that fails leaves its part out and says why in Err.
func (n *Node) MetricsState() metrics.NodeState {
	st := metrics.NodeState{
		RaftState:        stateName(n.raft.State()),
		Term:             n.raft.CurrentTerm(),
		LastIndex:        n.raft.LastIndex(),
		CommitIndex:      n.raft.CommitIndex(),
		RaftApplied:      n.raft.AppliedIndex(),
		StateApplied:     n.fsm.AppliedIndex(),
		LastContact:      -1,
		PendingApprovals: -1,
		StateVersion:     n.fsm.MaxStateVersion(),
		ClusterVersion:   n.fsm.ClusterVersion(),
	}
	stats := n.raft.Stats()
	st.FSMPending, _ = strconv.ParseUint(stats["fsm_pending"], 10, 64)
	switch {
	case st.RaftState == "leader":
		st.LastContact = 0
	case stats["last_contact"] == "never":
	default:
		if at := n.raft.LastContact(); !at.IsZero() {
			st.LastContact = time.Since(at)
		}
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				st.Voters++
			}
		}
	}
	var errs []error
	if counts, err := n.fsm.TaskCounts(); err != nil {
		errs = append(errs, err)
	} else {
		st.Tasks = make(map[string]int, len(counts))
		for s, c := range counts {
			st.Tasks[string(s)] = c
		}
	}
	if c, err := n.fsm.ApprovalCount(api.ApprovalPending); err != nil {
		errs = append(errs, err)
	} else {
		st.PendingApprovals = c
	}
	if ps, err := n.Presence(context.Background()); err != nil {
		errs = append(errs, err)
	} else {
		st.Presence = map[string]int{api.PresenceAwake: 0, api.PresenceOffline: 0}
		for _, p := range ps {
			st.Presence[p.State]++
		}
	}
	st.Err = errors.Join(errs...)
	return st
}
