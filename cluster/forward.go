package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
)

// leaderDo runs an operation that only the leader may answer: local when
// this node leads, remote against the leader's API otherwise. Failures that
// an election can cure (no leader yet, leadership lost, leader unreachable,
// a forwarded request reaching a node that no longer leads) are retried with
// backoff until cfg.RetryTimeout or ctx ends; a final error (bad input,
// conflict, not found) returns at once.
//
// A request that was itself forwarded (transport.IsForwarded) is never
// forwarded again: a non-leader answers api.ErrNotLeader and the node
// that forwarded it retries.
//
// When the retries run out a write (write=true) fails with an error wrapping
// api.ErrOutcomeUnknown -- an attempt may have reached the log -- and
// a read with one wrapping api.ErrNoLeader.
func leaderDo[T any](ctx context.Context, n *Node, write bool,
	local func(context.Context) (T, error),
	remote func(context.Context, *client.Client) (T, error),
) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RetryTimeout)
	defer cancel()
	forwarded := transport.IsForwarded(ctx)
	backoff := newBackoff()
	var lastErr error
	for {
		var (
			res T
			err error
		)
		if n.raft.State() == raft.Leader {
			res, err = local(ctx)
		} else if forwarded {
			return zero, fmt.Errorf("%w: node %s (leader is %q)", api.ErrNotLeader, n.cfg.NodeID, n.leaderID())
		} else {
			// Taken before the leader is looked up, so a change in between
			// is not missed.
			changed := n.leaderChange()
			if addr, lerr := n.leaderAPIAddr(); lerr != nil {
				err = lerr
			} else {
				res, err = forwardHop(ctx, changed, func(ctx context.Context) (T, error) {
					return remote(ctx, n.client(addr).Forwarding())
				})
			}
		}
		if err == nil || isFinal(err) {
			return res, err
		}
		lastErr = err
		if werr := backoff.wait(ctx, n.shutdown); werr != nil {
			if write {
				return zero, fmt.Errorf("%w: %v; the write may or may not be committed, and retrying with the same id is safe", api.ErrOutcomeUnknown, lastErr)
			}
			return zero, fmt.Errorf("%w: %v", api.ErrNoLeader, lastErr)
		}
	}
}

// forwardHop runs one forwarded call and abandons it when the leader
// changes meanwhile: a request stuck at a paused or cut-off leader is
// retried at the new one at once instead of waiting out its timeout. The
// abandoned attempt may still commit; the retry carries the same id.
func forwardHop[T any](ctx context.Context, leaderChanged <-chan struct{}, call func(context.Context) (T, error)) (T, error) {
	hop, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-leaderChanged:
			cancel()
		case <-done:
		}
	}()
	return call(hop)
}

// isFinal reports whether err is an answer rather than a failure to get
// one: the caller's mistake or a definite refusal (bad input, conflict, not
// found), which retrying cannot change. What an election or a reconnect can
// cure is not final. Beyond what only a node sees (Raft's errors, an apply
// refusal, a hop abandoned at a leader change) it is api.Classify's answer,
// the one every client shares.
func isFinal(err error) bool {
	var applied *applyError
	var urlErr *url.Error
	switch {
	case errors.As(err, &applied): // committed, and refused the same on every node
		return true
	case errors.As(err, &urlErr): // the hop failed on the network, or was abandoned at a leader change
		return false
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrAbortedByRestore), errors.Is(err, raft.ErrRaftShutdown):
		return false
	}
	c := api.Classify(err)
	if c == api.MaybeCommitted && errors.Is(err, context.Canceled) && !errors.Is(err, api.ErrOutcomeUnknown) {
		return true // the caller is gone: nothing is left to retry for
	}
	return !c.Retry()
}

// applyError wraps an error value the FSM returned for an entry: the entry
// committed and was refused deterministically on every node.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// applyAs proposes data on this (leader) node and returns its FSM result
// as T.
func applyAs[T any](n *Node, data []byte) (T, error) {
	start := time.Now()
	return applyResult[T](n, n.raft.Apply(data, n.cfg.ApplyTimeout), start)
}

// applyResult waits for a proposal made at start and returns its FSM
// result as T.
func applyResult[T any](n *Node, f raft.ApplyFuture, start time.Time) (T, error) {
	var zero T
	if err := f.Error(); err != nil {
		return zero, err
	}
	n.metrics.Commit(time.Since(start))
	// error first: with T = any, case T would match an error value too.
	switch r := f.Response().(type) {
	case error:
		return zero, &applyError{err: r}
	case T:
		return r, nil
	default:
		return zero, fmt.Errorf("cluster: unexpected apply result %T at index %d", r, f.Index())
	}
}

// leaderID is the current leader's id, "" if none is known.
func (n *Node) leaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// leaderAPIAddr finds the leader's HTTP API in the node registry (never in
// gossip metadata, which any gossip member can claim: apiAddrOf); a leader
// registers itself with the first entry of its term.
func (n *Node) leaderAPIAddr() (string, error) {
	id := n.leaderID()
	if id == "" {
		return "", api.ErrNoLeader
	}
	if apiAddr := n.apiAddrOf(id); apiAddr != "" {
		return apiAddr, nil
	}
	return "", fmt.Errorf("%w: leader %s has not registered its API address yet", api.ErrNoLeader, id)
}

// backoff is a capped exponential backoff with jitter: 25 ms doubling to
// 1 s, so a client waiting out an election retries a handful of times a
// second without hammering the cluster.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: 25 * time.Millisecond} }

// step returns the next delay, between half and all of the current step,
// and doubles the step up to the cap.
func (b *backoff) step() time.Duration {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, time.Second)
	return d
}

func (b *backoff) wait(ctx context.Context, stop <-chan struct{}) error {
	t := time.NewTimer(b.step())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errors.New("node is shutting down")
	}
}

// syncTerm holds a Raft term, safe for concurrent use.
type syncTerm struct{ v atomic.Uint64 }
