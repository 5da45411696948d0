package watcher

import (
	"context"
	"time"

	"github.com/maos-project/maos/api"
)

// The watcher's delivery mode for a message, in one place: the agent's
// run-time policy (maosctl policy set, replicated: fsm/policy_set.go) wins
// over the YAML (AgentConfig.ModeFor). The scheduler reads the run-time layer
// when a message arrives and, while it holds messages, every policyPoll,
// and decides each held message's mode again, by this host's clock, every
// time it schedules, so a change or an end takes effect within a second
// with no restart. A scheduler holding nothing reads nothing: the policy
// applies to the next message, which reads it first.

// policyPoll is how often the scheduler reads the agent's run-time policy.
var policyPoll = 500 * time.Millisecond

// PolicyQuiet is the run-time mode that holds every message but urgent
// ones until it ends (api.PolicyQuiet); it has no YAML form.
const PolicyQuiet = api.PolicyQuiet

// runtimePolicy is the agent's run-time layer as the scheduler last read it.
type runtimePolicy struct {
	set    api.PolicySet
	failed bool // the last read failed: logged once, until one succeeds
}

// refreshPolicy reads the agent's run-time policies; a failed read keeps what
// was last read (the node may be restarting) and is logged once.
func (w *agentWatcher) refreshPolicy(ctx context.Context, rt *runtimePolicy) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	set, err := w.c.Policy(rctx, w.cfg.ID, api.Local)
	switch {
	case err != nil && ctx.Err() == nil:
		if !rt.failed {
			w.log.Warn("watcher: cannot read the run-time policy; keeping the last one read", "err", err)
		}
		rt.failed = true
	case err == nil:
		if rt.failed {
			w.log.Info("watcher: run-time policy readable again")
		}
		if !samePolicies(rt.set, set) {
			w.log.Info("watcher: run-time policy changed", "policies", len(set.Policies))
		}
		rt.set, rt.failed = set, false
	}
}

func samePolicies(a, b api.PolicySet) bool {
	if len(a.Policies) != len(b.Policies) {
		return false
	}
	for i := range a.Policies {
		if a.Policies[i] != b.Policies[i] {
			return false
		}
	}
	return true
}

// modeOf is the mode m is delivered in at now: the run-time policy that
// applies to its sender (api.PolicySet.For: the sender's override, else
// the agent-wide one), else the YAML's. Under quiet, an urgent message
// takes the YAML's mode and any other is held: PolicyQuiet, which the
// scheduler never starts and the cursor never passes. Fork is queue for an
// agent that cannot fork (AgentConfig.CanFork) and for a note from its own
// fork, which is never forked again.
func (w *agentWatcher) modeOf(m *api.Message, rt *runtimePolicy, now time.Time) string {
	mode := w.cfg.ModeFor(m)
	if p, ok := rt.set.For(m.From, now); ok && !(p.Mode == PolicyQuiet && m.Priority == api.PriorityUrgent) {
		mode = p.Mode
	}
	if mode == PolicyFork && (!w.cfg.CanFork() || api.IsForkOf(m.From, w.cfg.ID)) {
		return PolicyQueue
	}
	return mode
}
