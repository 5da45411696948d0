package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// withGossip runs a node's gossip on a free loopback port with fast
// timing: a dead node is declared dead in one to two seconds instead of
// memberlist's LAN five.
func withGossip(c *Config) {
	c.GossipAddr = "127.0.0.1:0"
	c.GossipProbeInterval = 250 * time.Millisecond
	c.GossipProbeTimeout = 150 * time.Millisecond
	c.GossipSuspicionMult = 4
	c.GossipInterval = 50 * time.Millisecond
	c.GossipPushPullInterval = time.Second
	c.GossipReconnectInterval = 500 * time.Millisecond
}

func withKey(key []byte) func(*Config) { return func(c *Config) { c.GossipKey = key } }

// syncBuffer is a log destination tests can read while nodes write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func withLog(buf *syncBuffer) func(*Config) {
	return func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// presenceOn reads agent's presence from n's API.
func presenceOn(t testing.TB, n *testNode, agent string) (transport.Presence, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.client.AgentPresence(ctx, agent)
}

// poll checks cond every 10 ms until it holds, or fails after timeout with
// what it waited for and what it last saw (last is called then).
func poll(t testing.TB, timeout time.Duration, what string, last func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last saw: %s", timeout, what, last())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPresence polls every node's API until agent's record there
// satisfies ok, and fails naming the node that did not.
func waitPresence(t testing.TB, nodes []*testNode, agent, what string, ok func(transport.Presence) bool) {
	t.Helper()
	for _, n := range nodes {
		var last transport.Presence
		var lastErr error
		poll(t, 15*time.Second, what+" on "+n.id, func() string { return fmt.Sprintf("%+v, %v", last, lastErr) }, func() bool {
			last, lastErr = presenceOn(t, n, agent)
			return lastErr == nil && ok(last)
		})
	}
}

// waitMembers polls until n sees each listed member in the given status.
func waitMembers(t testing.TB, n *testNode, want map[string]string) {
	t.Helper()
	var last []transport.Member
	poll(t, 15*time.Second, fmt.Sprintf("members %v on %s", want, n.id), func() string { return fmt.Sprintf("%+v", last) }, func() bool {
		res, err := n.Members(context.Background())
		if err != nil {
			return false
		}
		last = res.Members
		got := map[string]string{}
		for _, m := range res.Members {
			got[m.NodeID] = m.Status
		}
		for id, st := range want {
			if got[id] != st {
				return false
			}
		}
		return true
	})
}

// memberNode is the memberlist node named id as from sees it.
func memberNode(t testing.TB, from *testNode, id string) *memberlist.Node {
	t.Helper()
	for _, m := range from.gossip.ml.Load().Members() {
		if m.Name == id {
			return m
		}
	}
	t.Fatalf("%s does not know gossip member %s", from.id, id)
	return nil
}

// A presence set on one node is visible on the others; a newer update wins
// everywhere; an older record, delivered again over gossip or in a state
// exchange, never overwrites a newer one; concurrent updates on two nodes
// converge to the same record everywhere.
func TestPresenceGossip(t *testing.T) {
	c := newTestCluster(t, 3, withGossip)
	a, b, cc := c.nodes[0], c.nodes[1], c.nodes[2]
	ctx := ctxT(t)
	all := map[string]string{"n1": "alive", "n2": "alive", "n3": "alive"}
	for _, n := range c.nodes {
		waitMembers(t, n, all)
	}
	// Node metadata carries each node's API and Raft addresses.
	res, err := a.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Members {
		n := c.nodes[int(m.NodeID[1]-'1')]
		if m.APIAddr != n.api || m.RaftAddr != n.RaftAddr() || m.GossipAddr != n.GossipAddr() || m.Version == "" {
			t.Errorf("member %+v, want api %s raft %s gossip %s and a version", m, n.api, n.RaftAddr(), n.GossipAddr())
		}
	}

	p1, err := a.client.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "AWAKE", Substate: "WORKING",
		Channel: "review", PID: 4242, Task: "reviewing PR 12"})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Node != "n1" || p1.Origin != "n1" || p1.Version == 0 {
		t.Fatalf("put on n1 answered %+v", p1)
	}
	waitPresence(t, c.nodes, "codex", "the record put on n1", func(p transport.Presence) bool { return p == p1 })

	// The same agent heartbeats through n2 now: a newer version, everywhere.
	p2, err := b.client.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Channel: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Newer(&p1) || p2.Node != "n2" {
		t.Fatalf("update on n2 %+v is not newer than %+v", p2, p1)
	}
	waitPresence(t, c.nodes, "codex", "the newer record put on n2", func(p transport.Presence) bool { return p == p2 })

	// The older record arrives again: as a gossip message on n2 and n3, and
	// in a push/pull state on n1. Each node counts it stale and keeps p2.
	old, err := encodePresenceMsg(p1)
	if err != nil {
		t.Fatal(err)
	}
	staleB, staleC, staleA := b.presence.staleCount(), cc.presence.staleCount(), a.presence.staleCount()
	for _, to := range []*testNode{b, cc} {
		if err := a.gossip.ml.Load().SendReliable(memberNode(t, a, to.id), old); err != nil {
			t.Fatal(err)
		}
	}
	state, err := marshalCompact([]transport.Presence{p1})
	if err != nil {
		t.Fatal(err)
	}
	a.gossip.MergeRemoteState(append([]byte{statePresence}, state...), false)
	waitFor(t, 10*time.Second, "n2 and n3 to receive the stale record", func() bool {
		return b.presence.staleCount() > staleB && cc.presence.staleCount() > staleC
	})
	if a.presence.staleCount() <= staleA {
		t.Errorf("n1 did not count the stale record of the state exchange")
	}
	for _, n := range c.nodes {
		if got, err := presenceOn(t, n, "codex"); err != nil || got != p2 {
			t.Errorf("%s after the stale record: %+v, %v; want %+v", n.id, got, err, p2)
		}
	}

	// A heartbeat carrying its own time, older than the recorded one: 409,
	// nothing changes.
	before := p2.Timestamp.Add(-time.Second)
	_, err = cc.client.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "OFFLINE", Timestamp: &before})
	if !errors.Is(err, fsm.ErrConflict) {
		t.Errorf("older timestamped heartbeat: %v, want a conflict", err)
	}
	if got, _ := presenceOn(t, cc, "codex"); got != p2 {
		t.Errorf("n3 after the refused heartbeat: %+v, want %+v", got, p2)
	}

	// Concurrent updates through two nodes: every node ends with the same
	// one, the newer by (version, origin).
	var wg sync.WaitGroup
	res2 := make([]transport.Presence, 2)
	for i, n := range []*testNode{a, cc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res2[i], _ = n.client.PutPresence(ctx, "gemini", transport.PresenceUpdate{State: "AWAKE", Task: "from " + n.id})
		}()
	}
	wg.Wait()
	if res2[0].Version == 0 || res2[1].Version == 0 {
		t.Fatalf("concurrent puts answered %+v", res2)
	}
	winner := res2[0]
	if res2[1].Newer(&winner) {
		winner = res2[1]
	}
	waitPresence(t, c.nodes, "gemini", "the newer of two concurrent updates", func(p transport.Presence) bool { return p == winner })

	// Heartbeats never reach the Raft log.
	if a.fsm.AppliedIndex() != b.fsm.AppliedIndex() && b.fsm.AppliedIndex() != cc.fsm.AppliedIndex() {
		t.Logf("applied indexes differ (catching up): %d %d %d", a.fsm.AppliedIndex(), b.fsm.AppliedIndex(), cc.fsm.AppliedIndex())
	}
	for _, n := range c.nodes {
		page, err := n.fsm.Audit(0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			if ev.Kind != fsm.AuditNode {
				t.Errorf("%s: audit event %+v: presence must not reach the log", n.id, ev)
			}
		}
	}
}

// A node whose gossip dies: its agents turn OFFLINE on the others with the
// reason, it shows dead, and the leader audits NODE_DEAD. A node that shuts
// down: the same with "left" and NODE_LEAVE. Restarted from its data dir,
// it rejoins gossip on its own.
func TestPresenceNodeDeadLeftAndBack(t *testing.T) {
	c := newTestCluster(t, 3, withGossip)
	ctx := ctxT(t)
	leader := c.leader()
	var fs []*testNode
	for _, n := range c.nodes {
		if n != leader {
			fs = append(fs, n)
		}
	}
	crashed, stopped := fs[0], fs[1]
	for _, n := range c.nodes {
		waitMembers(t, n, map[string]string{"n1": "alive", "n2": "alive", "n3": "alive"})
	}
	for agent, n := range map[string]*testNode{"lead-agent": leader, "crash-agent": crashed, "stop-agent": stopped} {
		if _, err := n.client.PutPresence(ctx, agent, transport.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Task: "busy"}); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, c.nodes, agent, "AWAKE", func(p transport.Presence) bool { return p.State == "AWAKE" })
	}

	// Each node's joining was audited once.
	waitAudit(t, leader, 0, map[string]string{"NODE_JOIN": crashed.id})
	waitAudit(t, leader, 0, map[string]string{"NODE_JOIN": stopped.id})
	page, err := leader.fsm.Audit(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	mark := page.Events[len(page.Events)-1].Seq

	// The crash-agent holds a lock; when its node is declared dead the
	// leader releases it through the log.
	grant, err := leader.client.AcquireLock(ctx, fsm.LockAcquireCommand{Path: "src/retry.go", Holder: "crash-agent", TTL: fsm.LockTTL(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}

	// The crashed node's gossip stops without a word (its Raft and API go on).
	if err := crashed.gossip.shutdown(); err != nil {
		t.Fatal(err)
	}
	dead := "node " + crashed.id + " dead"
	survivors := []*testNode{leader, stopped}
	waitPresence(t, survivors, "crash-agent", "OFFLINE, "+dead, func(p transport.Presence) bool {
		return p.State == "OFFLINE" && p.Reason == dead && p.Substate == "" && p.Task == "busy"
	})
	for _, n := range survivors {
		waitMembers(t, n, map[string]string{crashed.id: "dead", leader.id: "alive", stopped.id: "alive"})
		if p, err := presenceOn(t, n, "lead-agent"); err != nil || p.State != "AWAKE" {
			t.Errorf("%s: lead-agent %+v, %v; want it AWAKE", n.id, p, err)
		}
	}

	waitFor(t, 20*time.Second, "the dead node's agent's lock released", func() bool {
		chk, err := leader.client.CheckLock(ctx, "src/retry.go", grant.Lock.Token, transport.Strong)
		return err == nil && !chk.Current
	})

	// The other follower shuts down: its agents are OFFLINE, "left".
	stopped.stop()
	left := "node " + stopped.id + " left"
	waitPresence(t, []*testNode{leader}, "stop-agent", "OFFLINE, "+left, func(p transport.Presence) bool {
		return p.State == "OFFLINE" && p.Reason == left
	})
	waitMembers(t, leader, map[string]string{stopped.id: "left"})

	// The leader recorded both in the audit trail, once each.
	waitAudit(t, leader, mark, map[string]string{"NODE_DEAD": crashed.id, "NODE_LEAVE": stopped.id})

	// Back from its data dir with no --join: it rejoins gossip by itself,
	// and the leader audits the join.
	back := startNode(t, stopped.id, stopped.dir, "", nil, withGossip)
	c.nodes[int(stopped.id[1]-'1')] = back
	waitMembers(t, leader, map[string]string{back.id: "alive"})
	waitMembers(t, back, map[string]string{leader.id: "alive"})
	waitAudit(t, leader, mark, map[string]string{"NODE_JOIN": back.id})
	// Its old agent stays OFFLINE until it heartbeats again, and then the
	// new heartbeat wins over the OFFLINE record written by the others.
	p, err := back.client.PutPresence(ctx, "stop-agent", transport.PresenceUpdate{State: "AWAKE"})
	if err != nil {
		t.Fatal(err)
	}
	waitPresence(t, []*testNode{leader, back}, "stop-agent", "AWAKE again", func(q transport.Presence) bool { return q == p })
}

// waitAudit polls n's audit trail until it holds, after seq after, a node
// event with each label, for the given node, exactly once.
func waitAudit(t testing.TB, n *testNode, after uint64, want map[string]string) {
	t.Helper()
	var last []fsm.AuditEvent
	poll(t, 15*time.Second, fmt.Sprintf("audit %v on %s", want, n.id), func() string { return fmt.Sprintf("%+v", last) }, func() bool {
		page, err := n.fsm.Audit(after, 1000)
		if err != nil {
			return false
		}
		last = page.Events
		for label, node := range want {
			count := 0
			for _, ev := range page.Events {
				if ev.Kind == fsm.AuditNode && ev.Label == label && ev.From == node {
					count++
				}
			}
			if count != 1 {
				return false
			}
		}
		return true
	})
}

// An AWAKE agent without a heartbeat for the TTL shows OFFLINE, "heartbeat
// lapsed"; a new heartbeat brings it back.
func TestPresenceTTL(t *testing.T) {
	n := startNode(t, "n1", filepath.Join(t.TempDir(), "n1"), "", nil, withGossip,
		func(c *Config) { c.PresenceTTL = 300 * time.Millisecond })
	ctx := ctxT(t)
	p, err := n.client.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "AWAKE"})
	if err != nil {
		t.Fatal(err)
	}
	waitPresence(t, []*testNode{n}, "codex", "lapsed", func(q transport.Presence) bool {
		return q.State == "OFFLINE" && q.Reason == "heartbeat lapsed" && q.Version == p.Version
	})
	list, err := n.client.Presence(ctx)
	if err != nil || len(list) != 1 || list[0].Reason != "heartbeat lapsed" {
		t.Errorf("list = %+v, %v", list, err)
	}
	// A heartbeat whose own time is already past the TTL is refused.
	stale := time.Now().Add(-time.Second)
	if _, err := n.client.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "AWAKE", Timestamp: &stale}); !errors.Is(err, fsm.ErrInvalid) ||
		!strings.Contains(err.Error(), "TTL") {
		t.Errorf("lapsed heartbeat: %v, want invalid naming the TTL", err)
	}
	if _, err := n.client.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "AWAKE"}); err != nil {
		t.Fatal(err)
	}
	if q, err := presenceOn(t, n, "codex"); err != nil || q.State != "AWAKE" {
		t.Errorf("after a new heartbeat: %+v, %v", q, err)
	}
}

// A node with the wrong gossip key, or none, cannot join a cluster whose
// gossip is encrypted, is not added to Raft, and the logs say why.
func TestGossipKeyMismatch(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	var seedLog syncBuffer
	seed := startNode(t, "n1", filepath.Join(t.TempDir(), "n1"), "", nil, withGossip, withKey(key), withLog(&seedLog))
	waitFor(t, 10*time.Second, "n1 ready", func() bool { return seed.Ready(context.Background()) == nil })

	cases := []struct {
		name, id string
		key      []byte
		want     []string
	}{
		{"wrong key", "n2", bytes.Repeat([]byte{9}, 32), []string{"gossip refused this node", "--gossip-key differs from the cluster's"}},
		{"no key", "n3", nil, []string{"gossip refused this node", "is encrypted and this node has no gossip key", "--gossip-key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log syncBuffer
			cfg := testConfig(tc.id, filepath.Join(t.TempDir(), tc.id), "127.0.0.1:1")
			withGossip(&cfg)
			withLog(&log)(&cfg)
			cfg.GossipKey = tc.key
			node, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = node.JoinVia(ctx, []string{seed.api})
			if !errors.Is(err, ErrGossipRefused) {
				t.Fatalf("join: %v, want ErrGossipRefused", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("join error %q lacks %q", err, w)
				}
				if !strings.Contains(log.String(), w) {
					t.Errorf("the joining node's log lacks %q:\n%s", w, log.String())
				}
			}
			if n := seed.voterCount(); n != 1 {
				t.Errorf("n1 has %d voters after a refused join, want 1", n)
			}
			res, _ := seed.Members(context.Background())
			if len(res.Members) != 1 {
				t.Errorf("n1's gossip members after a refused join: %+v", res.Members)
			}
		})
	}
	// The seed's own log names the cause too: memberlist could not decrypt
	// the wrong key's messages.
	if !strings.Contains(strings.ToLower(seedLog.String()), "no installed keys could decrypt the message") {
		t.Errorf("n1's log does not say why it refused the wrong key:\n%s", seedLog.String())
	}
}

// Given a member's gossip address instead of its API address, a node joins
// gossip there and finds the API to join Raft through in the metadata.
func TestJoinThroughGossipAddress(t *testing.T) {
	base := t.TempDir()
	key := bytes.Repeat([]byte{3}, 16)
	a := startNode(t, "n1", filepath.Join(base, "n1"), "", nil, withGossip, withKey(key))
	waitFor(t, 10*time.Second, "n1 ready", func() bool { return a.Ready(context.Background()) == nil })
	b := startNode(t, "n2", filepath.Join(base, "n2"), "", []string{a.GossipAddr()}, withGossip, withKey(key))
	waitFor(t, 15*time.Second, "n2 a voter and ready", func() bool {
		return a.voterCount() == 2 && b.Ready(context.Background()) == nil
	})
	waitMembers(t, a, map[string]string{"n1": "alive", "n2": "alive"})
	st, err := b.Status(context.Background())
	if err != nil || st.GossipAddr != b.GossipAddr() || !st.GossipEncrypted {
		t.Errorf("n2 status: gossip %q encrypted %v (%v); want %s, true", st.GossipAddr, st.GossipEncrypted, err, b.GossipAddr())
	}
}

// Gossip settings are checked at Open, naming what is wrong.
func TestGossipConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		tweak func(*Config)
		want  string
	}{
		{"host name", func(c *Config) { c.GossipAddr = "localhost:7072" }, "want an IP address"},
		{"no port", func(c *Config) { c.GossipAddr = "127.0.0.1" }, "not IP:port"},
		{"bad port", func(c *Config) { c.GossipAddr = "127.0.0.1:99999" }, "port must be"},
		{"wildcard without advertise", func(c *Config) { c.GossipAddr = "0.0.0.0:7072" }, "wildcard"},
		{"advertise host name", func(c *Config) { c.GossipAddr = "0.0.0.0:7072"; c.GossipAdvertise = "example.com:7072" }, "not a host name"},
		{"short key", func(c *Config) { c.GossipAddr = "127.0.0.1:0"; c.GossipKey = []byte("short") }, "16, 24 or 32 bytes"},
		{"negative ttl", func(c *Config) { c.PresenceTTL = -time.Second }, "negative"},
		{"commit timeout under raft's floor", func(c *Config) { c.CommitTimeout = 500 * time.Microsecond }, "want 1ms..1s"},
	}
	for _, tc := range cases {
		cfg := testConfig("n1", t.TempDir(), "127.0.0.1:7070")
		tc.tweak(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	cfg := testConfig("n1", t.TempDir(), "127.0.0.1:7070")
	cfg.GossipAddr, cfg.GossipAdvertise, cfg.GossipKey = "0.0.0.0:0", "10.0.0.1:7072", make([]byte, 24)
	if err := cfg.Validate(); err != nil {
		t.Errorf("a valid gossip config was refused: %v", err)
	}
}
