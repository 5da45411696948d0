package system

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// loadGen is a set of sender goroutines, each sending unique messages
// through random nodes and retrying each one (same id, same content) on
// another node until it is acknowledged or perMessage runs out.
type loadGen struct {
	c          *harness.Cluster
	channels   []string
	perMessage time.Duration
	maxEach    int
	// agents, when set, makes worker w send as agents[w%len(agents)] with
	// its token, on channel "secure-<agent>" (startAgentLoad).
	agents []agentToken

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	acked    atomic.Int64

	mu       sync.Mutex
	sends    map[string]*sent
	retried  []string       // acknowledged ids that needed more than one attempt
	errKinds map[string]int // failed attempts by kind
	failures []error        // messages never acknowledged, final errors
}

func startLoad(c *harness.Cluster, workers, maxEach int, channels []string, perMessage time.Duration) *loadGen {
	g := newLoadGen(c, maxEach, channels, perMessage)
	g.start(workers)
	return g
}

func newLoadGen(c *harness.Cluster, maxEach int, channels []string, perMessage time.Duration) *loadGen {
	return &loadGen{
		c: c, channels: channels, perMessage: perMessage, maxEach: maxEach,
		stop: make(chan struct{}), sends: map[string]*sent{}, errKinds: map[string]int{},
	}
}

func (g *loadGen) start(workers int) {
	for w := range workers {
		g.wg.Add(1)
		go g.worker(w)
	}
}

func (g *loadGen) worker(w int) {
	defer g.wg.Done()
	opts := harness.SendOptions{OnError: func(_ *harness.Node, err error) {
		g.mu.Lock()
		g.errKinds[api.ErrorKind(err)]++
		g.mu.Unlock()
	}}
	idFormat, from, text := "msg-w%d-%05d", fmt.Sprintf("w%d", w), fmt.Sprintf("worker %d", w)
	var channel string
	if len(g.agents) > 0 {
		tok := g.agents[w%len(g.agents)]
		opts.Token, from, channel = tok.secret, tok.agent, "secure-"+tok.agent
		idFormat, text = "sec-w%d-%05d", fmt.Sprintf("%s (worker %d)", tok.agent, w)
	} else {
		channel = g.channels[w%len(g.channels)]
	}
	for i := 0; i < g.maxEach; i++ {
		select {
		case <-g.stop:
			return
		default:
		}
		m := &api.Message{
			ID:      fmt.Sprintf(idFormat, w, i),
			Channel: channel,
			From:    from,
			To:      api.Recipients{"sink"},
			Content: api.Content{Text: fmt.Sprintf("%s message %d", text, i)},
		}
		s := &sent{msg: m}
		g.mu.Lock()
		g.sends[m.ID] = s
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), g.perMessage)
		res, err := g.c.SendWithRetry(ctx, m, opts)
		cancel()
		if err == nil && (res.Resp.ID != m.ID || res.Resp.Seq == 0) {
			err = fmt.Errorf("send %s: acknowledged as id %q seq %d", m.ID, res.Resp.ID, res.Resp.Seq)
		}
		g.mu.Lock()
		if err != nil {
			g.failures = append(g.failures, fmt.Errorf("worker %d: %w", w, err))
			g.mu.Unlock()
			return
		}
		s.seq, s.acked = res.Resp.Seq, true
		if res.Attempts > 1 {
			g.retried = append(g.retried, m.ID)
		}
		g.mu.Unlock()
		g.acked.Add(1)
	}
}

// failed returns the first failure, if any.
func (g *loadGen) failed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.failures) > 0 {
		return g.failures[0]
	}
	return nil
}

// waitAcked waits until at least n messages are acknowledged, ending early
// if a sender gave up.
func (g *loadGen) waitAcked(n int64, timeout time.Duration, what string) error {
	return harness.WaitFor(timeout, what, func() error {
		if err := g.failed(); err != nil {
			return harness.Permanent(err)
		}
		if got := g.acked.Load(); got < n {
			return fmt.Errorf("%d of %d acknowledged", got, n)
		}
		return nil
	})
}

// halt stops the senders after their current message and waits for them,
// up to timeout.
func (g *loadGen) halt(timeout time.Duration) error {
	g.stopOnce.Do(func() { close(g.stop) })
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return errors.New("the senders did not finish their last message in time")
	}
}

// TestKillLeaderUnderLoad SIGKILLs the leader of a 3-node cluster while six
// clients send through random nodes, retrying every failed send with the
// same id on another node; restarts the killed node from its data dir; and
// checks that every acknowledged message is stored exactly once, at the
// acknowledged seq, identically on every node.
func TestKillLeaderUnderLoad(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	channels := []string{"load-a", "load-b"}
	registerNames(t, c, nil, "sink") // whom the load's messages are to
	g := startLoad(c, loadWorkers, loadMaxEach, channels, loadPerMessage)
	killLeaderUnderLoad(t, c, g, channels, 3*loadStep/2, 50)
}

// The load of the kill-leader tests: loadWorkers senders, each bounded to
// loadMaxEach messages (the phases end the load much sooner), every send
// retried for loadPerMessage; a phase waits up to loadPhase for loadStep
// more acknowledgements.
const (
	loadWorkers    = 6
	loadMaxEach    = 5000
	loadPerMessage = 30 * time.Second
	loadPhase      = 30 * time.Second
	loadStep       = 200
)

// killLeaderUnderLoad is the scenario of the kill-leader tests, with g's
// senders running: after warm acknowledgements SIGKILL the leader, wait
// for loadStep more on the new one, restart the old one from its data dir,
// wait for loadStep more, stop the load (g is stopped however the
// scenario ends) and let the nodes converge. Then every
// acknowledged send must be stored exactly once, at its seq, identically on
// every node -- by channel, and by id for the sends that needed retries and
// a sample of about sample others -- and the run must have exercised
// failover (some sends acknowledged after retries).
func killLeaderUnderLoad(t *testing.T, c *harness.Cluster, g *loadGen, channels []string, warm int64, sample int) {
	t.Helper()
	defer func() { _ = g.halt(loadPerMessage + 10*time.Second) }()
	harness.NoErr(t, g.waitAcked(warm, loadPhase, "load before the kill"))
	old, err := c.Leader()
	harness.NoErr(t, err)
	atKill := g.acked.Load()
	killedAt := time.Now()
	harness.NoErr(t, old.Kill())
	t.Logf("SIGKILLed leader %s after %d acknowledged sends", old.ID, atKill)

	next, err := c.Leader()
	harness.NoErr(t, err)
	if next == old {
		t.Fatalf("leader is still %s after it was killed", old.ID)
	}
	base := g.acked.Load()
	harness.NoErr(t, g.waitAcked(base+loadStep, loadPhase, "sends to succeed again after the kill"))
	t.Logf("new leader %s; %d more sends acknowledged %s after the kill",
		next.ID, loadStep, time.Since(killedAt).Round(time.Millisecond))

	harness.NoErr(t, old.Restart())
	harness.NoErr(t, old.WaitReady(loadPhase))
	base = g.acked.Load()
	harness.NoErr(t, g.waitAcked(base+loadStep, loadPhase, "sends after the restart of "+old.ID))

	harness.NoErr(t, g.halt(loadPerMessage+10*time.Second))
	if err := g.failed(); err != nil {
		t.Fatal(err)
	}
	index, err := c.WaitConverged()
	harness.NoErr(t, err)

	// The senders are done: the maps are ours now.
	checkUniqueSeqs(t, g.sends)
	rep := checkStored(t, c, channels, g.sends)

	// By id too, on every node: the sends that needed retries (those
	// around the kill) and a sample of the rest.
	ids := append([]string(nil), g.retried...)
	sort.Strings(ids)
	if len(ids) > 100 {
		ids = ids[:100]
	}
	var acked []string
	for id, s := range g.sends {
		if s.acked {
			acked = append(acked, id)
		}
	}
	sort.Strings(acked)
	for i := 0; i < len(acked); i += max(1, len(acked)/sample) {
		ids = append(ids, acked[i])
	}
	checkByID(t, c, ids, g.sends)

	var stored int
	for _, n := range rep.perChannel {
		stored += n
	}
	t.Logf("sent %d messages (%d acknowledged, %d of them after retries; %d never acknowledged); "+
		"stored %d (%d of them unacknowledged); per channel %s; failed attempts by kind: %s; "+
		"all 3 nodes applied index %d; checked %d ids by GET on every node",
		len(g.sends), len(acked), len(g.retried), len(g.sends)-len(acked), stored, rep.unacked,
		countsLine(rep.perChannel), countsLine(g.errKinds), index, len(ids))
	if len(acked) == 0 || len(g.retried) == 0 {
		t.Errorf("the test did not exercise failover: %d acknowledged, %d retried", len(acked), len(g.retried))
	}
}
