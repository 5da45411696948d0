package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// testNode is one in-process node with its HTTP API on an ephemeral
// loopback port.
type testNode struct {
	*Node
	t      testing.TB
	id     string
	dir    string
	api    string
	ln     net.Listener
	srv    *http.Server
	client *transport.Client
	closed bool
}

// testConfig has fast Raft timing so elections finish quickly in tests.
func testConfig(id, dir, api string) Config {
	return Config{
		NodeID: id, DataDir: dir, RaftAddr: "127.0.0.1:0", APIAddr: api,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, RetryTimeout: 10 * time.Second,
	}
}

// startNode opens a node in dir, serves its API, and bootstraps it (join
// empty) or joins it through join. A node whose dir holds state does
// neither. api "" picks a free port.
func startNode(t testing.TB, id, dir, api string, join []string, tweak ...func(*Config)) *testNode {
	t.Helper()
	if api == "" {
		api = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", api)
	if err != nil {
		// Another process took the old port while the node was down; the
		// API address may change across a restart (the leader registers
		// its own at every election), so take a new one.
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cfg := testConfig(id, dir, ln.Addr().String())
	for _, f := range tweak {
		f(&cfg)
	}
	// The Raft address must stay the same across a restart; if another
	// process briefly holds the port, wait (bounded) for it.
	var node *Node
	deadline := time.Now().Add(10 * time.Second)
	for {
		node, err = Open(cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		ln.Close()
		t.Fatalf("open %s: %v", id, err)
	}
	tn := &testNode{Node: node, t: t, id: id, dir: dir, api: ln.Addr().String(), ln: ln,
		client: transport.NewClient(ln.Addr().String(), nil)}
	tn.srv = &http.Server{Handler: transport.NewServer(node, transport.ServerOptions{Logger: cfg.Logger})}
	go tn.srv.Serve(ln)
	t.Cleanup(tn.stop)
	switch {
	case node.HasState():
	case len(join) == 0:
		if err := node.Bootstrap(); err != nil {
			t.Fatalf("bootstrap %s: %v", id, err)
		}
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := node.JoinVia(ctx, join); err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
	}
	return tn
}

// stop closes the HTTP server and the node; safe to call twice.
func (tn *testNode) stop() {
	if tn.closed {
		return
	}
	tn.closed = true
	_ = tn.srv.Close()
	if err := tn.Node.Close(); err != nil {
		tn.t.Errorf("close %s: %v", tn.id, err)
	}
}

// sameRaftAddr restarts a node on the Raft address it had, as an operator
// restarting maosd with the same flags would.
func sameRaftAddr(old *testNode) func(*Config) {
	return func(c *Config) { c.RaftAddr = old.RaftAddr() }
}

// testCluster is a set of in-process nodes.
type testCluster struct {
	t     testing.TB
	nodes []*testNode
}

// newTestCluster starts n nodes: the first bootstraps, the rest join it.
// tweak adjusts every node's config.
func newTestCluster(t testing.TB, n int, tweak ...func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	base := t.TempDir()
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{c.nodes[0].api}
		}
		c.nodes = append(c.nodes, startNode(t, fmt.Sprintf("n%d", i+1), filepath.Join(base, fmt.Sprintf("n%d", i+1)), "", join, tweak...))
	}
	c.waitReady()
	return c
}

// waitReady polls until every running node is ready and sees every other
// one as a voter.
func (c *testCluster) waitReady() {
	c.t.Helper()
	running := c.running()
	waitFor(c.t, 30*time.Second, "every node ready with all voters", func() bool {
		for _, n := range running {
			if n.Ready(context.Background()) != nil || n.voterCount() != len(c.nodes) {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) running() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		if !n.closed {
			out = append(out, n)
		}
	}
	return out
}

// leader polls until one running node leads, and returns it.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var l *testNode
	waitFor(c.t, 30*time.Second, "a leader", func() bool {
		for _, n := range c.running() {
			if n.raft.State().String() == "Leader" {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// follower returns a running node that is not the leader.
func (c *testCluster) follower() *testNode {
	c.t.Helper()
	l := c.leader()
	for _, n := range c.running() {
		if n != l {
			return n
		}
	}
	c.t.Fatal("no follower running")
	return nil
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func msg(from, channel, text string) *fsm.Message {
	m := &fsm.Message{From: from, To: fsm.Recipients{"all"}, Channel: channel, Content: fsm.Content{Text: text}}
	m.Normalize(time.Now())
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func isAPI(err error, code string) bool {
	var api *transport.APIError
	return errors.As(err, &api) && api.Code == code
}
