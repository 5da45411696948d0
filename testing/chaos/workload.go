package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
)

// PageLimit is the page size of the workload's strong reads and of the
// checker's full reads: the API's maximum (api.MaxPageLimit).
const PageLimit = api.MaxPageLimit

// Workload defaults.
const (
	DefaultClients        = 8
	DefaultReaders        = 2
	DefaultChannels       = 4
	DefaultAttemptTimeout = 3 * time.Second
	DefaultRetryFor       = 30 * time.Second
	DefaultTextBytes      = 64
	DefaultPrefix         = "chaos"
)

// Backoff between two attempts of the same message, and between two reads.
const (
	minBackoff    = 25 * time.Millisecond
	maxBackoff    = 200 * time.Millisecond
	minReadPause  = 5 * time.Millisecond
	maxReadPause  = 50 * time.Millisecond
	noNodesPause  = 50 * time.Millisecond
	letters       = "abcdefghijklmnopqrstuvwxyz0123456789"
	sinkRecipient = "all"
)

// WorkloadConfig configures RunWorkload. Zero values take the defaults.
type WorkloadConfig struct {
	// Clients is the number of senders (default 8).
	Clients int
	// Readers is the number of strong readers (default 2; negative for
	// none).
	Readers int
	// Channels is the number of channels, named {Prefix}-0 ..
	// {Prefix}-{Channels-1} (default 4).
	Channels int
	// Nodes returns the nodes a client may pick from right now; the
	// orchestrator passes the live, unpaused ones. Required. It is called
	// before every attempt, from many goroutines.
	Nodes func() []*harness.Node
	// AttemptTimeout bounds one request (default 3 s).
	AttemptTimeout time.Duration
	// RetryFor is how long one message is retried from its first attempt
	// (default 30 s).
	RetryFor time.Duration
	// Seed seeds every client's math/rand/v2 PCG (with the client number).
	Seed int64
	// TextBytes is the length of the random part of each message's text
	// (default 64).
	TextBytes int
	// Prefix names the channels ({Prefix}-{i}), the message ids
	// ({Prefix}-c{client}-{n}) and senders ({Prefix}-c{client}); it must be
	// a valid channel name (^[a-z0-9][a-z0-9._-]{0,63}$, short enough for
	// the suffixes). Default "chaos". Give two runs against the same cluster
	// different prefixes, or their ids collide.
	Prefix string
	// To is the recipient of every message (default "all"). A run with
	// watcher agents gives a plain id nobody watches, so the load stays out
	// of their inboxes.
	To string
}

func (c WorkloadConfig) withDefaults() WorkloadConfig {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Readers == 0 {
		c.Readers = DefaultReaders
	}
	if c.Readers < 0 {
		c.Readers = 0
	}
	if c.Channels <= 0 {
		c.Channels = DefaultChannels
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.RetryFor <= 0 {
		c.RetryFor = DefaultRetryFor
	}
	if c.TextBytes <= 0 {
		c.TextBytes = DefaultTextBytes
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.To == "" {
		c.To = sinkRecipient
	}
	return c
}

// ChannelNames returns the channels the workload writes to and reads,
// {Prefix}-0 .. {Prefix}-{Channels-1}: what Check should read.
func (c WorkloadConfig) ChannelNames() []string {
	c = c.withDefaults()
	out := make([]string, c.Channels)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", c.Prefix, i)
	}
	return out
}

// RunWorkload runs cfg.Clients senders and cfg.Readers strong readers
// against the nodes cfg.Nodes returns, recording every attempt in h, until
// ctx is done. Then no new message is started, but a message in flight is
// still retried until acknowledged or RetryFor after its first attempt, so
// RunWorkload returns at most about RetryFor + AttemptTimeout after ctx
// ends, when every client has stopped.
//
// A sender loops: a new message (id {Prefix}-c{client}-{n}, a random
// channel, a random text), sent through a random node; after a retryable
// failure (503 no_leader / not_leader / not_ready, connection refused) or
// an unknown outcome it sends the same message again through another node
// after 25–200 ms, until OK or RetryFor has passed. A 4xx answer (bad
// input, 409 conflict) is a bug in maos, since every message is valid and
// new: it is recorded as Fail and the sender moves on; the checker reports
// it. A reader loops: a strong read of up to PageLimit entries of a random
// channel through a random node; it starts at the channel's first page and,
// once a page comes back full, reads on from the middle of the last full
// page, so its reads follow the growing tail.
//
// The error is for a bad configuration only.
func RunWorkload(ctx context.Context, cfg WorkloadConfig, h *History) error {
	if cfg.Nodes == nil {
		return errors.New("chaos: workload: Nodes is required")
	}
	if h == nil {
		return errors.New("chaos: workload: nil history")
	}
	cfg = cfg.withDefaults()
	if cfg.Clients < 0 {
		return fmt.Errorf("chaos: workload: %d clients", cfg.Clients)
	}
	channels := cfg.ChannelNames()
	for _, ch := range channels {
		if !api.ValidName(ch) {
			return fmt.Errorf("chaos: workload: channel %q (from prefix %q) is not a valid channel name", ch, cfg.Prefix)
		}
	}
	from := fmt.Sprintf("%s-c%d", cfg.Prefix, cfg.Clients+cfg.Readers)
	if !api.ValidName(from) {
		return fmt.Errorf("chaos: workload: sender name %q (from prefix %q) is not valid", from, cfg.Prefix)
	}
	w := &workload{cfg: cfg, h: h, channels: channels}
	var wg sync.WaitGroup
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.sender(ctx, c)
		}()
	}
	for r := 0; r < cfg.Readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.reader(ctx, cfg.Clients+r)
		}()
	}
	wg.Wait()
	return nil
}

type workload struct {
	cfg      WorkloadConfig
	h        *History
	channels []string
}

func (w *workload) rng(client int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(client)+1))
}

// pick returns a random node of cfg.Nodes() that has been started, other
// than avoid when there is a choice; nil when none.
func (w *workload) pick(r *rand.Rand, avoid string) (*harness.Node, *client.Client) {
	nodes := w.cfg.Nodes()
	type cand struct {
		n *harness.Node
		c *client.Client
	}
	cands := make([]cand, 0, len(nodes))
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if c := n.Client(); c != nil {
			cands = append(cands, cand{n, c})
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	if len(cands) > 1 && avoid != "" {
		others := cands[:0:0]
		for _, c := range cands {
			if c.n.APIAddr() != avoid {
				others = append(others, c)
			}
		}
		if len(others) > 0 {
			cands = others
		}
	}
	c := cands[r.IntN(len(cands))]
	return c.n, c.c
}

// sleepOrDone waits d or until ctx ends.
func sleepOrDone(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// randomText is n random letters and digits, the body of a workload
// message.
func randomText(r *rand.Rand, n int) []byte {
	text := make([]byte, n)
	for i := range text {
		text[i] = letters[r.IntN(len(letters))]
	}
	return text
}

func randBetween(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

func (w *workload) sender(ctx context.Context, client int) {
	r := w.rng(client)
	from := fmt.Sprintf("%s-c%d", w.cfg.Prefix, client)
	for n := 1; ctx.Err() == nil; n++ {
		text := randomText(r, w.cfg.TextBytes)
		id := fmt.Sprintf("%s-c%d-%d", w.cfg.Prefix, client, n)
		m := &api.Message{
			ID:      id,
			Channel: w.channels[r.IntN(len(w.channels))],
			From:    from,
			To:      api.Recipients{w.cfg.To},
			Type:    "chat",
			Content: api.Content{Text: id + " " + string(text)},
		}
		w.sendOne(ctx, client, r, m)
	}
}

// sendOne sends m until it is acknowledged, a final error comes back or
// RetryFor has passed since the first attempt. It outlives ctx: ctx only
// shortens the pauses between attempts.
func (w *workload) sendOne(ctx context.Context, client int, r *rand.Rand, m *api.Message) {
	deadline := time.Now().Add(w.cfg.RetryFor)
	last := ""
	for attempt := 0; attempt == 0 || time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			sleepOrDone(context.Background(), randBetween(r, minBackoff, maxBackoff))
		}
		node, cl := w.pick(r, last)
		if node == nil {
			continue
		}
		last = node.APIAddr()
		handle := w.h.Invoke(Op{Client: client, Kind: KindSend, Channel: m.Channel, ID: m.ID, Node: last})
		actx, cancel := context.WithTimeout(context.Background(), w.cfg.AttemptTimeout)
		resp, err := cl.Send(actx, m)
		cancel()
		outcome, retry := classify(err)
		w.h.Complete(handle, func(op *Op) {
			op.Outcome = outcome
			if err != nil {
				op.Err, op.Code = err.Error(), api.ErrorKind(err)
				return
			}
			op.Seq = resp.Seq
			if resp.ID != m.ID {
				// Recorded as unknown: the node answered for another id.
				op.Outcome = Unknown
				op.Err = fmt.Sprintf("chaos: acknowledged id %q, sent %q", resp.ID, m.ID)
			}
		})
		if err == nil || !retry {
			return
		}
	}
}

// classify says how an attempt ended and whether to try again, in the
// history's terms: api.Classify's outcome (the one rule every caller
// shares), where only what cannot have reached the log is Fail.
func classify(err error) (o Outcome, retry bool) {
	switch c := api.Classify(err); c {
	case api.Succeeded:
		return OK, false
	case api.Refused, api.NotCommitted:
		return Fail, c.Retry()
	default:
		return Unknown, true
	}
}

func (w *workload) reader(ctx context.Context, client int) {
	r := w.rng(client)
	after := make(map[string]uint64, len(w.channels))
	last := ""
	for ctx.Err() == nil {
		ch := w.channels[r.IntN(len(w.channels))]
		node, cl := w.pick(r, last)
		if node == nil {
			sleepOrDone(ctx, noNodesPause)
			continue
		}
		last = node.APIAddr()
		handle := w.h.Invoke(Op{Client: client, Kind: KindRead, Channel: ch, After: after[ch], Node: last})
		actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
		page, err := cl.ChannelPage(actx, ch, after[ch], PageLimit, api.Strong)
		cancel()
		var entries []Entry
		if err == nil {
			entries = make([]Entry, len(page.Messages))
			for i, m := range page.Messages {
				entries[i] = Entry{Seq: m.Seq, ID: m.ID}
			}
		}
		w.h.Complete(handle, func(op *Op) {
			if err != nil {
				op.Outcome, op.Err, op.Code = Fail, err.Error(), api.ErrorKind(err)
				return
			}
			op.Outcome, op.Read, op.HasMore = OK, entries, page.HasMore
		})
		if err == nil && len(entries) >= PageLimit {
			after[ch] = entries[len(entries)/2].Seq
		}
		sleepOrDone(ctx, randBetween(r, minReadPause, maxReadPause))
	}
}

// Acked returns the id and seq of every send acknowledged OK. If one id was
// acknowledged with different seqs (a bug the checker reports), the seq of
// its first acknowledgement wins.
func (h *History) Acked() map[string]uint64 {
	out := map[string]uint64{}
	for _, op := range h.Ops() {
		if op.Kind == KindSend && op.Outcome == OK {
			if _, ok := out[op.ID]; !ok {
				out[op.ID] = op.Seq
			}
		}
	}
	return out
}
