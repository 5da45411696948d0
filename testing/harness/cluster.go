package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

// Options configure NewCluster and StartCluster.
type Options struct {
	// Maosd is the path of the maosd binary (from BuildBinaries); required.
	Maosd string
	// Nodes is how many nodes to start (default 3). They are named n1, n2,
	// ...; n1 bootstraps the cluster and the others join through it.
	Nodes int
	// ExtraArgs are added to every maosd command line (e.g. "--log-level",
	// "debug"); the flags the harness sets win over them.
	ExtraArgs []string
	// NodeArgs, if set, gives more arguments for one node by its id (n1,
	// n2, ...), added after ExtraArgs to every start of that node,
	// restarts included (e.g. "--agents", FILE for the node that runs a
	// watcher).
	NodeArgs func(id string) []string
	// Env holds extra KEY=VALUE environment variables for every maosd.
	Env []string
	// StartTimeout bounds each node start until its ready line (default
	// 30 s); StopTimeout a Stop or Kill (default 10 s); WaitTimeout the
	// cluster-wide waits: Leader, WaitReady, WaitConverged (default 30 s).
	StartTimeout time.Duration
	StopTimeout  time.Duration
	WaitTimeout  time.Duration
	// LogTailLines is how many lines of each node's log are printed when
	// the test failed (default 60).
	LogTailLines int
	// Partitionable puts a Proxy in front of every node's Raft port so that
	// Partition can cut Raft traffic between nodes, without root: node k
	// (n<k>) binds Raft on its own loopback IP 127.0.0.(10+k), port 0 on the
	// first start and the port it got on every restart, and dials its peers
	// from that IP; it advertises its proxy (on 127.0.0.1, the same address
	// across restarts), which tells the nodes apart by source IP. It needs
	// the whole 127.0.0.0/8 routed to loopback, as on Linux (not macOS: there
	// the cluster fails to start, saying so). The HTTP API stays on
	// 127.0.0.1 and is never proxied, so forwarding between nodes and the
	// harness's own requests are not cut: a partition is of Raft only.
	Partitionable bool
	// Secure runs the cluster with authentication and TLS, as a
	// multi-host deployment should: the harness makes a Security in
	// Dir/security (a CA, a certificate per node with the SANs 127.0.0.1
	// and the node's Raft IP, an admin token file, a gossip key) and starts
	// every maosd with --auth --admin-token-file, --tls-cert --tls-key
	// --tls-ca and --gossip-key. Its own clients (Node.Client: readiness,
	// status, the cluster-wide waits, SendWithRetry) speak https verified
	// against the CA and present the admin token. The Raft proxies of a
	// Partitionable cluster forward the TLS bytes as they are.
	Secure bool
	// AuthOnly runs the cluster with authentication (--auth and the admin
	// token file, which the harness's clients present) but neither TLS nor
	// a gossip key, on loopback: what a rogue gossip member can reach
	// (Security holds the token). Ignored with Secure or Netns.
	AuthOnly bool
	// Netns runs every node as a host of its own (Linux, root, iproute2):
	// node n<k> in a network namespace with the address 10.A.B.(10+k) on a
	// private bridge (a test-only subnet 10.200-250.B.0/24 chosen per
	// cluster; the bridge, where the test process is, holds .1), binding
	// its API, Raft and gossip on that address. It implies Secure --
	// non-loopback nodes run as a multi-host operator runs them -- and
	// replaces Partitionable's proxies: Partition, CutBetween and
	// CutOneWay cut every plane (Raft, forwarding, gossip) with routes
	// inside the namespaces, while the test still reaches every node.
	// Close removes the namespaces and the bridge; a cluster removes the
	// leftovers of harness processes that died before their Close. Where
	// namespaces cannot be made the cluster fails to start, saying why
	// (NetnsAvailable).
	Netns bool
	// Name names the cluster's directory (default "cluster"; NewCluster
	// uses the test's name).
	Name string
	// Logf receives what the harness reports about a cluster started with
	// StartCluster (node log tails and the kept directory when something
	// failed); nil discards it. NewCluster logs with t.Logf instead.
	Logf func(format string, args ...any)
}

// firstRaftIP + k is the last byte of node n<k>'s loopback IP in a
// partitionable cluster; maxPartitionable bounds the node count so it stays
// below 127.0.0.255.
const (
	firstRaftIP      = 10
	maxPartitionable = 240
)

// Cluster is a set of maosd processes on loopback, each with its own
// directory under Dir.
type Cluster struct {
	// Dir holds one directory per node (Dir/n1, ...). It is removed when
	// the test passed and kept, with its path logged, when it failed (or
	// Keep was called).
	Dir string

	t     testing.TB // nil for StartCluster
	opts  Options
	sec   *Security // nil unless Options.Secure
	mu    sync.Mutex
	nodes []*Node
	// removed are the nodes RemoveNode took out of the configuration:
	// no longer members (Nodes), still closed and reported by Close.
	removed []*Node
	// added counts every node ever added, so a node added after a
	// removal gets a new id (and Raft IP), never a removed node's.
	added int
	// argsOf maps a node's id to the id whose Options.NodeArgs it runs
	// (its own, or, for a replacement, the original node's).
	argsOf map[string]string

	net   *hostNet      // nil unless Options.Netns
	sides [][]string    // the current partition, by node id; nil when whole
	drops map[link]bool // the links cut, by node id; nil when whole
	cutMu sync.Mutex    // serialises changes of the cuts
	keep  bool
	fail  bool // a StartCluster start failed

	closeOnce sync.Once
}

// NewCluster is StartCluster for a test: the cluster's directory is named
// after the test, Close is registered with t.Cleanup (so it reports nodes
// that exited on their own with t.Errorf and, if the test failed, logs
// every node's log tail and keeps the directory), and any failure fails
// the test at once, so call it from the test's goroutine. In the -short
// tier (testing/testenv) it skips the test: real maosd processes are slow,
// and the full run (make test) has them; namespace mode asks RequireNetns.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Netns {
		RequireNetns(t)
	}
	testenv.Slow(t, "starts a cluster of maosd processes")
	if opts.Name == "" {
		opts.Name = t.Name()
	}
	c, err := newCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	c.t = t
	t.Cleanup(c.Close)
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// StartCluster starts opts.Nodes maosd processes in a new directory under
// the system's temporary directory: n1 bootstraps, then each other node
// joins through n1 in turn (each start waits for the node's ready line,
// which a joining node logs once it joined). It then waits until the
// nodes agree on a leader and every node is ready. It needs no
// testing.TB: a command (the chaos runner) uses it; the caller must Close
// the cluster. If the start fails, everything started is stopped, the
// node log tails go to opts.Logf, the directory is kept, and the error
// says where.
func StartCluster(opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		c.mu.Lock()
		c.fail = true
		c.mu.Unlock()
		c.Close()
		return nil, fmt.Errorf("%w (the cluster's directory is kept: %s)", err, c.Dir)
	}
	return c, nil
}

// newCluster checks opts, fills in defaults and makes the directory.
func newCluster(opts Options) (*Cluster, error) {
	if opts.Maosd == "" {
		return nil, errors.New("harness: Options.Maosd (the maosd binary) is required")
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 30 * time.Second
	}
	if opts.LogTailLines <= 0 {
		opts.LogTailLines = 60
	}
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	if opts.Secure || opts.Netns {
		opts.AuthOnly = false
	}
	if opts.Netns {
		if opts.Nodes > netnsMaxNodes {
			return nil, fmt.Errorf("harness: a namespace-mode cluster has at most %d nodes, not %d", netnsMaxNodes, opts.Nodes)
		}
		opts.Secure, opts.Partitionable = true, false
	}
	if opts.Partitionable {
		if opts.Nodes > maxPartitionable {
			return nil, fmt.Errorf("harness: a partitionable cluster has at most %d nodes, not %d", maxPartitionable, opts.Nodes)
		}
		if err := checkLoopbackIP(raftIP(opts.Nodes)); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "maos-"+dirName(opts.Name)+"-")
	if err != nil {
		return nil, fmt.Errorf("harness: cluster dir: %w", err)
	}
	c := &Cluster{Dir: dir, opts: opts}
	if opts.Secure || opts.AuthOnly {
		if c.sec, err = NewSecurity(filepath.Join(dir, "security")); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if opts.Netns {
		if c.net, err = newHostNet(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	return c, nil
}

// Security is the material of a cluster started with Options.Secure (the
// CA file a client verifies the nodes against, the admin token), nil for
// one without.
func (c *Cluster) Security() *Security { return c.sec }

// start adds the nodes and waits for a leader and every node ready.
func (c *Cluster) start() error {
	for i := 0; i < c.opts.Nodes; i++ {
		if _, err := c.AddNode(); err != nil {
			return err
		}
	}
	if _, err := c.Leader(); err != nil {
		return err
	}
	return c.WaitReady()
}

// raftIP is node n<k>'s own loopback IP in a partitionable cluster.
func raftIP(k int) string { return fmt.Sprintf("127.0.0.%d", firstRaftIP+k) }

// checkLoopbackIP fails, saying why, unless ip can be bound here.
func checkLoopbackIP(ip string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return fmt.Errorf("harness: a partitionable cluster binds each node's Raft on its own loopback IP, and %s cannot be bound here (only Linux routes all of 127.0.0.0/8 to lo): %w", ip, err)
	}
	return ln.Close()
}

// logf reports through t.Logf or Options.Logf.
func (c *Cluster) logf(format string, args ...any) {
	switch {
	case c.t != nil:
		c.t.Logf(format, args...)
	case c.opts.Logf != nil:
		c.opts.Logf(format, args...)
	}
}

// Keep makes Close keep the cluster's directory even if nothing failed.
func (c *Cluster) Keep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep = true
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func dirName(testName string) string {
	s := unsafeChars.ReplaceAllString(testName, "_")
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// AddNode creates the next node (n<k>, k never reused) and starts it: the
// first node of the cluster bootstraps, every other one joins through the
// API of the first member that runs (the first member if none does). It
// returns once the node logged its ready line. In a partitionable cluster
// the node gets its Raft proxy; a partition in force when it is added does
// not cut it.
func (c *Cluster) AddNode() (*Node, error) { return c.addNode("") }

// addNode is AddNode; argsOf, if not "", names the node whose
// Options.NodeArgs the new node gets instead of its own (a replacement
// runs what the node it replaces ran).
func (c *Cluster) addNode(argsOf string) (*Node, error) {
	c.mu.Lock()
	c.added++
	k := c.added
	id := fmt.Sprintf("n%d", k)
	if argsOf == "" {
		argsOf = id
	}
	if c.argsOf == nil {
		c.argsOf = map[string]string{}
	}
	c.argsOf[id] = argsOf
	var join []string
	if len(c.nodes) > 0 {
		join = []string{c.joinAddrLocked()}
	}
	extra := append([]string(nil), c.opts.ExtraArgs...)
	if c.opts.NodeArgs != nil {
		extra = append(extra, c.opts.NodeArgs(argsOf)...)
	}
	cfg := NodeConfig{
		ID: id, Dir: filepath.Join(c.Dir, id), Maosd: c.opts.Maosd, Join: join,
		ExtraArgs: extra, Env: c.opts.Env, StartTimeout: c.opts.StartTimeout, StopTimeout: c.opts.StopTimeout,
	}
	if c.net != nil {
		host, err := c.net.addHost(id, k)
		if err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("harness: add %s: %w", id, err)
		}
		cfg.IP, cfg.Netns = host.ip, host.ns
	}
	if c.opts.Partitionable {
		if k > maxPartitionable {
			c.mu.Unlock()
			return nil, fmt.Errorf("harness: add %s: a partitionable cluster has at most %d nodes", id, maxPartitionable)
		}
		p, err := NewProxy("127.0.0.1:0")
		if err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("harness: add %s: %w", id, err)
		}
		cfg.RaftIP, cfg.RaftProxy = raftIP(k), p
	}
	if c.sec != nil {
		var err error
		if c.opts.AuthOnly {
			cfg.Security = &NodeSecurity{NoTLS: true, AdminTokenFile: c.sec.AdminTokenFile, AdminToken: c.sec.AdminToken}
		} else if cfg.Security, err = c.sec.Node(id, cfg.RaftIP, cfg.IP); err != nil {
			c.mu.Unlock()
			if cfg.RaftProxy != nil {
				_ = cfg.RaftProxy.Close()
			}
			return nil, fmt.Errorf("harness: add %s: %w", id, err)
		}
	}
	n, err := NewNode(cfg)
	if err != nil {
		c.mu.Unlock()
		if cfg.RaftProxy != nil {
			_ = cfg.RaftProxy.Close()
		}
		return nil, err
	}
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	if err := n.Start(); err != nil {
		return n, err
	}
	return n, nil
}

// Nodes returns the cluster's members in creation order (n1 first),
// whatever their state; a node RemoveNode removed is no longer one.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Live returns the nodes that run and are not paused.
func (c *Cluster) Live() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if n.Live() {
			out = append(out, n)
		}
	}
	return out
}

// Others returns the nodes other than those given.
func (c *Cluster) Others(not ...*Node) []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		skip := false
		for _, x := range not {
			skip = skip || x == n
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
}

// statusTimeout bounds one status request of a poll.
const statusTimeout = 2 * time.Second

// statuses asks every node in nodes for its status, concurrently.
func statuses(nodes []*Node) ([]api.Status, []error) {
	sts := make([]api.Status, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sts[i], errs[i] = n.Status(statusTimeout)
		}()
	}
	wg.Wait()
	return sts, errs
}

// Leader polls GET /v1/cluster/status of every live node until all of them
// answer, all name the same leader, that leader is one of them and says
// it leads; then it returns the leader. It gives up after the wait timeout.
func (c *Cluster) Leader() (*Node, error) {
	return c.WaitLeader(c.opts.WaitTimeout)
}

// WaitLeader is Leader with its own timeout.
func (c *Cluster) WaitLeader(timeout time.Duration) (*Node, error) {
	return c.waitLeader(timeout, "the live nodes", c.Live)
}

// LeaderAmong is Leader for a part of the cluster -- one side of a
// partition, say: it polls the live nodes among nodes until they agree on
// a leader that is one of them and says it leads, up to timeout.
func (c *Cluster) LeaderAmong(timeout time.Duration, nodes ...*Node) (*Node, error) {
	return c.waitLeader(timeout, "the live nodes of "+nodeIDs(nodes), func() []*Node {
		var live []*Node
		for _, n := range nodes {
			if n.Live() {
				live = append(live, n)
			}
		}
		return live
	})
}

func nodeIDs(nodes []*Node) string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return "[" + strings.Join(ids, " ") + "]"
}

func (c *Cluster) waitLeader(timeout time.Duration, who string, nodes func() []*Node) (*Node, error) {
	var leader *Node
	err := WaitFor(timeout, who+" to agree on a leader", func() error {
		live := nodes()
		if len(live) == 0 {
			return fmt.Errorf("no live node; %s", c.describe())
		}
		sts, errs := statuses(live)
		var id string
		for i, n := range live {
			if errs[i] != nil {
				return fmt.Errorf("%s: %v", n.ID, errs[i])
			}
			switch {
			case sts[i].LeaderID == "":
				return fmt.Errorf("%s (%s, term %d) knows no leader", n.ID, sts[i].State, sts[i].Term)
			case id == "":
				id = sts[i].LeaderID
			case sts[i].LeaderID != id:
				return fmt.Errorf("%s says the leader is %s, %s says %s", live[0].ID, id, n.ID, sts[i].LeaderID)
			}
		}
		for i, n := range live {
			if n.ID == id {
				if sts[i].State != "leader" {
					return fmt.Errorf("the others name %s, which is %s", id, sts[i].State)
				}
				leader = n
				return nil
			}
		}
		return fmt.Errorf("the live nodes name %s, which is not live; %s", id, c.describe())
	})
	if err != nil {
		return nil, err
	}
	return leader, nil
}

// Followers waits for a leader and returns the other live nodes.
func (c *Cluster) Followers() ([]*Node, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, err
	}
	var out []*Node
	for _, n := range c.Live() {
		if n != l {
			out = append(out, n)
		}
	}
	return out, nil
}

// WaitReady waits until every live node answers /readyz with 200.
func (c *Cluster) WaitReady() error {
	deadline := time.Now().Add(c.opts.WaitTimeout)
	for _, n := range c.Live() {
		if err := n.WaitReady(time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}

// WaitConverged polls until every live node reports the same applied
// index, equal to its commit index -- every node has applied the same
// entries -- and returns that index. Stop writing first: under load the
// indexes never line up.
func (c *Cluster) WaitConverged() (uint64, error) {
	var index uint64
	err := WaitFor(c.opts.WaitTimeout, "every live node to apply the same index", func() error {
		live := c.Live()
		if len(live) == 0 {
			return fmt.Errorf("no live node; %s", c.describe())
		}
		sts, errs := statuses(live)
		var seen []string
		for i, n := range live {
			if errs[i] != nil {
				return fmt.Errorf("%s: %v", n.ID, errs[i])
			}
			seen = append(seen, fmt.Sprintf("%s applied %d commit %d", n.ID, sts[i].AppliedIndex, sts[i].CommitIndex))
		}
		for i := range live {
			if sts[i].AppliedIndex != sts[0].AppliedIndex || sts[i].AppliedIndex != sts[i].CommitIndex {
				return errors.New(strings.Join(seen, ", "))
			}
		}
		index = sts[0].AppliedIndex
		return nil
	})
	return index, err
}

// SendOptions tune SendWithRetry.
type SendOptions struct {
	// Nodes to send through (default: every node of the cluster, whatever
	// its state: a dead one refuses at once and the next is tried).
	Nodes []*Node
	// AttemptTimeout bounds one request (default 15 s, longer than a
	// node's own 10 s forwarding retry loop).
	AttemptTimeout time.Duration
	// OnError, if set, is called with every failed attempt.
	OnError func(n *Node, err error)
	// Token, if set, is the bearer token every attempt presents instead
	// of the harness's own (the admin token of a Secure cluster): an
	// agent's token, to send as that agent.
	Token string
}

// SendResult is what SendWithRetry got.
type SendResult struct {
	Resp     *api.SendResponse
	Node     *Node // the node that acknowledged
	Attempts int
}

// SendWithRetry sends m through a randomly chosen node and, on a
// retryable error (api.Classify), sends the same message again through
// another node, with a short capped backoff, until one acknowledges or ctx
// ends. m must have its ID set so the retries are deduplicated. A final
// error (4xx) is returned at once.
func (c *Cluster) SendWithRetry(ctx context.Context, m *api.Message, o SendOptions) (SendResult, error) {
	var res SendResult
	if m.ID == "" {
		return res, errors.New("harness: SendWithRetry: the message needs a fixed id")
	}
	nodes := o.Nodes
	if len(nodes) == 0 {
		nodes = c.Nodes()
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 15 * time.Second
	}
	backoff := 10 * time.Millisecond
	var last *Node
	var lastErr error
	for {
		candidates := nodes
		if last != nil && len(nodes) > 1 {
			candidates = make([]*Node, 0, len(nodes))
			for _, x := range nodes {
				if x != last {
					candidates = append(candidates, x)
				}
			}
		}
		n := candidates[rand.IntN(len(candidates))]
		last = n
		res.Attempts++
		if cl := n.Client(); cl == nil {
			lastErr = fmt.Errorf("%s was never started", n.ID)
		} else {
			if o.Token != "" {
				cl = cl.WithToken(o.Token)
			}
			actx, cancel := context.WithTimeout(ctx, o.AttemptTimeout)
			resp, err := cl.Send(actx, m)
			cancel()
			if err == nil {
				res.Resp, res.Node = resp, n
				return res, nil
			}
			lastErr = fmt.Errorf("via %s: %w", n.ID, err)
			if o.OnError != nil {
				o.OnError(n, err)
			}
			if !api.Classify(err).Retry() {
				return res, fmt.Errorf("harness: send %s: final error after %d attempts: %w", m.ID, res.Attempts, lastErr)
			}
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("harness: send %s: not acknowledged after %d attempts (%w); last error: %w",
				m.ID, res.Attempts, ctx.Err(), lastErr)
		case <-t.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// describe says which node is in which state, for error messages.
func (c *Cluster) describe() string {
	var parts []string
	for _, n := range c.Nodes() {
		parts = append(parts, fmt.Sprintf("%s %s (pid %d, api %s)", n.ID, c.nodeState(n), n.PID(), n.APIAddr()))
	}
	s := "nodes: " + strings.Join(parts, ", ")
	if p := c.partitionString(); p != "" {
		s += "; " + p
	}
	return s
}

// Close kills (SIGKILL, by PID) every process of the cluster that still
// runs and closes the Raft proxies. It reports each node that exited on
// its own (with t.Errorf for a NewCluster cluster, through Options.Logf
// otherwise) and, if something failed -- the test, a StartCluster start, a
// node exiting on its own -- logs the tail of every node's log and keeps
// Dir, as it does after Keep; otherwise it removes Dir. NewCluster
// registers it with t.Cleanup; calling it again does nothing.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		report := c.logf
		if c.t != nil {
			report = c.t.Errorf
		}
		problems := c.stopAll()
		if c.net != nil {
			// After stopAll: a namespace a process still holds outlives
			// its name.
			if err := c.net.close(); err != nil {
				problems = append(problems, err.Error())
			}
		}
		for _, p := range problems {
			report("harness: %s", p)
		}
		c.mu.Lock()
		failed, keep := c.fail || len(problems) > 0, c.keep
		c.mu.Unlock()
		if c.t != nil {
			failed = c.t.Failed()
		}
		if failed {
			c.DumpLogs()
		}
		if failed || keep {
			c.logf("harness: kept the cluster's directory (data dirs and logs): %s", c.Dir)
			return
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			c.logf("harness: remove %s: %v", c.Dir, err)
		}
	})
}

// stopAll kills every node still running, closes the proxies, and returns
// what went wrong: kills that failed, nodes that exited on their own.
func (c *Cluster) stopAll() []string {
	nodes := c.allNodes()
	var mu sync.Mutex
	var problems []string
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n.Running() {
				if err := n.Kill(); err != nil {
					mu.Lock()
					problems = append(problems, "close: "+err.Error())
					mu.Unlock()
				}
			}
			n.closeIdle()
			if p := n.Proxy(); p != nil {
				_ = p.Close()
			}
		}()
	}
	wg.Wait()
	for _, n := range nodes {
		problems = append(problems, n.UnexpectedExits()...)
	}
	return problems
}

// DumpLogs writes the tail of every node's log with t.Logf (Options.Logf
// for a StartCluster cluster).
func (c *Cluster) DumpLogs() {
	nodes := c.allNodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	if p := c.partitionString(); p != "" {
		c.logf("harness: %s", p)
	}
	for _, n := range nodes {
		raft := n.RaftAddr()
		if b := n.RaftBindAddr(); b != raft {
			raft += " via proxy to " + b
		}
		c.logf("harness: ---- %s (api %s, raft %s, %s): last %d lines of %s ----\n%s",
			n.ID, n.APIAddr(), raft, c.nodeState(n), c.opts.LogTailLines, n.LogPath, n.LogTail(c.opts.LogTailLines))
	}
}

func (c *Cluster) nodeState(n *Node) string {
	switch {
	case n.Paused():
		return "paused"
	case n.Running():
		return "running"
	}
	return "down"
}
