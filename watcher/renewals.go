package watcher

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Lease renewals, one request per period for a whole process. Each agent
// a watcher process holds renewed its lease every third of its ttl with a
// request and a log entry of its own: a farm of 1,000 agents at rest
// wrote 300 entries a second. Instead the agents that share a
// token and a ttl join one renewGroup, which renews all their
// leases every ttl/3 in one POST /v1/leases/renew (api.MaxLeaseRenewals
// per request), one log entry, each renewal judged alone. Every member
// gets its own outcome each period, stamped with the time the request
// was sent, and keeps its own rules (keepLease): a refused renewal loses
// that agent's lease only.
//
// A node too old for the route (404) or a cluster still at version 1
// (cluster_version) gets one renewal per agent, as before, and the batch
// is tried again after singleRecheck.

// singleRecheck is how long a group renews one lease per request after
// the batch route was refused, before it tries the batch again.
const singleRecheck = 15 * time.Second

// renewOutcome is one period's answer for one lease.
type renewOutcome struct {
	sent time.Time // when the request that carried the renewal was sent
	err  error     // nil: renewed
}

// renewals holds a process's renew groups, whose loops run until ctx
// ends (Run's).
type renewals struct {
	ctx    context.Context
	mu     sync.Mutex
	groups map[renewKey]*renewGroup
}

func newRenewals(ctx context.Context) *renewals {
	return &renewals{ctx: ctx, groups: map[renewKey]*renewGroup{}}
}

// renewKey groups leases: one request carries one token (an agent's own,
// or "" for the process's), and one period suits one ttl.
type renewKey struct {
	token string
	ttl   time.Duration
}

// join adds cmd's lease to the group of token and the ttl and returns
// the channel its outcomes come on (the latest replaces one not yet read)
// and leave, which takes it out. c (carrying token) is the group's client
// if the group is new.
func (r *renewals) join(token string, c *client.Client, log *slog.Logger, cmd api.AgentLeaseRenewCommand) (<-chan renewOutcome, func()) {
	key := renewKey{token: token, ttl: time.Duration(cmd.TTL)}
	r.mu.Lock()
	g := r.groups[key]
	if g == nil {
		g = &renewGroup{c: c, ttl: key.ttl, log: log, members: map[string]*renewMember{}}
		r.groups[key] = g
		go g.loop(r.ctx)
	}
	r.mu.Unlock()
	m := &renewMember{cmd: cmd, out: make(chan renewOutcome, 1)}
	g.mu.Lock()
	g.members[cmd.Agent] = m
	g.mu.Unlock()
	return m.out, func() {
		g.mu.Lock()
		if g.members[cmd.Agent] == m {
			delete(g.members, cmd.Agent)
		}
		g.mu.Unlock()
	}
}

// renewGroup renews the leases of the agents that share a token and a
// ttl. mu guards members and singleUntil; loop is the only sender.
type renewGroup struct {
	c   *client.Client
	ttl time.Duration
	log *slog.Logger

	mu          sync.Mutex
	members     map[string]*renewMember // by agent
	singleUntil time.Time               // renew one by one until then
}

type renewMember struct {
	cmd api.AgentLeaseRenewCommand
	out chan renewOutcome
}

// deliver hands o to m, replacing an outcome m has not read yet.
func (m *renewMember) deliver(o renewOutcome) {
	for {
		select {
		case m.out <- o:
			return
		default:
		}
		select {
		case <-m.out:
		default:
		}
	}
}

func (g *renewGroup) loop(ctx context.Context) {
	tick := time.NewTicker(g.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		g.mu.Lock()
		ms := make([]*renewMember, 0, len(g.members))
		for _, m := range g.members {
			ms = append(ms, m)
		}
		g.mu.Unlock()
		for len(ms) > 0 {
			n := min(len(ms), api.MaxLeaseRenewals)
			g.round(ctx, ms[:n])
			ms = ms[n:]
		}
	}
}

// round renews ms's leases in one request (or one each, see singleRecheck)
// and hands each member its outcome.
func (g *renewGroup) round(ctx context.Context, ms []*renewMember) {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, g.ttl/3)
	defer cancel()
	g.mu.Lock()
	single := sent.Before(g.singleUntil)
	g.mu.Unlock()
	if !single {
		errs, err := g.renewMany(rctx, ms)
		if !errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrClusterVersion) {
			for i, m := range ms {
				m.deliver(renewOutcome{sent: sent, err: cmpErr(err, errs, i)})
			}
			return
		}
		g.log.Info("watcher: renewing leases one per request: the node does not take them together", "err", err, "retry_after", singleRecheck)
		g.mu.Lock()
		g.singleUntil = sent.Add(singleRecheck)
		g.mu.Unlock()
	}
	for _, m := range ms {
		_, err := g.c.RenewAgentLease(rctx, m.cmd)
		m.deliver(renewOutcome{sent: sent, err: err})
	}
}

// renewMany is one POST /v1/leases/renew: each renewal's error (nil when
// renewed), or the request's error.
func (g *renewGroup) renewMany(ctx context.Context, ms []*renewMember) ([]error, error) {
	cmd := api.AgentLeaseRenewManyCommand{Renewals: make([]api.AgentLeaseRenewCommand, len(ms))}
	for i, m := range ms {
		cmd.Renewals[i] = m.cmd
	}
	res, err := g.c.RenewAgentLeases(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if len(res.Results) != len(ms) {
		return nil, errors.New("watcher: the node answered a different number of lease renewals than were asked")
	}
	errs := make([]error, len(ms))
	for i, r := range res.Results {
		if r.Error != nil {
			if r.Error.Status == 0 { // not on the wire: the code's
				r.Error.Status, _ = api.StatusOf(r.Error.Code)
			}
			errs[i] = r.Error
		}
	}
	return errs, nil
}

// cmpErr is the request's error if there was one, else renewal i's.
func cmpErr(err error, errs []error, i int) error {
	if err != nil {
		return err
	}
	return errs[i]
}
