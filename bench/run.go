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

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
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
	Clients     []*client.Client // the nodes; worker i uses Clients[i%len]
	Concurrency int              // closed-loop senders (>= 1)
	Size        int              // bytes of content.text (default DefaultSize)
	Duration    time.Duration    // run this long (workers stop starting sends after it)
	Count       int              // or: this many sends in all
	Channel     string           // default DefaultChannel
	From        string           // default DefaultFrom
	To          []string         // default [DefaultTo]
	CallTimeout time.Duration    // bounds each send (default DefaultCallTimeout)
	MaxSamples  int              // latency samples kept (default DefaultMaxSamples)
	Progress    func(Progress)   // optional, called about once a second
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
func ensureSink(ctx context.Context, c *client.Client, to []string) error {
	if len(to) != 1 || to[0] != DefaultTo {
		return nil
	}
	if _, err := c.Agent(ctx, DefaultTo, api.Local); !errors.Is(err, api.ErrNotFound) {
		return nil
	}
	if _, err := c.RegisterAgent(ctx, api.RegisterAgentCommand{ID: DefaultTo, Role: api.DefaultRole, Description: "maosctl bench's sink"}); err != nil {
		return fmt.Errorf("bench: register the sink %s (a send may name only an agent that exists: register it with an admin token, or give --to): %w", DefaultTo, err)
	}
	return nil
}

func clientAddrs(cs []*client.Client) []string {
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
			sender{o: &o, rec: rec, run: run, text: text}.loop(ctx, w, more)
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

// sender is what RunSend's closed-loop senders share.
type sender struct {
	o    *SendOptions
	rec  *Recorder
	run  string // the run's id, in the messages' ids
	text string // the payload
}

// loop is sender w: it posts through its client while more says so, each
// send after the last was answered, recording latencies and errors.
func (s sender) loop(ctx context.Context, w int, more func() bool) {
	o := s.o
	cl := o.Clients[w%len(o.Clients)]
	for i := 0; more(); i++ {
		m := &api.Message{
			ID:      fmt.Sprintf("bench-%s-%d-%d", s.run, w, i),
			Channel: o.Channel, From: o.From, To: o.To,
			Content: api.Content{Text: s.text},
		}
		cctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
		t0 := time.Now()
		_, err := cl.Send(cctx, m)
		d := time.Since(t0)
		cancel()
		if err == nil {
			s.rec.Record(d)
			continue
		}
		if ctx.Err() != nil {
			return // interrupted: not the cluster's failure
		}
		s.rec.Error(api.ErrorKind(err))
		// A failing node answers at once; do not spin on it.
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
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
	Send        *client.Client // node A: where the messages are posted
	Stream      *client.Client // node C: where the stream is open
	Count       int            // messages, one at a time (>= 1)
	Size        int            // default DefaultSize
	Channel     string         // default "bench-delivery-<run id>": a fresh channel, so the stream has no backlog
	From        string         // default DefaultFrom
	To          []string       // default [DefaultTo]
	CallTimeout time.Duration  // bounds each send and each wait for its event (default DefaultCallTimeout)
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
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ds := openDeliveryStream(sctx, o.Stream, so.Channel)
	if err := ds.waitReady(ctx, so.CallTimeout); err != nil {
		return DeliveryReport{}, err
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
	for i := 0; i < o.Count && ctx.Err() == nil && failure == nil; i++ {
		m := &api.Message{ID: fmt.Sprintf("bench-%s-d-%d", run, i), Channel: so.Channel, From: so.From, To: so.To,
			Content: api.Content{Text: text}}
		failure = ds.deliverOne(ctx, o.Send, m, so.CallTimeout, rec, sendRec)
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

// deliveryStream is RunDelivery's stream: it tells each message's waiter
// when its event came.
type deliveryStream struct {
	addr    string
	mu      sync.Mutex
	waiting map[string]chan time.Time // by message id, until its event came
	ready   chan struct{}             // closed when the stream is live
	once    sync.Once
	err     chan error // the stream's end
}

// openDeliveryStream opens a stream of channel on c until ctx ends.
func openDeliveryStream(ctx context.Context, c *client.Client, channel string) *deliveryStream {
	ds := &deliveryStream{addr: c.Addr(), waiting: map[string]chan time.Time{}, ready: make(chan struct{}), err: make(chan error, 1)}
	go func() {
		ds.err <- c.Stream(ctx, api.StreamQuery{Channel: channel}, ds.event)
	}()
	return ds
}

// event passes a message's arrival time to its waiter.
func (ds *deliveryStream) event(ev api.StreamEvent) error {
	now := time.Now()
	if ev.Ready {
		ds.once.Do(func() { close(ds.ready) })
		return nil
	}
	if ev.Message == nil {
		return nil
	}
	ds.mu.Lock()
	ch := ds.waiting[ev.Message.ID]
	delete(ds.waiting, ev.Message.ID)
	ds.mu.Unlock()
	if ch != nil {
		ch <- now
	}
	return nil
}

// gone is the error of a stream that ended with err (nil: closed).
func (ds *deliveryStream) gone(err error) error {
	if err == nil {
		err = errors.New("closed by the server")
	}
	return fmt.Errorf("bench: delivery: stream on %s: %w", ds.addr, err)
}

// waitReady waits until the stream is live, for at most timeout.
func (ds *deliveryStream) waitReady(ctx context.Context, timeout time.Duration) error {
	select {
	case <-ds.ready:
		return nil
	case err := <-ds.err:
		return ds.gone(err)
	case <-time.After(timeout):
		return fmt.Errorf("bench: delivery: stream on %s not ready within %s", ds.addr, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait registers a waiter for id's event; forget drops it.
func (ds *deliveryStream) wait(id string) chan time.Time {
	got := make(chan time.Time, 1)
	ds.mu.Lock()
	ds.waiting[id] = got
	ds.mu.Unlock()
	return got
}

func (ds *deliveryStream) forget(id string) {
	ds.mu.Lock()
	delete(ds.waiting, id)
	ds.mu.Unlock()
}

// deliverOne sends m through c and waits up to timeout for its event,
// recording the send's latency in sendRec and the delivery's (or its
// failure) in rec. It returns an error only when the stream ended.
func (ds *deliveryStream) deliverOne(ctx context.Context, c *client.Client, m *api.Message, timeout time.Duration, rec, sendRec *Recorder) error {
	got := ds.wait(m.ID)
	cctx, ccancel := context.WithTimeout(ctx, timeout)
	t0 := time.Now()
	_, err := c.Send(cctx, m)
	ccancel()
	if err != nil {
		ds.forget(m.ID)
		if ctx.Err() == nil {
			rec.Error(api.ErrorKind(err))
		}
		return nil
	}
	sendRec.Record(time.Since(t0))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case at := <-got:
		rec.Record(at.Sub(t0))
	case <-timer.C:
		rec.Error("not_delivered")
		ds.forget(m.ID)
	case err := <-ds.err:
		return ds.gone(err)
	case <-ctx.Done():
	}
	return nil
}

// FanoutOptions configures RunFanout.
type FanoutOptions struct {
	Send        *client.Client // where the agents are registered and the message posted
	Poll        *client.Client // where the inboxes are watched
	Agents      int            // agents to register (1..MaxFanoutAgents)
	Prefix      string         // agent ids are Prefix + 000, 001, ... (default "bench-a-")
	Role        string         // their role (default "bench")
	To          string         // the recipient: "all" (default) or "role:" + Role
	Channel     string         // default DefaultChannel
	From        string         // default DefaultFrom
	Size        int            // default DefaultSize
	Timeout     time.Duration  // give up waiting for the inboxes after this (default 30s)
	CallTimeout time.Duration  // bounds each API call (default DefaultCallTimeout)
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
	so := o.defaults()
	ids := make([]string, o.Agents)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%03d", o.Prefix, i)
	}
	call := func(fn func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, so.CallTimeout)
		defer cancel()
		return fn(cctx)
	}
	t0 := time.Now()
	if err := fanoutEach(ids, func(_ int, id string) error {
		return call(func(c context.Context) error {
			_, err := o.Send.RegisterAgent(c, api.RegisterAgentCommand{ID: id, Role: o.Role, Description: "maosctl bench fanout"})
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
	if err := fanoutEach(ids, func(i int, id string) error {
		return call(func(c context.Context) error {
			ic, err := o.Poll.InboxCounts(c, id, api.Strong)
			if err != nil {
				return fmt.Errorf("inbox counts of %s: %w", id, err)
			}
			base[i] = ic.Total
			return nil
		})
	}); err != nil {
		return FanoutReport{}, fmt.Errorf("bench: fanout: %w", err)
	}
	m := &api.Message{ID: "bench-" + RunID() + "-fanout", Channel: so.Channel, From: so.From, To: []string{o.To},
		Content: api.Content{Text: Payload(so.Size)}}
	start := time.Now()
	var res *api.SendResponse
	if err := call(func(c context.Context) (err error) { res, err = o.Send.Send(c, m); return err }); err != nil {
		return FanoutReport{}, fmt.Errorf("bench: fanout: send to %s: %w", o.To, err)
	}
	rep.SendMs, rep.MessageID, rep.Seq = ms(time.Since(start)), res.ID, res.Seq
	pending, err := pollFanout(ctx, o.Poll, ids, base, start, start.Add(o.Timeout), call, &rep)
	if err != nil {
		return rep, err
	}
	rep.Delivered = len(ids) - len(pending)
	for _, i := range pending {
		if len(rep.Missing) == 20 {
			break
		}
		rep.Missing = append(rep.Missing, ids[i])
	}
	return rep, nil
}

// defaults fills o's defaults and returns the send options it implies.
func (o *FanoutOptions) defaults() SendOptions {
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
	return so
}

// fanoutEach runs fn over the ids, fanoutPollers at a time; the errors are joined.
func fanoutEach(ids []string, fn func(i int, id string) error) error {
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

// pollFanout polls the inbox totals of ids on c (local reads, through
// call) in rounds until each grew past base or deadline passes, and
// returns the indexes of the ids still missing. It records in rep the
// rounds, their mean time and, when all came, the time since start.
func pollFanout(ctx context.Context, c *client.Client, ids []string, base []uint64, start, deadline time.Time,
	call func(func(context.Context) error) error, rep *FanoutReport) ([]int, error) {
	pending := make([]int, len(ids))
	for i := range pending {
		pending[i] = i
	}
	var rounds time.Duration
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		r0 := time.Now()
		got := make([]bool, len(pending))
		pids := make([]string, len(pending))
		for k, i := range pending {
			pids[k] = ids[i]
		}
		if err := fanoutEach(pids, func(k int, id string) error {
			return call(func(cc context.Context) error {
				ic, err := c.InboxCounts(cc, id, api.Local)
				if err != nil {
					return fmt.Errorf("inbox counts of %s: %w", id, err)
				}
				got[k] = ic.Total > base[pending[k]]
				return nil
			})
		}); err != nil {
			return pending, fmt.Errorf("bench: fanout: %w", err)
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
	if rep.PollRounds > 0 {
		rep.PollRoundMs = ms(rounds / time.Duration(rep.PollRounds))
	}
	return pending, nil
}
