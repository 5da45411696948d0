package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// fakeLeader is the leader's end of a batcher: it records each batch and
// answers each entry with "r:" and the entry, or with what answer says.
type fakeLeader struct {
	mu       sync.Mutex
	batches  [][]string // the entries of each ApplyEntries call, in order
	singles  []string   // the entries of each ApplyEntry call
	gate     chan struct{}
	gateOne  bool                                // only the first call waits at gate
	batchErr error                               // the whole request's answer, if set
	answer   func(entry string) api.EntryOutcome // nil: "r:"+entry
	ctxs     []context.Context                   // each ApplyEntries call's context
}

func (f *fakeLeader) ApplyEntries(ctx context.Context, entries [][]byte) ([]api.EntryOutcome, error) {
	f.mu.Lock()
	var got []string
	for _, e := range entries {
		got = append(got, string(e))
	}
	f.batches = append(f.batches, got)
	f.ctxs = append(f.ctxs, ctx)
	gate, batchErr := f.gate, f.batchErr
	if f.gateOne {
		f.gate = nil
	}
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if batchErr != nil {
		return nil, batchErr
	}
	outs := make([]api.EntryOutcome, len(got))
	for i, e := range got {
		outs[i] = f.outcome(e)
	}
	return outs, nil
}

func (f *fakeLeader) ApplyEntry(_ context.Context, entry []byte) (json.RawMessage, error) {
	f.mu.Lock()
	f.singles = append(f.singles, string(entry))
	f.mu.Unlock()
	o := f.outcome(string(entry))
	return o.Result, o.Err
}

func (f *fakeLeader) outcome(e string) api.EntryOutcome {
	if f.answer != nil {
		return f.answer(e)
	}
	return api.EntryOutcome{Result: json.RawMessage(`"r:` + e + `"`)}
}

func (f *fakeLeader) calls() (batches [][]string, singles []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches), slices.Clone(f.singles)
}

// waitUntil polls cond every millisecond for at most 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (b *batcher) pendingLen(addr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues[addr]; q != nil {
		return len(q.pending)
	}
	return 0
}

type callResult struct {
	entry string
	res   json.RawMessage
	err   error
}

// queueBehindGate starts one call whose batch the leader holds at the
// gate, then the given entries one by one, each queued before the next
// starts (so the queue keeps their order), and returns the results'
// channel: the first call's, then one per entry. b sends one batch at a
// time, so the queue waits for the first.
func queueBehindGate(t *testing.T, b *batcher, f *fakeLeader, entries []string) chan callResult {
	t.Helper()
	b.maxInFlight = 1
	out := make(chan callResult, len(entries)+1)
	call := func(e string) {
		res, err := b.do(context.Background(), "leader", f, []byte(e))
		out <- callResult{e, res, err}
	}
	go call("first")
	waitUntil(t, "the first batch at the leader", func() bool { bs, _ := f.calls(); return len(bs) == 1 })
	for i, e := range entries {
		go call(e)
		waitUntil(t, fmt.Sprintf("entry %d queued", i), func() bool { return b.pendingLen("leader") == i+1 })
	}
	return out
}

// While a batch is in flight the writes that come queue, and go as one
// batch when it returns; each caller gets its own entry's result.
func TestBatcherQueuesWritesWhileOneIsInFlight(t *testing.T) {
	f := &fakeLeader{gate: make(chan struct{})}
	b := newBatcher(10*time.Second, nil)
	var entries []string
	for i := range 10 {
		entries = append(entries, fmt.Sprintf("e%d", i))
	}
	out := queueBehindGate(t, b, f, entries)
	close(f.gate)
	for range len(entries) + 1 {
		r := <-out
		if r.err != nil || string(r.res) != `"r:`+r.entry+`"` {
			t.Errorf("entry %s: result %s, error %v; want its own result", r.entry, r.res, r.err)
		}
	}
	batches, singles := f.calls()
	if len(batches) != 2 || len(batches[0]) != 1 || !slices.Equal(batches[1], entries) {
		t.Errorf("batches %q: want [first] then the 10 queued entries in order", batches)
	}
	if len(singles) != 0 {
		t.Errorf("single-entry calls %q, want none", singles)
	}
}

// A queue longer than a batch's bounds goes as several batches, in order,
// each within maxEntries and maxBytes; one entry over maxBytes goes alone.
func TestBatcherSplitsAtItsBounds(t *testing.T) {
	for _, tc := range []struct {
		name                string
		maxEntries, maxByte int
		entries             []string
		want                [][]string
	}{
		{"by count", 3, 1 << 20, []string{"a", "b", "c", "d", "e", "f", "g"},
			[][]string{{"a", "b", "c"}, {"d", "e", "f"}, {"g"}}},
		{"by bytes", 100, 25, []string{"aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc", "dddddddddd", strings.Repeat("x", 40), "eeeeeeeeee"},
			[][]string{{"aaaaaaaaaa", "bbbbbbbbbb"}, {"cccccccccc", "dddddddddd"}, {strings.Repeat("x", 40)}, {"eeeeeeeeee"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLeader{gate: make(chan struct{})}
			b := newBatcher(10*time.Second, nil)
			b.maxEntries, b.maxBytes = tc.maxEntries, tc.maxByte
			out := queueBehindGate(t, b, f, tc.entries)
			close(f.gate)
			for range len(tc.entries) + 1 {
				if r := <-out; r.err != nil || string(r.res) != `"r:`+r.entry+`"` {
					t.Errorf("entry %s: result %s, error %v", r.entry, r.res, r.err)
				}
			}
			batches, _ := f.calls()
			if got := batches[1:]; !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("batches after the first %q, want %q", got, tc.want)
			}
		})
	}
}

// One entry's error fails that entry only; the others of its batch get
// their results.
func TestBatcherEntryErrorFailsOnlyItsEntry(t *testing.T) {
	refused := &api.APIError{Status: http.StatusConflict, Code: api.CodeConflict, Message: "id m2 is stored with other content"}
	f := &fakeLeader{gate: make(chan struct{}), answer: func(e string) api.EntryOutcome {
		if e == "bad" {
			return api.EntryOutcome{Err: refused}
		}
		return api.EntryOutcome{Result: json.RawMessage(`"r:` + e + `"`)}
	}}
	b := newBatcher(10*time.Second, nil)
	out := queueBehindGate(t, b, f, []string{"ok1", "bad", "ok2"})
	close(f.gate)
	for range 4 {
		r := <-out
		switch {
		case r.entry == "bad":
			if !errors.Is(r.err, refused) || r.res != nil {
				t.Errorf("bad entry: result %s, error %v; want its refusal", r.res, r.err)
			}
		case r.err != nil || string(r.res) != `"r:`+r.entry+`"`:
			t.Errorf("entry %s: result %s, error %v; want its result", r.entry, r.res, r.err)
		}
	}
}

// A failure of the whole request (here the node no longer leads) reaches
// every entry of the batch, each of whose callers retries on its own.
func TestBatcherRequestErrorReachesEveryEntry(t *testing.T) {
	f := &fakeLeader{batchErr: &api.APIError{Status: http.StatusServiceUnavailable, Code: api.CodeNotLeader, Message: "node n1 (leader is \"n2\")"}}
	f.gate = make(chan struct{})
	b := newBatcher(10*time.Second, nil)
	out := queueBehindGate(t, b, f, []string{"a", "b", "c"})
	close(f.gate)
	for range 4 {
		r := <-out
		if !errors.Is(r.err, api.ErrNotLeader) || isFinal(r.err) {
			t.Errorf("entry %s: error %v; want not_leader, which leaderDo retries", r.entry, r.err)
		}
	}
}

// A caller that stops waiting while its entry is queued takes it out of
// the queue (never sent); one whose entry is in flight is told the outcome
// is unknown, and the request is abandoned once no caller waits for it.
// Both errors are retried by leaderDo, never final.
func TestBatcherCallerThatStopsWaiting(t *testing.T) {
	f := &fakeLeader{gate: make(chan struct{})}
	b := newBatcher(10*time.Second, nil)
	b.maxInFlight = 1
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := b.do(ctx, "leader", f, []byte("first")); first <- err }()
	waitUntil(t, "the first batch at the leader", func() bool { bs, _ := f.calls(); return len(bs) == 1 })
	qctx, qcancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { _, err := b.do(qctx, "leader", f, []byte("queued")); queued <- err }()
	waitUntil(t, "the entry queued", func() bool { return b.pendingLen("leader") == 1 })

	qcancel()
	err := <-queued
	if !errors.Is(err, errNotSent) || !errors.Is(err, api.ErrOutcomeUnknown) || isFinal(err) {
		t.Errorf("queued caller gone: %v; want not sent, outcome unknown, not final", err)
	}
	if n := b.pendingLen("leader"); n != 0 {
		t.Errorf("%d entries still queued, want 0", n)
	}

	cancel()
	err = <-first
	if !errors.Is(err, api.ErrOutcomeUnknown) || errors.Is(err, errNotSent) || isFinal(err) {
		t.Errorf("in-flight caller gone: %v; want outcome unknown (sent), not final", err)
	}
	f.mu.Lock()
	reqCtx := f.ctxs[0]
	f.mu.Unlock()
	select {
	case <-reqCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the batch's request still runs with no caller waiting")
	}
	batches, _ := f.calls()
	for _, bt := range batches {
		if slices.Contains(bt, "queued") {
			t.Errorf("the abandoned queued entry was sent: %q", batches)
		}
	}
}

// Closing the node's stop channel ends a batch in flight: its callers get
// the request's error, not a hang.
func TestBatcherStopsWithTheNode(t *testing.T) {
	f := &fakeLeader{gate: make(chan struct{})}
	stop := make(chan struct{})
	b := newBatcher(time.Minute, stop)
	done := make(chan error, 1)
	go func() { _, err := b.do(context.Background(), "leader", f, []byte("e")); done <- err }()
	waitUntil(t, "the batch at the leader", func() bool { bs, _ := f.calls(); return len(bs) == 1 })
	close(stop)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the batch answered after the node stopped; want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the batch in flight did not end with the node")
	}
}

// A leader of an older version has no batch route (404): the batch goes
// entry by entry through /v1/internal/entry, and so do the next ones until
// legacyRecheck has passed, when the batch route is tried again.
func TestBatcherFallsBackToSingleEntriesOnAnOlderLeader(t *testing.T) {
	f := &fakeLeader{batchErr: &api.APIError{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "no route"}}
	b := newBatcher(10*time.Second, nil)
	now := time.Unix(1e9, 0)
	b.now = func() time.Time { return now }
	send := func(e string) {
		t.Helper()
		res, err := b.do(context.Background(), "leader", f, []byte(e))
		if err != nil || string(res) != `"r:`+e+`"` {
			t.Fatalf("entry %s: result %s, error %v; want its result through the single route", e, res, err)
		}
	}
	send("a")
	send("b")
	batches, singles := f.calls()
	if len(batches) != 1 || !slices.Equal(singles, []string{"a", "b"}) {
		t.Fatalf("batch calls %q, single calls %q: want one batch try, then a and b singly", batches, singles)
	}
	now = now.Add(legacyRecheck)
	send("c")
	if batches, _ = f.calls(); len(batches) != 2 {
		t.Errorf("after %s: %d batch calls, want the batch route tried again", legacyRecheck, len(batches))
	}
}

// A batch the leader is slow to answer does not hold up the writes after
// it: they go in another batch (maxInFlight), and the slow one still gets
// its answer when it comes.
func TestBatcherKeepsMovingPastASlowBatch(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeLeader{gate: gate, gateOne: true}
	b := newBatcher(10*time.Second, nil)
	if b.maxInFlight < 2 {
		t.Fatalf("maxInFlight %d: one slow batch would hold up every write behind it", b.maxInFlight)
	}
	slow := make(chan callResult, 1)
	go func() {
		res, err := b.do(context.Background(), "leader", f, []byte("slow"))
		slow <- callResult{"slow", res, err}
	}()
	waitUntil(t, "the slow batch at the leader", func() bool { bs, _ := f.calls(); return len(bs) == 1 })
	for i := range 5 {
		e := fmt.Sprintf("e%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := b.do(ctx, "leader", f, []byte(e))
		cancel()
		if err != nil || string(res) != `"r:`+e+`"` {
			t.Fatalf("write %s behind a slow batch: result %s, error %v; want its result", e, res, err)
		}
	}
	select {
	case r := <-slow:
		t.Fatalf("the slow batch answered before the leader did: %s, %v", r.res, r.err)
	default:
	}
	close(gate)
	if r := <-slow; r.err != nil || string(r.res) != `"r:slow"` {
		t.Errorf("the slow batch: result %s, error %v; want its result", r.res, r.err)
	}
}
