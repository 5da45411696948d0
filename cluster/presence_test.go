package cluster_test

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

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/testing/testenv"
)

// fastGossip runs a node's gossip on a free loopback port with fast
// timing: a dead node is declared dead in one to two seconds instead of
// memberlist's LAN five.
func fastGossip(c *cluster.Config) {
	c.GossipAddr = "127.0.0.1:0"
	c.GossipProbeInterval = 250 * time.Millisecond
	c.GossipProbeTimeout = 150 * time.Millisecond
	c.GossipSuspicionMult = 4
	c.GossipInterval = 50 * time.Millisecond
	c.GossipPushPullInterval = time.Second
	c.GossipReconnectInterval = 500 * time.Millisecond
}

var withGossip = clustertest.WithConfig(fastGossip)

func withKey(key []byte) clustertest.Option {
	return clustertest.WithConfig(func(c *cluster.Config) { c.GossipKey = key })
}

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

// logTo is a debug-level logger writing into buf.
func logTo(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func withLog(buf *syncBuffer) clustertest.Option {
	return clustertest.WithConfig(func(c *cluster.Config) { c.Logger = logTo(buf) })
}

// presenceOn reads agent's presence from n's API.
func presenceOn(t testing.TB, n *clustertest.Node, agent string) (api.Presence, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.Client.AgentPresence(ctx, agent)
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
func waitPresence(t testing.TB, nodes []*clustertest.Node, agent, what string, ok func(api.Presence) bool) {
	t.Helper()
	for _, n := range nodes {
		var last api.Presence
		var lastErr error
		poll(t, 15*time.Second, what+" on "+n.ID(), func() string { return fmt.Sprintf("%+v, %v", last, lastErr) }, func() bool {
			last, lastErr = presenceOn(t, n, agent)
			return lastErr == nil && ok(last)
		})
	}
}

// waitMembers polls until n sees each listed member in the given status.
func waitMembers(t testing.TB, n *clustertest.Node, want map[string]string) {
	t.Helper()
	var last []api.Member
	poll(t, 15*time.Second, fmt.Sprintf("members %v on %s", want, n.ID()), func() string { return fmt.Sprintf("%+v", last) }, func() bool {
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

// A presence set on one node is visible on the others; a newer update wins
// everywhere; an older record, delivered again over gossip or in a state
// exchange, never overwrites a newer one; concurrent updates on two nodes
// converge to the same record everywhere.
func TestPresenceGossip(t *testing.T) {
	c := clustertest.New(t, 3, withGossip)
	a, b, cc := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	ctx := clustertest.Context(t)
	all := map[string]string{"n1": "alive", "n2": "alive", "n3": "alive"}
	for _, n := range c.Nodes {
		waitMembers(t, n, all)
	}
	// Node metadata carries each node's API and Raft addresses.
	res, err := a.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Members {
		n := c.Nodes[int(m.NodeID[1]-'1')]
		if m.APIAddr != n.Addr || m.RaftAddr != n.RaftAddr() || m.GossipAddr != n.GossipAddr() || m.Version != clustertest.Version {
			t.Errorf("member %+v, want api %s raft %s gossip %s and version %s", m, n.Addr, n.RaftAddr(), n.GossipAddr(), clustertest.Version)
		}
	}

	// The watcher's task health travels with the record.
	p1, err := a.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Substate: "WORKING",
		Channel: "review", PID: 4242, Task: "reviewing PR 12",
		AgentHealth: api.AgentHealth{TasksRunning: 1, TasksSucceeded: 7, TasksFailed: 2, LastError: "exit status 1", MeanDurationMS: 1500}})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Node != "n1" || p1.Origin != "n1" || p1.Version == 0 || p1.TasksSucceeded != 7 || p1.LastError != "exit status 1" {
		t.Fatalf("put on n1 answered %+v", p1)
	}
	waitPresence(t, c.Nodes, "codex", "the record put on n1", func(p api.Presence) bool { return p == p1 })

	// The same agent heartbeats through n2 now: a newer version, everywhere.
	p2, err := b.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Channel: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Newer(&p1) || p2.Node != "n2" {
		t.Fatalf("update on n2 %+v is not newer than %+v", p2, p1)
	}
	waitPresence(t, c.Nodes, "codex", "the newer record put on n2", func(p api.Presence) bool { return p == p2 })

	// The older record arrives again: as a gossip message on n2 and n3, and
	// in a push/pull state on n1. Each node counts it stale and keeps p2.
	staleB, staleC, staleA := b.StalePresence(), cc.StalePresence(), a.StalePresence()
	for _, to := range []*clustertest.Node{b, cc} {
		if err := a.GossipPresence(to.ID(), p1); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.MergePresenceState([]api.Presence{p1}); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, "n2 and n3 to receive the stale record", func() bool {
		return b.StalePresence() > staleB && cc.StalePresence() > staleC
	})
	if a.StalePresence() <= staleA {
		t.Errorf("n1 did not count the stale record of the state exchange")
	}
	for _, n := range c.Nodes {
		if got, err := presenceOn(t, n, "codex"); err != nil || got != p2 {
			t.Errorf("%s after the stale record: %+v, %v; want %+v", n.ID(), got, err, p2)
		}
	}

	// A heartbeat carrying its own time, older than the recorded one: 409,
	// nothing changes.
	before := p2.Timestamp.Add(-time.Second)
	_, err = cc.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "OFFLINE", Timestamp: &before})
	if !errors.Is(err, api.ErrConflict) {
		t.Errorf("older timestamped heartbeat: %v, want a conflict", err)
	}
	if got, _ := presenceOn(t, cc, "codex"); got != p2 {
		t.Errorf("n3 after the refused heartbeat: %+v, want %+v", got, p2)
	}

	// Concurrent updates through two nodes: every node ends with the same
	// one, the newer by (version, origin).
	var wg sync.WaitGroup
	res2 := make([]api.Presence, 2)
	for i, n := range []*clustertest.Node{a, cc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res2[i], _ = n.Client.PutPresence(ctx, "gemini", api.PresenceUpdate{State: "AWAKE", Task: "from " + n.ID()})
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
	waitPresence(t, c.Nodes, "gemini", "the newer of two concurrent updates", func(p api.Presence) bool { return p == winner })

	// Heartbeats never reach the Raft log.
	if a.FSM().AppliedIndex() != b.FSM().AppliedIndex() && b.FSM().AppliedIndex() != cc.FSM().AppliedIndex() {
		t.Logf("applied indexes differ (catching up): %d %d %d", a.FSM().AppliedIndex(), b.FSM().AppliedIndex(), cc.FSM().AppliedIndex())
	}
	for _, n := range c.Nodes {
		page, err := n.FSM().Audit(0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			if ev.Kind != fsm.AuditNode {
				t.Errorf("%s: audit event %+v: presence must not reach the log", n.ID(), ev)
			}
		}
	}
}

// A node whose gossip dies: its agents turn OFFLINE on the others with the
// reason, it shows dead, and the leader audits NODE_DEAD. A node that shuts
// down: the same with "left" and NODE_LEAVE. Restarted from its data dir,
// it rejoins gossip on its own.
func TestPresenceNodeDeadLeftAndBack(t *testing.T) {
	c := clustertest.New(t, 3, withGossip)
	ctx := clustertest.Context(t)
	leader := c.Leader()
	var fs []*clustertest.Node
	for _, n := range c.Nodes {
		if n != leader {
			fs = append(fs, n)
		}
	}
	crashed, stopped := fs[0], fs[1]
	for _, n := range c.Nodes {
		waitMembers(t, n, map[string]string{"n1": "alive", "n2": "alive", "n3": "alive"})
	}
	for agent, n := range map[string]*clustertest.Node{"lead-agent": leader, "crash-agent": crashed, "stop-agent": stopped} {
		if _, err := n.Client.PutPresence(ctx, agent, api.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Task: "busy"}); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, c.Nodes, agent, "AWAKE", func(p api.Presence) bool { return p.State == "AWAKE" })
	}

	// Each node's joining was audited once.
	waitAudit(t, leader, 0, map[string]string{"NODE_JOIN": crashed.ID()})
	waitAudit(t, leader, 0, map[string]string{"NODE_JOIN": stopped.ID()})
	page, err := leader.FSM().Audit(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	mark := page.Events[len(page.Events)-1].Seq

	// The crash-agent holds a lock; when its node is declared dead the
	// leader releases it through the log.
	grant, err := leader.Client.AcquireLock(ctx, api.LockAcquireCommand{Path: "src/retry.go", Holder: "crash-agent", TTL: api.LockTTL(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}

	// The crashed node's gossip stops without a word (its Raft and API go on).
	if err := crashed.StopGossip(); err != nil {
		t.Fatal(err)
	}
	dead := "node " + crashed.ID() + " dead"
	survivors := []*clustertest.Node{leader, stopped}
	waitPresence(t, survivors, "crash-agent", "OFFLINE, "+dead, func(p api.Presence) bool {
		return p.State == "OFFLINE" && p.Reason == dead && p.Substate == "" && p.Task == "busy"
	})
	for _, n := range survivors {
		waitMembers(t, n, map[string]string{crashed.ID(): "dead", leader.ID(): "alive", stopped.ID(): "alive"})
		if p, err := presenceOn(t, n, "lead-agent"); err != nil || p.State != "AWAKE" {
			t.Errorf("%s: lead-agent %+v, %v; want it AWAKE", n.ID(), p, err)
		}
	}

	clustertest.WaitFor(t, 20*time.Second, "the dead node's agent's lock released", func() bool {
		chk, err := leader.Client.CheckLock(ctx, "src/retry.go", grant.Lock.Token, api.Strong)
		return err == nil && !chk.Current
	})

	// The other follower shuts down: its agents are OFFLINE, "left".
	stopped.Stop()
	left := "node " + stopped.ID() + " left"
	waitPresence(t, []*clustertest.Node{leader}, "stop-agent", "OFFLINE, "+left, func(p api.Presence) bool {
		return p.State == "OFFLINE" && p.Reason == left
	})
	waitMembers(t, leader, map[string]string{stopped.ID(): "left"})

	// The leader recorded both in the audit trail, once each.
	waitAudit(t, leader, mark, map[string]string{"NODE_DEAD": crashed.ID(), "NODE_LEAVE": stopped.ID()})

	// Back from its data dir with no --join: it rejoins gossip by itself,
	// and the leader audits the join.
	back := clustertest.Start(t, stopped.ID(), stopped.Dir, "", nil, withGossip)
	c.Nodes[int(stopped.ID()[1]-'1')] = back
	waitMembers(t, leader, map[string]string{back.ID(): "alive"})
	waitMembers(t, back, map[string]string{leader.ID(): "alive"})
	waitAudit(t, leader, mark, map[string]string{"NODE_JOIN": back.ID()})
	// Its old agent no longer says its node left: it stays OFFLINE (only
	// a heartbeat says it is up, and in which substate), saying its node
	// is back...
	backReason := "node " + back.ID() + " back, no heartbeat since"
	waitPresence(t, []*clustertest.Node{leader, back}, "stop-agent", "OFFLINE, "+backReason, func(q api.Presence) bool {
		return q.State == "OFFLINE" && q.Reason == backReason && q.Task == "busy"
	})
	// ...and a new heartbeat wins over the record the others wrote.
	p, err := back.Client.PutPresence(ctx, "stop-agent", api.PresenceUpdate{State: "AWAKE"})
	if err != nil {
		t.Fatal(err)
	}
	waitPresence(t, []*clustertest.Node{leader, back}, "stop-agent", "AWAKE again", func(q api.Presence) bool { return q == p })
}

// waitAudit polls n's audit trail until it holds, after seq after, a
// gossip node event with each label, for the given node, exactly once (a
// voter's addition, also NODE_JOIN, is the Raft configuration's event and
// not counted).
func waitAudit(t testing.TB, n *clustertest.Node, after uint64, want map[string]string) {
	t.Helper()
	var last []api.AuditEvent
	poll(t, 15*time.Second, fmt.Sprintf("audit %v on %s", want, n.ID()), func() string { return fmt.Sprintf("%+v", last) }, func() bool {
		page, err := n.FSM().Audit(after, 1000)
		if err != nil {
			return false
		}
		last = page.Events
		for label, node := range want {
			count := 0
			for _, ev := range page.Events {
				if ev.Kind == fsm.AuditNode && ev.Label == label && ev.From == node && !strings.HasPrefix(ev.Text, "added as a voter") {
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
	n := clustertest.Start(t, "n1", filepath.Join(t.TempDir(), "n1"), "", nil, withGossip,
		clustertest.WithConfig(func(c *cluster.Config) { c.PresenceTTL = 300 * time.Millisecond }))
	ctx := clustertest.Context(t)
	p, err := n.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE"})
	if err != nil {
		t.Fatal(err)
	}
	waitPresence(t, []*clustertest.Node{n}, "codex", "lapsed", func(q api.Presence) bool {
		return q.State == "OFFLINE" && q.Reason == "heartbeat lapsed" && q.Version == p.Version
	})
	list, err := n.Client.Presence(ctx)
	if err != nil || len(list) != 1 || list[0].Reason != "heartbeat lapsed" {
		t.Errorf("list = %+v, %v", list, err)
	}
	// A heartbeat whose own time is already past the TTL is refused.
	stale := time.Now().Add(-time.Second)
	if _, err := n.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Timestamp: &stale}); !errors.Is(err, api.ErrInvalid) ||
		!strings.Contains(err.Error(), "TTL") {
		t.Errorf("lapsed heartbeat: %v, want invalid naming the TTL", err)
	}
	if _, err := n.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE"}); err != nil {
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
	seed := clustertest.Start(t, "n1", filepath.Join(t.TempDir(), "n1"), "", nil, withGossip, withKey(key), withLog(&seedLog))
	clustertest.WaitFor(t, 10*time.Second, "n1 ready", func() bool { return seed.Ready(context.Background()) == nil })

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
			cfg := clustertest.Config(tc.id, filepath.Join(t.TempDir(), tc.id), "127.0.0.1:1")
			fastGossip(&cfg)
			cfg.Logger = logTo(&log)
			cfg.GossipKey = tc.key
			node, err := cluster.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close()
			ctx, cancel := testenv.Context(t)
			defer cancel()
			err = node.JoinVia(ctx, []string{seed.Addr})
			if !errors.Is(err, cluster.ErrGossipRefused) {
				t.Fatalf("join: %v, want cluster.ErrGossipRefused", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("join error %q lacks %q", err, w)
				}
				if !strings.Contains(log.String(), w) {
					t.Errorf("the joining node's log lacks %q:\n%s", w, log.String())
				}
			}
			if n := seed.Voters(); n != 1 {
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
	a := clustertest.Start(t, "n1", filepath.Join(base, "n1"), "", nil, withGossip, withKey(key))
	clustertest.WaitFor(t, 10*time.Second, "n1 ready", func() bool { return a.Ready(context.Background()) == nil })
	b := clustertest.Start(t, "n2", filepath.Join(base, "n2"), "", []string{a.GossipAddr()}, withGossip, withKey(key))
	clustertest.WaitFor(t, 15*time.Second, "n2 a voter and ready", func() bool {
		return a.Voters() == 2 && b.Ready(context.Background()) == nil
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
		tweak func(*cluster.Config)
		want  string
	}{
		{"host name", func(c *cluster.Config) { c.GossipAddr = "localhost:7072" }, "want an IP address"},
		{"no port", func(c *cluster.Config) { c.GossipAddr = "127.0.0.1" }, "not IP:port"},
		{"bad port", func(c *cluster.Config) { c.GossipAddr = "127.0.0.1:99999" }, "port must be"},
		{"wildcard without advertise", func(c *cluster.Config) { c.GossipAddr = "0.0.0.0:7072" }, "wildcard"},
		{"advertise host name", func(c *cluster.Config) { c.GossipAddr = "0.0.0.0:7072"; c.GossipAdvertise = "example.com:7072" }, "not a host name"},
		{"short key", func(c *cluster.Config) { c.GossipAddr = "127.0.0.1:0"; c.GossipKey = []byte("short") }, "16, 24 or 32 bytes"},
		{"negative ttl", func(c *cluster.Config) { c.PresenceTTL = -time.Second }, "negative"},
		{"commit timeout under raft's floor", func(c *cluster.Config) { c.CommitTimeout = 500 * time.Microsecond }, "want 1ms..1s"},
	}
	for _, tc := range cases {
		cfg := clustertest.Config("n1", t.TempDir(), "127.0.0.1:7070")
		tc.tweak(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	cfg := clustertest.Config("n1", t.TempDir(), "127.0.0.1:7070")
	cfg.GossipAddr, cfg.GossipAdvertise, cfg.GossipKey = "0.0.0.0:0", "10.0.0.1:7072", make([]byte, 24)
	if err := cfg.Validate(); err != nil {
		t.Errorf("a valid gossip config was refused: %v", err)
	}
}

// Through the API of a real node and its gossip: the watcher's periodic
// IDLE does not undo the hook's WORKING on any node, the hook's report
// keeps the watcher's pid and task health, and the hook's IDLE is taken.
func TestPresenceSourcesThroughTheNode(t *testing.T) {
	c := clustertest.New(t, 3, withGossip)
	a := c.Nodes[0]
	ctx := clustertest.Context(t)
	put := func(u api.PresenceUpdate) api.Presence {
		t.Helper()
		p, err := a.Client.PutPresence(ctx, "claude", u)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	watcherIdle := api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Source: "watcher", PID: 77,
		AgentHealth: api.AgentHealth{TasksSucceeded: 2}}
	put(watcherIdle)
	hook := put(api.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Source: "hook"})
	if hook.Substate != "WORKING" || hook.Source != "hook" || hook.PID != 77 || hook.TasksSucceeded != 2 {
		t.Fatalf("the hook's report answered %+v", hook)
	}
	beat := put(watcherIdle)
	if !beat.Newer(&hook) || beat.Substate != "WORKING" || beat.Source != "hook" {
		t.Fatalf("the watcher's heartbeat after the hook answered %+v", beat)
	}
	waitPresence(t, c.Nodes, "claude", "the watcher's heartbeat, WORKING from hook", func(p api.Presence) bool { return p == beat })
	idle := put(api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Source: "hook"})
	waitPresence(t, c.Nodes, "claude", "the hook's IDLE", func(p api.Presence) bool {
		return p == idle && p.Substate == "IDLE" && p.Source == "hook"
	})
}
