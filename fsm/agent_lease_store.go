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

// Agent leases in the state file: bucketAgentLeases, agent id → the
// agentLeaseRecord JSON (the holder, its fence and times, the standbys).

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
