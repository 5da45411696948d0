// Package clustertest runs maos nodes in process for tests: each node is a
// cluster.Node with its HTTP API served on a loopback port, fast Raft
// timing, and a transport.Client pointed at it. It is imported only by
// tests: the cluster package's own (package cluster_test) and the system
// tests that run several packages against a cluster (testing/system).
//
// Every wait is a bounded poll that fails the test naming what it waited
// for; nodes stop when the test ends.
package clustertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// Version is the build version every node of Config reports (maosd
// sets the program's, cli/internal/version).
const Version = "v0.0.0-clustertest"

// Config is a node config with fast Raft timing, so elections finish in
// about a second, a 10 s forwarding retry budget and a discarded log.
// apiAddr is the host:port the node registers as its API.
func Config(id, dir, apiAddr string) cluster.Config {
	return cluster.Config{
		NodeID: id, DataDir: dir, RaftAddr: "127.0.0.1:0", APIAddr: apiAddr, Version: Version,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, RetryTimeout: 10 * time.Second,
	}
}

// Setup is what Start builds a node from; an Option adjusts it.
type Setup struct {
	// Config is the node's config, from Config; Config.NodeID says which
	// node an option is adjusting. With ServerTLS set the API serves
	// https with it and the node's Client trusts ClientTLS's roots
	// without presenting a certificate (an agent's client).
	Config cluster.Config
	// Auth, if set, turns the API's bearer-token auth on; the node's
	// Client then carries Auth.AdminToken.
	Auth *transport.AuthConfig
	// JoinTimeout bounds JoinVia (default 30 s).
	JoinTimeout time.Duration
	// Wrap, if set, is put in front of the node's API handler, as maosd
	// puts the web console (console.Mount) in front of it.
	Wrap func(apiHandler http.Handler) http.Handler
}

// An Option adjusts a node's Setup before it opens.
type Option func(*Setup)

// WithConfig is an Option that adjusts only the node's config.
func WithConfig(f func(*cluster.Config)) Option {
	return func(s *Setup) { f(&s.Config) }
}

// SameRaftAddr restarts a node on the Raft address it had, as an operator
// restarting maosd with the same flags would.
func SameRaftAddr(old *Node) Option {
	return WithConfig(func(c *cluster.Config) { c.RaftAddr = old.RaftAddr() })
}

// Node is one in-process node: the cluster.Node, its data dir, its API
// address (host:port) and a client of that API.
type Node struct {
	*cluster.Node
	Dir    string
	Addr   string
	Client *client.Client

	t       testing.TB
	srv     *http.Server
	stopped bool
}

// Start opens a node in dir, serves its API on apiAddr ("" picks a free
// loopback port; a restart passes the old one and gets a new one if
// another process took it), and bootstraps it (join empty) or joins it
// through join (API or gossip addresses). A node whose dir holds state
// does neither, as maosd on restart. Any failure fails the test; the node
// stops when the test ends.
func Start(t testing.TB, id, dir, apiAddr string, join []string, opts ...Option) *Node {
	t.Helper()
	n, err := StartJoin(t, id, dir, apiAddr, join, opts...)
	if err != nil {
		t.Fatalf("join %s: %v", id, err)
	}
	return n
}

// StartJoin is Start for tests of a refused join: it returns JoinVia's
// error (the node keeps running until the test ends) instead of failing
// the test. Every other failure still fails it.
func StartJoin(t testing.TB, id, dir, apiAddr string, join []string, opts ...Option) (*Node, error) {
	t.Helper()
	if apiAddr == "" {
		apiAddr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", apiAddr)
	if err != nil {
		// Another process took the old port while the node was down; the
		// API address may change across a restart (the leader registers
		// its own at every election), so take a new one.
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := Setup{Config: Config(id, dir, ln.Addr().String()), JoinTimeout: 30 * time.Second}
	for _, o := range opts {
		o(&s)
	}
	// The Raft address must stay the same across a restart; if another
	// process briefly holds the port, wait (bounded) for it.
	var node *cluster.Node
	deadline := time.Now().Add(10 * time.Second)
	for {
		node, err = cluster.Open(s.Config)
		if err == nil || !strings.Contains(err.Error(), "address already in use") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		ln.Close()
		t.Fatalf("open %s: %v", id, err)
	}
	addr := ln.Addr().String()
	n := &Node{Node: node, Dir: dir, Addr: addr, t: t}
	var h http.Handler = transport.NewServer(node, transport.ServerOptions{Logger: s.Config.Logger, Auth: s.Auth, Blobs: node, Metrics: node.Metrics()})
	if s.Wrap != nil {
		h = s.Wrap(h)
	}
	n.srv = &http.Server{Handler: h}
	if s.Config.ServerTLS != nil {
		agent := s.Config.ClientTLS.Clone()
		agent.Certificates = nil
		n.Client = client.NewClientTLS(addr, &http.Client{Transport: client.NewHTTPTransportTLS(agent)})
		// Refused handshakes are what the TLS tests provoke: not news.
		n.srv.TLSConfig, n.srv.ErrorLog = s.Config.ServerTLS, slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
		go n.srv.ServeTLS(ln, "", "")
	} else {
		n.Client = client.NewClient(addr, nil)
		go n.srv.Serve(ln)
	}
	if s.Auth != nil {
		n.Client = n.Client.WithToken(s.Auth.AdminToken)
	}
	t.Cleanup(n.Stop)
	switch {
	case node.HasState():
	case len(join) == 0:
		if err := node.Bootstrap(); err != nil {
			t.Fatalf("bootstrap %s: %v", id, err)
		}
	default:
		ctx, cancel := context.WithTimeout(context.Background(), s.JoinTimeout)
		defer cancel()
		if err := node.JoinVia(ctx, join); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Stop closes the node's HTTP server and the node (a leader hands over
// leadership first); safe to call twice.
func (n *Node) Stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	_ = n.srv.Close()
	if err := n.Node.Close(); err != nil {
		n.t.Errorf("close %s: %v", n.ID(), err)
	}
}

// Kill stops the node's HTTP server and the node with crash in place of
// Close (cluster's test hook Node.Crash, which leaves no clean marker);
// the node counts as stopped.
func (n *Node) Kill(crash func(*cluster.Node) error) {
	n.t.Helper()
	if n.stopped {
		return
	}
	n.stopped = true
	_ = n.srv.Close()
	if err := crash(n.Node); err != nil {
		n.t.Errorf("crash %s: %v", n.ID(), err)
	}
}

// Stopped reports whether Stop was called.
func (n *Node) Stopped() bool { return n.stopped }

// Voters is the number of voters in the node's Raft configuration, 0 if
// it cannot tell.
func (n *Node) Voters() int {
	st, err := n.Status(context.Background())
	if err != nil {
		return 0
	}
	c := 0
	for _, v := range st.Voters {
		if v.Suffrage == "voter" {
			c++
		}
	}
	return c
}

// IsLeader reports whether the node leads now.
func (n *Node) IsLeader() bool {
	st, _ := n.Status(context.Background())
	return st.State == "leader"
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
}

// New starts n nodes, n1..nN, in a temp dir: the first bootstraps, the
// rest join it; opts apply to every node (an option can tell nodes apart
// by Setup.Config.NodeID). It returns once every node is ready and sees
// all n as voters.
func New(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	base := t.TempDir()
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{c.Nodes[0].Addr}
		}
		id := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, Start(t, id, filepath.Join(base, id), "", join, opts...))
	}
	c.WaitReady()
	return c
}

// WaitReady polls (30 s) until every running node is ready and sees every
// node of the cluster as a voter.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	running := c.Running()
	WaitFor(c.t, 30*time.Second, "every node ready with all voters", func() bool {
		for _, n := range running {
			if n.Ready(context.Background()) != nil || n.Voters() != len(c.Nodes) {
				return false
			}
		}
		return true
	})
}

// Running returns the nodes not stopped.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if !n.stopped {
			out = append(out, n)
		}
	}
	return out
}

// Leader polls (30 s) until one running node leads, and returns it.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	var l *Node
	WaitFor(c.t, 30*time.Second, "a leader", func() bool {
		for _, n := range c.Running() {
			if n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// Follower returns a running node that is not the leader.
func (c *Cluster) Follower() *Node {
	c.t.Helper()
	l := c.Leader()
	for _, n := range c.Running() {
		if n != l {
			return n
		}
	}
	c.t.Fatal("no follower running")
	return nil
}

// Replace puts nw where old was in c.Nodes (a node restarted from old's
// data dir).
func (c *Cluster) Replace(old, nw *Node) {
	for i, n := range c.Nodes {
		if n == old {
			c.Nodes[i] = nw
		}
	}
}

// WaitFor polls cond every 10 ms until it holds, and fails the test
// naming what it waited for once it has waited timeout, what it is
// expected to take, and the test binary's deadline (testenv.Deadline) has
// come: it is a hang guard, and a loaded machine's slowness is no failure.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	if d := testenv.Deadline(t); d.After(deadline) {
		deadline = d
	}
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v (expected within %v)", what, time.Since(start).Round(time.Millisecond), timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Msg is a message from from to everyone on channel, normalized (id and
// time set) as a client would send it.
func Msg(from, channel, text string) *api.Message {
	m := &api.Message{From: from, To: api.Recipients{"all"}, Channel: channel, Content: api.Content{Text: text}}
	m.Normalize(time.Now())
	return m
}

// Context is a hang guard's context: it ends at the test binary's deadline
// (testenv.Deadline, less a tenth of the time left) or with the test, never
// after a fixed number of seconds a loaded machine could exceed in a test
// that would have passed (a 5 MiB artifact put and read through three
// nodes under -race once took longer than the 30 s this used to be).
func Context(t testing.TB) context.Context {
	ctx, _ := testenv.Context(t)
	return ctx
}
