package watcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"time"

	"github.com/maos-project/maos/api"
)

// Agents that fail over (fsm/agent_lease.go). The same agent may be
// configured on watchers of several nodes. Each watcher asks for the
// agent's lease; the one granted serves the agent as a single watcher
// always did (run), renewing every third of lease_ttl, and every write
// it makes as the agent (replies, fork notes, cursor moves, task reports)
// carries the lease's fence, so apply refuses it once another took over.
// The others stand by, asking every third of the ttl (which keeps them
// listed as standbys), and the first to ask after the lease lapsed or was
// released takes it over: it reads the agent's replicated cursor and
// answers what is pending, each message once (ReplyID).
//
// A holder stops answering at once when it learns the lease is lost: a
// renewal or a fenced write refused, or no renewal accepted for a whole
// ttl by its own clock (counted from the sending of the last accepted
// one, which is before the entry that stamped the expiry), so it never
// answers past the time another may have taken over. It then stands by
// like any other. A watcher stopping releases the lease, so a standby
// takes over at its next try rather than after the ttl.

// errLeaseLost ends a message's handling when the lease was lost: the
// message is not done here, the new holder answers it.
var errLeaseLost = errors.New("watcher: the agent's lease was lost")

// newInstanceID is a random id for this watcher process (16 hex digits).
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

// hostNode is the node name of a watcher beside no node (maosctl
// watch): the host's name as an id, "local" if that leaves nothing.
func hostNode() string {
	h, _ := os.Hostname()
	return api.NameFrom(h, "local")
}

// holder is this watcher's name in the agent's lease.
func (w *agentWatcher) holder() api.LeaseHolder {
	return api.LeaseHolder{Node: w.opts.Node, Instance: w.opts.Instance}
}

func (w *agentWatcher) leaseTTL() time.Duration { return time.Duration(w.cfg.LeaseTTL) }

// serve runs the watcher of one agent under its lease until ctx ends:
// stand by until granted, serve while held, stand by again if lost. A
// dry run takes no lease.
func (w *agentWatcher) serve(ctx context.Context) {
	if w.opts.DryRun != nil {
		w.run(ctx)
		return
	}
	for {
		fence, ok := w.awaitLease(ctx)
		if !ok {
			return
		}
		actx, cancel := context.WithCancel(ctx)
		w.mu.Lock()
		w.fence, w.lose, w.lost = fence, cancel, false
		w.mu.Unlock()
		kept := make(chan struct{})
		go func() {
			defer close(kept)
			w.keepLease(actx, fence)
		}()
		w.run(actx)
		cancel()
		<-kept
		w.mu.Lock()
		w.fence, w.lose = 0, nil
		w.mu.Unlock()
		if ctx.Err() != nil {
			w.releaseLease(fence)
			return
		}
		w.log.Warn("watcher: lost the agent's lease; standing by", "fence", fence)
	}
}

// agentFence is the fence the agent's writes carry now (0 in a dry run).
func (w *agentWatcher) agentFence() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fence
}

// leaseLost stops serving at once: the lease is lost (a renewal or a
// fenced write refused, or no renewal accepted for a ttl).
func (w *agentWatcher) leaseLost(err error) {
	w.mu.Lock()
	lose := w.lose
	w.lost = true
	w.mu.Unlock()
	if lose != nil {
		lose()
	}
}

// leaseWasLost reports whether the last serving ended because the lease
// was lost: presence then stays the new holder's (no OFFLINE).
func (w *agentWatcher) leaseWasLost() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// awaitLease asks for the lease every third of the ttl until it is
// granted (its fence) or ctx ends (false). Standing by is logged once
// per holder it stands behind.
func (w *agentWatcher) awaitLease(ctx context.Context) (uint64, bool) {
	every := w.leaseTTL() / 3
	var behind string
	delay := 100 * time.Millisecond
	for {
		res, err := w.c.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: w.cfg.ID, LeaseHolder: w.holder(), TTL: api.LockTTL(w.leaseTTL())})
		wait := every
		switch {
		case err == nil && res.Outcome != api.AgentLeaseStandby:
			if res.Lease.Reason != api.LeaseReasonFirst && res.Outcome == api.AgentLeaseGranted {
				w.log.Info("watcher: took over the agent's lease", "fence", res.Lease.Fence, "reason", res.Lease.Reason)
			} else {
				w.log.Info("watcher: holds the agent's lease", "fence", res.Lease.Fence)
			}
			return res.Lease.Fence, true
		case err == nil:
			if h := res.Lease.Holder.String(); h != behind {
				behind = h
				w.log.Info("watcher: standing by; another watcher serves the agent", "holder", h, "until", res.Lease.ExpiresAt)
			}
			delay = 100 * time.Millisecond
		case ctx.Err() != nil:
			return 0, false
		default:
			w.log.Warn("watcher: asking for the agent's lease failed; retrying", "err", err)
			wait, delay = min(delay, every), min(2*delay, every)
		}
		if !sleepCtx(ctx, wait) {
			return 0, false
		}
	}
}

// keepLease renews the lease every third of the ttl, with the process's
// other leases (renewals.go), until ctx ends; when a renewal is refused,
// or none was accepted for a ttl by this host's clock, it cancels the
// serving context (w.lose).
func (w *agentWatcher) keepLease(ctx context.Context, fence uint64) {
	ttl := w.leaseTTL()
	rn := w.renewals
	if rn == nil { // a watcher not started by Run: a group of its own
		rn = newRenewals(ctx)
	}
	outcomes, leave := rn.join(w.token, w.c, w.log, api.AgentLeaseRenewCommand{Agent: w.cfg.ID, LeaseHolder: w.holder(), Fence: fence, TTL: api.LockTTL(ttl)})
	defer leave()
	lastOK := time.Now() // the grant's request was sent before this
	for {
		var o renewOutcome
		select {
		case <-ctx.Done():
			return
		case o = <-outcomes:
		}
		switch err := o.err; {
		case err == nil:
			lastOK = o.sent
		case ctx.Err() != nil:
			return
		case errors.Is(err, api.ErrFenced), errors.Is(err, api.ErrNotFound):
			w.log.Warn("watcher: the agent's lease is lost", "fence", fence, "err", err)
			w.leaseLost(err)
			return
		case time.Since(lastOK) >= ttl:
			w.log.Warn("watcher: no renewal of the agent's lease accepted for a ttl; stopping", "fence", fence, "ttl", ttl, "err", err)
			w.leaseLost(err)
			return
		default:
			w.log.Warn("watcher: renewing the agent's lease failed; retrying", "fence", fence, "err", err)
		}
	}
}

// releaseLease gives the lease up as the watcher stops, so a standby
// takes over at its next try; failing that, the lease lapses.
func (w *agentWatcher) releaseLease(fence uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := w.c.ReleaseAgentLease(ctx, api.AgentLeaseReleaseCommand{Agent: w.cfg.ID, LeaseHolder: w.holder(), Fence: fence}); err != nil {
		w.log.Warn("watcher: releasing the agent's lease failed; it lapses after its ttl", "fence", fence, "err", err)
		return
	}
	w.log.Info("watcher: released the agent's lease", "fence", fence)
}
