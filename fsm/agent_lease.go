package fsm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

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
// Time. As for locks (locks.go), expiry is decided by the timestamp of the
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

// agentLeaseRecord is the stored form; times are entry timestamps in Unix
// nanoseconds.
type agentLeaseRecord struct {
	Holder   api.LeaseHolder `json:"holder"`
	Fence    uint64          `json:"fence"`
	Acquired int64           `json:"acquired"`
	Renewed  int64           `json:"renewed,omitempty"`
	Expires  int64           `json:"expires"`
	TTL      int64           `json:"ttl"`
	Reason   string          `json:"reason"`
	Released bool            `json:"released,omitempty"`
	Standbys []standbyRecord `json:"standbys,omitempty"`
}

type standbyRecord struct {
	api.LeaseHolder
	Seen int64 `json:"seen"`
	TTL  int64 `json:"ttl"`
}

// free reports whether a new holder may take the lease at ts.
func (r *agentLeaseRecord) free(ts int64) bool { return r.Released || ts >= r.Expires }

func (r *agentLeaseRecord) view(agent string, at int64) *api.AgentLease {
	l := &api.AgentLease{
		Agent: agent, Holder: r.Holder, Fence: r.Fence,
		AcquiredAt: time.Unix(0, r.Acquired).UTC(),
		ExpiresAt:  time.Unix(0, r.Expires).UTC(),
		TTL:        api.LockTTL(r.TTL), Reason: r.Reason,
		Expired: at >= r.Expires, Released: r.Released,
		Standbys: []api.AgentStandby{},
	}
	if r.Renewed != 0 {
		l.RenewedAt = time.Unix(0, r.Renewed).UTC()
	}
	for _, s := range r.Standbys {
		if !s.lapsed(at) {
			l.Standbys = append(l.Standbys, api.AgentStandby{LeaseHolder: s.LeaseHolder, SeenAt: time.Unix(0, s.Seen).UTC()})
		}
	}
	return l
}

// lapsed: the standby has not asked within its ttl as of at.
func (s *standbyRecord) lapsed(at int64) bool { return at >= addTTL(s.Seen, time.Duration(s.TTL)) }

// standBy records h as a standby seen at ts, dropping standbys that
// lapsed and the holder itself; beyond MaxAgentStandbys the one seen
// longest ago gives way. The list stays sorted by node, then instance.
func (r *agentLeaseRecord) standBy(h api.LeaseHolder, ts int64, ttl time.Duration) {
	r.dropStandby(h, ts)
	if len(r.Standbys) >= api.MaxAgentStandbys {
		oldest := 0
		for i, s := range r.Standbys {
			if s.Seen < r.Standbys[oldest].Seen {
				oldest = i
			}
		}
		r.Standbys = slices.Delete(r.Standbys, oldest, oldest+1)
	}
	r.Standbys = append(r.Standbys, standbyRecord{LeaseHolder: h, Seen: ts, TTL: int64(ttl)})
	slices.SortFunc(r.Standbys, func(a, b standbyRecord) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Instance, b.Instance))
	})
}

// dropStandby removes h and every lapsed standby.
func (r *agentLeaseRecord) dropStandby(h api.LeaseHolder, ts int64) {
	r.Standbys = slices.DeleteFunc(r.Standbys, func(s standbyRecord) bool { return s.LeaseHolder == h || s.lapsed(ts) })
}

func getAgentLease(tx *bbolt.Tx, agent string) (rec agentLeaseRecord, ok bool, err error) {
	v := tx.Bucket(bucketAgentLeases).Get([]byte(agent))
	if v == nil {
		return rec, false, nil
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, false, fmt.Errorf("agent lease %s: decode: %w", agent, err)
	}
	return rec, true, nil
}

func putAgentLease(tx *bbolt.Tx, agent string, rec *agentLeaseRecord) {
	data, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("fsm: agent lease %s: encode: %v", agent, err))
	}
	mustPut(tx.Bucket(bucketAgentLeases), []byte(agent), data)
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

// AgentLeaseOf returns agent's lease as of the latest applied entry; a
// *NotFoundError when none was ever granted.
func (f *FSM) AgentLeaseOf(agent string) (*api.AgentLease, error) {
	var out *api.AgentLease
	err := f.view(func(tx *bbolt.Tx) error {
		rec, ok, err := getAgentLease(tx, agent)
		if err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		if !ok {
			return notFound("agent %s has no lease", agent)
		}
		out = rec.view(agent, lastTS(tx))
		return nil
	})
	return out, err
}

// AgentLeases returns every agent lease by agent id, as of the latest
// applied entry. It reads every lease: there is one per agent configured
// on a watcher, a bounded set.
func (f *FSM) AgentLeases() (api.AgentLeasePage, error) {
	page := api.AgentLeasePage{Leases: []api.AgentLease{}}
	err := f.view(func(tx *bbolt.Tx) error {
		at := lastTS(tx)
		page.AsOf = time.Unix(0, at).UTC()
		return tx.Bucket(bucketAgentLeases).ForEach(func(k, v []byte) error {
			var rec agentLeaseRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("fsm: agent lease %s: decode: %w", k, err)
			}
			page.Leases = append(page.Leases, *rec.view(string(k), at))
			return nil
		})
	})
	return page, err
}
