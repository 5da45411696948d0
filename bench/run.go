package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Defaults of the options below.
const (
	DefaultSize        = 1024
	DefaultChannel     = "bench"
	DefaultFrom        = "bench-sender"
	DefaultTo          = "bench-sink"
	DefaultCallTimeout = 15 * time.Second
)

// Progress is what the progress callback gets about once a second.
type Progress struct {
	Elapsed time.Duration
	Done    uint64        // successful operations so far
	Errors  uint64        // failed operations so far
	Rate    float64       // successful operations per second over the last interval
	P50     time.Duration // median latency over the last interval (0: none)
}

// RunID returns a short random hex string that keeps the message ids and
// channels of one run apart from every other run's.
func RunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Payload returns size bytes of printable text.
func Payload(size int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
	var sb strings.Builder
	sb.Grow(size)
	for i := 0; i < size; i++ {
		sb.WriteByte(alphabet[i%len(alphabet)])
	}
	return sb.String()
}

// progressLoop calls fn every second with rec's figures until stop closes.
func progressLoop(rec *Recorder, start time.Time, fn func(Progress), stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, lastAt := uint64(0), start
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			n, errs, win := rec.Tick()
			p := Progress{Elapsed: now.Sub(start), Done: n, Errors: errs, P50: Percentile(win, 50)}
			if dt := now.Sub(lastAt).Seconds(); dt > 0 {
				p.Rate = float64(n-last) / dt
			}
			last, lastAt = n, now
			fn(p)
		}
	}
}

// SendOptions configures RunSend. Exactly one of Duration and Count is > 0.
type SendOptions struct {
	Clients     []*transport.Client // the nodes; worker i uses Clients[i%len]
	Concurrency int                 // closed-loop senders (>= 1)
	Size        int                 // bytes of content.text (default DefaultSize)
	Duration    time.Duration       // run this long (workers stop starting sends after it)
	Count       int                 // or: this many sends in all
	Channel     string              // default DefaultChannel
	From        string              // default DefaultFrom
	To          []string            // default [DefaultTo]
	CallTimeout time.Duration       // bounds each send (default DefaultCallTimeout)
	MaxSamples  int                 // latency samples kept (default DefaultMaxSamples)
	Progress    func(Progress)      // optional, called about once a second
}

// SendReport is the result of RunSend. Latency is send-acknowledged latency:
// from the request to the committed answer.
type SendReport struct {
	Mode           string            `json:"mode"` // "send"
	Nodes          []string          `json:"nodes"`
	Concurrency    int               `json:"concurrency"`
	SizeBytes      int               `json:"size_bytes"`
	Channel        string            `json:"channel"`
	Sends          uint64            `json:"sends"`  // acknowledged
	Errors         uint64            `json:"errors"` // failed sends
	ErrorsByKind   map[string]uint64 `json:"errors_by_kind"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
	SendsPerSecond float64           `json:"sends_per_second"`
	Latency        Latency           `json:"latency"`
}

// ensureSink registers the default sink (DefaultTo), when the run sends
// to it and it is not registered: a send may name only an agent someone
// answers to (the cluster setting unknown_recipients). A node that does
// not answer is left to the sends to report.
func ensureSink(ctx context.Context, c *transport.Client, to []string) error {
	if len(to) != 1 || to[0] != DefaultTo {
		return nil
	}
	if _, err := c.Agent(ctx, DefaultTo, transport.Local); !errors.Is(err, fsm.ErrNotFound) {
		return nil
	}
	if _, err := c.RegisterAgent(ctx, fsm.RegisterAgentCommand{ID: DefaultTo, Role: fsm.DefaultRole, Description: "maosctl bench's sink"}); err != nil {
		return fmt.Errorf("bench: register the sink %s (a send may name only an agent that exists: register it with an admin token, or give --to): %w", DefaultTo, err)
	}
	return nil
}

func clientAddrs(cs []*transport.Client) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Addr()
	}
	return out
}

// RunSend runs Concurrency closed-loop senders: each posts a message with a
// unique id, waits for the answer, and posts the next. It stops after
// Duration or Count sends, or when ctx ends (the report then covers what ran).
// It returns an error only for bad options.
func RunSend(ctx context.Context, o SendOptions) (SendReport, error) {
	if len(o.Clients) == 0 {
		return SendReport{}, errors.New("bench: send: no nodes")
	}
	if o.Concurrency < 1 {
		return SendReport{}, fmt.Errorf("bench: send: concurrency %d, want >= 1", o.Concurrency)
	}
	if (o.Duration > 0) == (o.Count > 0) {
		return SendReport{}, errors.New("bench: send: give exactly one of a duration and a count")
	}
	o.defaults()
	if err := ensureSink(ctx, o.Clients[0], o.To); err != nil {
		return SendReport{}, err
	}
	rec := NewRecorder(o.MaxSamples)
	text := Payload(o.Size)
	run := RunID()
	var claimed atomic.Int64
	start := time.Now()
	deadline := start.Add(o.Duration)
	more := func() bool {
		if ctx.Err() != nil {
			return false
		}
		if o.Count > 0 {
			return claimed.Add(1) <= int64(o.Count)
		}
		return time.Now().Before(deadline)
	}
	var wg, pwg sync.WaitGroup
	stop := make(chan struct{})
	if o.Progress != nil {
		pwg.Add(1)
		go progressLoop(rec, start, o.Progress, stop, &pwg)
	}
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl := o.Clients[w%len(o.Clients)]
			for i := 0; more(); i++ {
				m := &fsm.Message{
					ID:      fmt.Sprintf("bench-%s-%d-%d", run, w, i),
					Channel: o.Channel, From: o.From, To: o.To,
					Content: fsm.Content{Text: text},
				}
				cctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
				t0 := time.Now()
				_, err := cl.Send(cctx, m)
				d := time.Since(t0)
				cancel()
				if err == nil {
					rec.Record(d)
					continue
				}
				if ctx.Err() != nil {
					return // interrupted: not the cluster's failure
				}
				rec.Error(ErrorKind(err))
				// A failing node answers at once; do not spin on it.
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	pwg.Wait()
	n, nerr := rec.Count()
	r := SendReport{
		Mode: "send", Nodes: clientAddrs(o.Clients), Concurrency: o.Concurrency,
		SizeBytes: o.Size, Channel: o.Channel, Sends: n, Errors: nerr, ErrorsByKind: rec.Errors(),
		ElapsedSeconds: elapsed.Seconds(), Latency: rec.Summary(),
	}
	if s := elapsed.Seconds(); s > 0 {
		r.SendsPerSecond = float64(n) / s
	}
	return r, nil
}

func (o *SendOptions) defaults() {
	if o.Size <= 0 {
		o.Size = DefaultSize
	}
	if o.Channel == "" {
		o.Channel = DefaultChannel
	}
	if o.From == "" {
		o.From = DefaultFrom
	}
	if len(o.To) == 0 {
		o.To = []string{DefaultTo}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
}

// DeliveryOptions configures RunDelivery.
type DeliveryOptions struct {
	Send        *transport.Client // node A: where the messages are posted
	Stream      *transport.Client // node C: where the stream is open
	Count       int               // messages, one at a time (>= 1)
	Size        int               // default DefaultSize
	Channel     string            // default "bench-delivery-<run id>": a fresh channel, so the stream has no backlog
	From        string            // default DefaultFrom
	To          []string          // default [DefaultTo]
	CallTimeout time.Duration     // bounds each send and each wait for its event (default DefaultCallTimeout)
	Progress    func(Progress)
}

// DeliveryReport is the result of RunDelivery. Latency runs from the start
// of the send on node A to the event's arrival on node C's stream; SendLatency
// is the same sends' acknowledged latency.
type DeliveryReport struct {
	Mode           string            `json:"mode"` // "delivery"
	SendNode       string            `json:"send_node"`
	StreamNode     string            `json:"stream_node"`
	Channel        string            `json:"channel"`
	SizeBytes      int               `json:"size_bytes"`
	Count          int               `json:"count"`
	Delivered      uint64            `json:"delivered"`
	Errors         uint64            `json:"errors"`
	ErrorsByKind   map[string]uint64 `json:"errors_by_kind"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
	Latency        Latency           `json:"latency"`
	SendLatency    Latency           `json:"send_latency"`
}

// RunDelivery opens a stream of a fresh channel on o.Stream, waits until it
// is live, then posts Count messages on o.Send one after the other, each
// waiting for its own event before the next. A stream that fails or closes
// is an error; failed sends and events that do not come within CallTimeout
// are counted ("not_delivered").
func RunDelivery(ctx context.Context, o DeliveryOptions) (DeliveryReport, error) {
	if o.Send == nil || o.Stream == nil {
		return DeliveryReport{}, errors.New("bench: delivery: no nodes")
	}
	if o.Count < 1 {
		return DeliveryReport{}, fmt.Errorf("bench: delivery: count %d, want >= 1", o.Count)
	}
	so := SendOptions{Size: o.Size, Channel: o.Channel, From: o.From, To: o.To, CallTimeout: o.CallTimeout}
	run := RunID()
	if so.Channel == "" {
		so.Channel = "bench-delivery-" + run
	}
	so.defaults()
	if err := ensureSink(ctx, o.Send, so.To); err != nil {
		return DeliveryReport{}, err
	}
	var (
		mu      sync.Mutex
		waiting = map[string]chan time.Time{}
		ready   = make(chan struct{})
		once    sync.Once
	)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- o.Stream.Stream(sctx, transport.StreamQuery{Channel: so.Channel}, func(ev transport.StreamEvent) error {
			now := time.Now()
			if ev.Ready {
				once.Do(func() { close(ready) })
				return nil
			}
			if ev.Message == nil {
				return nil
			}
			mu.Lock()
			ch := waiting[ev.Message.ID]
			delete(waiting, ev.Message.ID)
			mu.Unlock()
			if ch != nil {
				ch <- now
			}
			return nil
		})
	}()
	streamGone := func(err error) error {
		if err == nil {
			err = errors.New("closed by the server")
		}
		return fmt.Errorf("bench: delivery: stream on %s: %w", o.Stream.Addr(), err)
	}
	select {
	case <-ready:
	case err := <-streamErr:
		return DeliveryReport{}, streamGone(err)
	case <-time.After(so.CallTimeout):
		return DeliveryReport{}, fmt.Errorf("bench: delivery: stream on %s not ready within %s", o.Stream.Addr(), so.CallTimeout)
	case <-ctx.Done():
		return DeliveryReport{}, ctx.Err()
	}
	rec, sendRec := NewRecorder(0), NewRecorder(0)
	text := Payload(so.Size)
	start := time.Now()
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	if o.Progress != nil {
		pwg.Add(1)
		go progressLoop(rec, start, o.Progress, stop, &pwg)
	}
	var failure error
loop:
	for i := 0; i < o.Count && ctx.Err() == nil; i++ {
		id := fmt.Sprintf("bench-%s-d-%d", run, i)
		got := make(chan time.Time, 1)
		mu.Lock()
		waiting[id] = got
		mu.Unlock()
		m := &fsm.Message{ID: id, Channel: so.Channel, From: so.From, To: so.To, Content: fsm.Content{Text: text}}
		cctx, ccancel := context.WithTimeout(ctx, so.CallTimeout)
		t0 := time.Now()
		_, err := o.Send.Send(cctx, m)
		ccancel()
		if err != nil {
			mu.Lock()
			delete(waiting, id)
			mu.Unlock()
			if ctx.Err() == nil {
				rec.Error(ErrorKind(err))
			}
			continue
		}
		sendRec.Record(time.Since(t0))
		timer := time.NewTimer(so.CallTimeout)
		select {
		case at := <-got:
			rec.Record(at.Sub(t0))
		case <-timer.C:
			rec.Error("not_delivered")
			mu.Lock()
			delete(waiting, id)
			mu.Unlock()
		case err := <-streamErr:
			failure = streamGone(err)
			timer.Stop()
			break loop
		case <-ctx.Done():
		}
		timer.Stop()
	}
	elapsed := time.Since(start)
	close(stop)
	pwg.Wait()
	n, nerr := rec.Count()
	return DeliveryReport{
		Mode: "delivery", SendNode: o.Send.Addr(), StreamNode: o.Stream.Addr(), Channel: so.Channel,
		SizeBytes: so.Size, Count: o.Count, Delivered: n, Errors: nerr, ErrorsByKind: rec.Errors(),
		ElapsedSeconds: elapsed.Seconds(), Latency: rec.Summary(), SendLatency: sendRec.Summary(),
	}, failure
}

// FanoutOptions configures RunFanout.
type FanoutOptions struct {
	Send        *transport.Client // where the agents are registered and the message posted
	Poll        *transport.Client // where the inboxes are watched
	Agents      int               // agents to register (1..MaxFanoutAgents)
	Prefix      string            // agent ids are Prefix + 000, 001, ... (default "bench-a-")
	Role        string            // their role (default "bench")
	To          string            // the recipient: "all" (default) or "role:" + Role
	Channel     string            // default DefaultChannel
	From        string            // default DefaultFrom
	Size        int               // default DefaultSize
	Timeout     time.Duration     // give up waiting for the inboxes after this (default 30s)
	CallTimeout time.Duration     // bounds each API call (default DefaultCallTimeout)
}

// MaxFanoutAgents bounds FanoutOptions.Agents (and so the polling work).
const MaxFanoutAgents = 10_000

// FanoutReport is the result of RunFanout. AllDeliveredMs runs from the start
// of the send to the poll round that found the message in the last inbox;
// its resolution is one poll round (PollRoundMs, the mean round time).
type FanoutReport struct {
	Mode           string   `json:"mode"` // "fanout"
	SendNode       string   `json:"send_node"`
	PollNode       string   `json:"poll_node"`
	Agents         int      `json:"agents"`
	To             string   `json:"to"`
	MessageID      string   `json:"message_id"`
	Seq            uint64   `json:"seq"`
	RegisterMs     float64  `json:"register_ms"`
	SendMs         float64  `json:"send_ms"` // the send's acknowledged latency
	AllDeliveredMs float64  `json:"all_delivered_ms"`
	Delivered      int      `json:"delivered"`
	Missing        []string `json:"missing"` // agents whose inbox did not get it in time (first 20)
	PollRounds     int      `json:"poll_rounds"`
	PollRoundMs    float64  `json:"poll_round_ms"`
}

const fanoutPollers = 8

// RunFanout registers Agents agents on o.Send, reads each inbox's total on
// o.Poll (strongly, so the registrations are there), posts one message to
// o.To, and polls the inbox counts on o.Poll (local reads, 8 at a time) until
// every total grew or Timeout passes. Missing inboxes are reported, not an
// error; failed registrations, reads and the send are errors.
func RunFanout(ctx context.Context, o FanoutOptions) (FanoutReport, error) {
	if o.Send == nil || o.Poll == nil {
		return FanoutReport{}, errors.New("bench: fanout: no nodes")
	}
	if o.Agents < 1 || o.Agents > MaxFanoutAgents {
		return FanoutReport{}, fmt.Errorf("bench: fanout: agents %d, want 1..%d", o.Agents, MaxFanoutAgents)
	}
	if o.Prefix == "" {
		o.Prefix = "bench-a-"
	}
	if o.Role == "" {
		o.Role = "bench"
	}
	if o.To == "" {
		o.To = "all"
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	so := SendOptions{Size: o.Size, Channel: o.Channel, From: o.From, CallTimeout: o.CallTimeout}
	so.defaults()
	ids := make([]string, o.Agents)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%03d", o.Prefix, i)
	}
	call := func(fn func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, so.CallTimeout)
		defer cancel()
		return fn(cctx)
	}
	// each runs fn over the ids, fanoutPollers at a time; the first error wins.
	each := func(ids []string, fn func(i int, id string) error) error {
		var wg sync.WaitGroup
		errs := make([]error, len(ids))
		sem := make(chan struct{}, fanoutPollers)
		for i, id := range ids {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				errs[i] = fn(i, id)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	t0 := time.Now()
	if err := each(ids, func(_ int, id string) error {
		return call(func(c context.Context) error {
			_, err := o.Send.RegisterAgent(c, fsm.RegisterAgentCommand{ID: id, Role: o.Role, Description: "maosctl bench fanout"})
			if err != nil {
				return fmt.Errorf("register %s: %w", id, err)
			}
			return nil
		})
	}); err != nil {
		return FanoutReport{}, fmt.Errorf("bench: fanout: %w", err)
	}
	rep := FanoutReport{Mode: "fanout", SendNode: o.Send.Addr(), PollNode: o.Poll.Addr(), Agents: o.Agents, To: o.To,
		RegisterMs: ms(time.Since(t0)), Missing: []string{}}
	base := make([]uint64, len(ids))
	if err := each(ids, func(i int, id string) error {
		return call(func(c context.Context) error {
			ic, err := o.Poll.InboxCounts(c, id, transport.Strong)
			if err != nil {
				return fmt.Errorf("inbox counts of %s: %w", id, err)
			}
			base[i] = ic.Total
			return nil
		})
	}); err != nil {
		return FanoutReport{}, fmt.Errorf("bench: fanout: %w", err)
	}
	m := &fsm.Message{ID: "bench-" + RunID() + "-fanout", Channel: so.Channel, From: so.From, To: []string{o.To},
		Content: fsm.Content{Text: Payload(so.Size)}}
	start := time.Now()
	var res *transport.SendResponse
	if err := call(func(c context.Context) (err error) { res, err = o.Send.Send(c, m); return err }); err != nil {
		return FanoutReport{}, fmt.Errorf("bench: fanout: send to %s: %w", o.To, err)
	}
	rep.SendMs, rep.MessageID, rep.Seq = ms(time.Since(start)), res.ID, res.Seq
	pending := make([]int, len(ids))
	for i := range pending {
		pending[i] = i
	}
	deadline := start.Add(o.Timeout)
	var rounds time.Duration
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		r0 := time.Now()
		got := make([]bool, len(pending))
		pids := make([]string, len(pending))
		for k, i := range pending {
			pids[k] = ids[i]
		}
		if err := each(pids, func(k int, id string) error {
			return call(func(c context.Context) error {
				ic, err := o.Poll.InboxCounts(c, id, transport.Local)
				if err != nil {
					return fmt.Errorf("inbox counts of %s: %w", id, err)
				}
				got[k] = ic.Total > base[pending[k]]
				return nil
			})
		}); err != nil {
			return rep, fmt.Errorf("bench: fanout: %w", err)
		}
		rep.PollRounds++
		rounds += time.Since(r0)
		next := pending[:0]
		for k, i := range pending {
			if !got[k] {
				next = append(next, i)
			}
		}
		pending = next
		if len(pending) == 0 {
			rep.AllDeliveredMs = ms(time.Since(start))
		}
	}
	rep.Delivered = len(ids) - len(pending)
	for _, i := range pending {
		if len(rep.Missing) == 20 {
			break
		}
		rep.Missing = append(rep.Missing, ids[i])
	}
	if rep.PollRounds > 0 {
		rep.PollRoundMs = ms(rounds / time.Duration(rep.PollRounds))
	}
	return rep, nil
}
