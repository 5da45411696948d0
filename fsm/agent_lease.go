package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Agent leases: which watcher serves an agent configured on several hosts.
//
// The same agent id may be configured on watchers of several nodes. One
// of them, the holder, holds the agent's lease and answers its mail; the
// others stand by, each trying to acquire every third of the ttl, and take
// over when the lease lapses or is released. A holder is a watcher
// instance: the node it runs beside and a per-process instance id, so a
// watcher restarted on the same node is a new holder (its predecessor's
// work in flight may still land, and the fence must refuse it).
//
// Time. As for locks (lock.go), expiry is decided by the timestamp of the
// entry being applied, never a node's clock: a lease granted or renewed at
// T with ttl D covers [T, T+D).
//
// Fencing. The fence is the Raft index of the entry that granted the
// lease: renewals keep it, every grant (first, after a lapse, after a
// release) has a larger one. A reply, a cursor move and a task report by
// the agent may carry the fence (agent_fence); apply refuses one whose
// fence is not the current grant's (checkAgentFence), so a holder that
// lost the lease can no longer answer, move the cursor or report a task.
// An entry without a fence is unchanged: a human sending as the agent,
// or a watcher of a build before leases.
//
// Standbys. An acquire refused because another holder's lease is live
// records its caller as a standby (node, instance, the entry time it last
// asked, its ttl): a standby that stops asking for longer than its ttl is
// dropped at the next write and no longer shown. At most MaxAgentStandbys
// are kept; a new one beyond that replaces the one seen longest ago.
//
// Audit. A grant to a new holder is audited once (AGENT_LEASE for the
// first, AGENT_TAKEOVER with the old and new holder, the fence and why:
// lapsed or released), as is a release; renewals and standby attempts,
// which come every few seconds, are not.

func fenced(format string, args ...any) error {
	return &api.FenceError{Reason: fmt.Sprintf(format, args...)}
}

// currentLease loads the lease a renew or release (op) acts on and checks
// that h holds it under fence and that it was not released: a
// *FenceError otherwise, naming the fence given, the current one and its
// holder; no lease is a *NotFoundError.
func currentLease(tx *bbolt.Tx, op api.Op, agent string, h api.LeaseHolder, fence uint64) (agentLeaseRecord, error) {
	cur, ok, err := getAgentLease(tx, agent)
	if err != nil {
		return cur, fmt.Errorf("fsm: apply %s: %w", op, err)
	}
	if !ok {
		return cur, fmt.Errorf("fsm: apply %s: %w", op, notFound("agent %s has no lease (never acquired)", agent))
	}
	switch {
	case cur.Fence != fence:
		return cur, fmt.Errorf("fsm: apply %s: %w", op, staleFence(agent, fence, &cur))
	case cur.Holder != h:
		return cur, fmt.Errorf("fsm: apply %s: %w", op, fenced("agent %s: the lease (fence %d) is held by %s, not %s: acquire it again",
			agent, cur.Fence, cur.Holder, h))
	case cur.Released:
		return cur, fmt.Errorf("fsm: apply %s: %w", op, fenced("agent %s: the lease (fence %d) was released: acquire it again", agent, cur.Fence))
	}
	return cur, nil
}

func staleFence(agent string, fence uint64, cur *agentLeaseRecord) error {
	return fenced("agent %s: fence %d is not the current lease's (fence %d, held by %s): this watcher lost the agent's lease; stop acting as it",
		agent, fence, cur.Fence, cur.Holder)
}

// checkAgentFence refuses an entry acting as agent under fence when fence
// is not the agent's current grant (a *FenceError). Fence 0 (none given)
// always passes, so senders that know nothing of leases are unchanged. A
// lease that lapsed but that nobody took over still accepts its fence:
// nobody else acts as the agent, and its holder's renewal, refused,
// stops it.
func checkAgentFence(tx *bbolt.Tx, agent string, fence uint64) error {
	if fence == 0 {
		return nil
	}
	cur, ok, err := getAgentLease(tx, agent)
	if err != nil {
		return err
	}
	if !ok {
		return fenced("agent %s: fence %d: the agent has no lease", agent, fence)
	}
	if cur.Fence != fence {
		return staleFence(agent, fence, &cur)
	}
	if cur.Released {
		return fenced("agent %s: fence %d: the lease was released", agent, fence)
	}
	return nil
}

// leaseAgent is the agent whose lease fences what name does: a fork
// (fork.go) answers under its parent's lease.
func leaseAgent(name string) string {
	if parent, ok := api.ForkParent(name); ok {
		return parent
	}
	return name
}

// agentFenced is a command that may carry the fence of an agent's lease:
// its agent and fence (0: none).
type agentFenced interface {
	FencedBy() (agent string, fence uint64)
}
