package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Proposal batching on the forwarding path: while maxInFlight batches of
// a follower's forwarded writes are in flight to the leader, the writes
// that come meanwhile queue, and go together as the next one, in one HTTP
// request (POST /v1/internal/entries). At c=64 over three nodes two writes
// in three are forwarded, and each used to cost both nodes a request of
// its own; a batch costs one, whatever its size. A lone write goes at
// once, so c=1 waits for nothing.
//
// Each write keeps its own log entry (and so its own index: a message's
// seq is its entry's index, fsm/task_messages.go), its own result and its
// own retries: the batch only carries the writes, each caller still runs
// leaderDo's loop around its own, and an entry's error fails that entry
// only. The leader hands a batch's entries to raft together, which
// commits them in one log append and one AppendEntries per follower and
// applies them in one state-file transaction (raft's own batching).

const (
	// maxBatchEntries bounds the entries of one forwarded batch; a larger
	// queue goes as several batches, one after the other.
	maxBatchEntries = 128
	// maxBatchBytes bounds the entries' bytes in one forwarded batch
	// (length prefixes aside). A single entry larger than this goes alone:
	// the leader's route takes one entry of any size it takes on
	// /v1/internal/entry, and maxBatchBytes stays below that ceiling's
	// least value (2 MiB), so a batch never exceeds it.
	maxBatchBytes = 1 << 20
	// maxInFlight bounds the batches in flight to one leader address. One
	// would make the largest batches, but a request the leader is slow to
	// answer would hold up every write queued behind it until their
	// callers give up (RetryTimeout); with two the queue keeps moving.
	maxInFlight = 2
	// legacyRecheck is how long a leader that answered 404 to the batch
	// route (a node of an older version) gets single entries before the
	// batch route is tried again.
	legacyRecheck = time.Minute
)

// The leader refuses more than transport.MaxBatchEntries in one request.
var _ [transport.MaxBatchEntries - maxBatchEntries]struct{}

// entriesClient is what a batch needs of a client of the leader's API
// (*transport.Client, marked forwarded).
type entriesClient interface {
	ApplyEntries(ctx context.Context, entries [][]byte) ([]api.EntryOutcome, error)
	ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error)
}

// batcher queues forwarded entries per leader API address and sends them
// in batches, at most maxInFlight in flight per address. The zero value is not
// usable: see newBatcher.
type batcher struct {
	maxEntries  int
	maxBytes    int
	maxInFlight int
	timeout     time.Duration // bounds one batch's request
	stop        <-chan struct{}
	now         func() time.Time

	mu     sync.Mutex
	queues map[string]*batchQueue
}

// batchQueue is one leader address's queue.
type batchQueue struct {
	pending  []*batchWaiter
	senders  int       // goroutines sending this queue's batches (run)
	legacyAt time.Time // when the address last answered 404 to the batch route
}

// batchWaiter is one forwarded entry and its caller's wait.
type batchWaiter struct {
	entry []byte
	done  chan struct{} // closed once res and err are set
	res   json.RawMessage
	err   error
	gone  func() // the caller stopped waiting; set when its batch is sent
}

// newBatcher returns a batcher with the package's bounds; stop ends
// requests in flight (the node shuts down).
func newBatcher(timeout time.Duration, stop <-chan struct{}) *batcher {
	return &batcher{maxEntries: maxBatchEntries, maxBytes: maxBatchBytes, maxInFlight: maxInFlight, timeout: timeout, stop: stop,
		now: time.Now, queues: map[string]*batchQueue{}}
}

// errNotSent says a queued entry was dropped before its batch was sent,
// because its caller stopped waiting.
var errNotSent = errors.New("cluster: forwarded entry not sent: its caller stopped waiting")

// do forwards entry to the leader at addr through c, in a batch with the
// other entries queued for addr meanwhile, and returns its own result: the
// state machine's answer, its error, or the batch's. When ctx ends first
// it returns an error wrapping api.ErrOutcomeUnknown if the entry
// was sent (it may still commit), errNotSent wrapped the same way if not;
// leaderDo retries either with the same entry, which is safe.
func (b *batcher) do(ctx context.Context, addr string, c entriesClient, entry []byte) (json.RawMessage, error) {
	w := &batchWaiter{entry: entry, done: make(chan struct{})}
	b.mu.Lock()
	q := b.queues[addr]
	if q == nil {
		q = &batchQueue{}
		b.queues[addr] = q
	}
	q.pending = append(q.pending, w)
	if q.senders < b.maxInFlight {
		q.senders++
		go b.run(q, c)
	}
	b.mu.Unlock()

	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	for i, p := range q.pending {
		if p == w {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			b.mu.Unlock()
			return nil, fmt.Errorf("%w: %w (%w)", api.ErrOutcomeUnknown, errNotSent, ctx.Err())
		}
	}
	gone := w.gone
	b.mu.Unlock()
	if gone != nil {
		gone()
	}
	select {
	case <-w.done: // answered meanwhile: the answer is better than a guess,
		// unless it is only the cancellation gone() just caused, which says
		// nothing of the entry
		if w.err == nil || !errors.Is(w.err, context.Canceled) {
			return w.res, w.err
		}
	default:
	}
	return nil, fmt.Errorf("%w: forwarded entry sent, no answer before %w", api.ErrOutcomeUnknown, ctx.Err())
}

// run sends q's batches, one after the other, until q is empty; up to
// maxInFlight of them run at once.
func (b *batcher) run(q *batchQueue, c entriesClient) {
	for {
		b.mu.Lock()
		batch := b.take(q)
		if len(batch) == 0 {
			q.senders--
			b.mu.Unlock()
			return
		}
		legacy := !q.legacyAt.IsZero() && b.now().Sub(q.legacyAt) < legacyRecheck
		ctx, cancel := b.batchContext(batch)
		b.mu.Unlock()

		var outs []api.EntryOutcome
		var err error
		if legacy {
			outs = b.sendSingly(ctx, c, batch)
		} else {
			outs, err = c.ApplyEntries(ctx, entries(batch))
			if isMissingRoute(err) {
				b.mu.Lock()
				q.legacyAt = b.now()
				b.mu.Unlock()
				outs, err = b.sendSingly(ctx, c, batch), nil
			}
		}
		cancel()
		for i, w := range batch {
			if err != nil {
				w.err = err
			} else {
				w.res, w.err = outs[i].Result, outs[i].Err
			}
			close(w.done)
		}
	}
}

// take removes the next batch from q's queue: its oldest entries, at most
// maxEntries of them and maxBytes of entries, and always at least one.
// b.mu is held.
func (b *batcher) take(q *batchQueue) []*batchWaiter {
	n, size := 0, 0
	for n < len(q.pending) && n < b.maxEntries {
		size += len(q.pending[n].entry)
		if n > 0 && size > b.maxBytes {
			break
		}
		n++
	}
	batch := make([]*batchWaiter, n)
	copy(batch, q.pending)
	q.pending = append(q.pending[:0], q.pending[n:]...)
	return batch
}

// batchContext is the context of one batch's request: it ends after
// b.timeout, when the node stops, or once every caller of the batch has
// stopped waiting (then nobody reads the answer). b.mu is held.
func (b *batcher) batchContext(batch []*batchWaiter) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	left := len(batch)
	for _, w := range batch {
		var once sync.Once
		w.gone = func() {
			once.Do(func() {
				b.mu.Lock()
				left--
				last := left == 0
				b.mu.Unlock()
				if last {
					cancel()
				}
			})
		}
	}
	stop := b.stop
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// sendSingly forwards each entry of batch on its own
// (/v1/internal/entry), concurrently: the leader is of a version without
// the batch route.
func (b *batcher) sendSingly(ctx context.Context, c entriesClient, batch []*batchWaiter) []api.EntryOutcome {
	outs := make([]api.EntryOutcome, len(batch))
	var wg sync.WaitGroup
	for i, w := range batch {
		wg.Go(func() { outs[i].Result, outs[i].Err = c.ApplyEntry(ctx, w.entry) })
	}
	wg.Wait()
	return outs
}

func entries(batch []*batchWaiter) [][]byte {
	out := make([][]byte, len(batch))
	for i, w := range batch {
		out[i] = w.entry
	}
	return out
}

// isMissingRoute reports whether err is a leader's answer that it has no
// batch route: 404 or 405 from a node of an older version.
func isMissingRoute(err error) bool {
	var apiErr *api.APIError
	return errors.As(err, &apiErr) && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusMethodNotAllowed)
}
