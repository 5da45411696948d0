package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// ReadyMessage is the msg of the log line maosd writes once it serves; with
// --log-format json the line carries api_addr, raft_addr (the advertised
// Raft address) and gossip_addr.
const ReadyMessage = "maosd ready to serve"

// OpenMessage is the msg of the log line a maosd node writes once its Raft
// transport listens, before it joins; with --log-format json the line
// carries raft_bind, the address the transport actually listens on (which
// differs from raft_addr when an advertise address is given). A node with
// a RaftProxy learns its bind address from it, because a joining node's
// Raft port must be reachable through the proxy before it is ready.
const OpenMessage = "node open"

// Node is one maosd process of a Cluster (or on its own, from NewNode).
//
// The first Start binds 127.0.0.1:0 for the HTTP API, Raft and gossip (Raft
// on RaftIP:0 if one was given, advertising the RaftProxy's address if there
// is one), and passes --join when the node was created with join addresses;
// every later start passes the same --node-id and --data-dir and,
// explicitly, the addresses the first start got, and never --join, as an
// operator restarting a node would. All methods are safe for concurrent
// use; the lifecycle methods (Start, Stop, Kill, Restart, Pause, Resume) are
// serialised per node.
type Node struct {
	// ID is the --node-id.
	ID string
	// Dir is the node's own directory: the data dir and the log live here.
	Dir string
	// DataDir is the --data-dir, Dir/data.
	DataDir string
	// LogPath is the file that receives the process's stdout and stderr,
	// Dir/maosd.log, appended to on every start with a header line.
	LogPath string

	bin    string
	extra  []string
	env    []string
	join   []string
	to     timeouts
	raftIP string // "" for ip
	ip     string // "" for 127.0.0.1
	netns  string // "" for the test's own namespace
	proxy  *Proxy // nil: Raft is not proxied
	sec    *NodeSecurity
	tlsCfg *tls.Config // the harness's client TLS; nil without Security

	op sync.Mutex // serialises lifecycle operations

	mu         sync.Mutex
	apiAddr    string
	raftAddr   string // advertised (the proxy's address when proxied)
	raftBind   string // listened on; "" until learned
	gossipAddr string // "" until learned
	client     *client.Client
	hc         *http.Client
	proc       *process
	paused     bool
	starts     int
	unexpected []string // what the process said when it exited on its own
}

// process is one run of maosd.
type process struct {
	cmd    *exec.Cmd
	lw     *logWriter
	pid    int
	start  int // the node's start number
	done   chan struct{}
	state  *os.ProcessState // set before done is closed
	expect bool             // guarded by Node.mu: the harness asked it to exit
}

type timeouts struct {
	start, stop time.Duration
}

// NodeConfig configures NewNode.
type NodeConfig struct {
	ID    string   // --node-id; required
	Dir   string   // the node's directory; required (created if needed)
	Maosd string   // path to the maosd binary; required
	Join  []string // API addresses to --join through on the first start
	// ExtraArgs are added to every maosd command line before the flags the
	// harness sets (--node-id, --data-dir, --http-addr, --raft-addr,
	// --gossip-addr, --join, --log-format json), which therefore win.
	ExtraArgs []string
	// Env holds extra KEY=VALUE environment variables for maosd, on top of
	// the test process's environment.
	Env []string
	// StartTimeout bounds a start until the ready line (default 30 s);
	// StopTimeout how long Stop waits after SIGTERM before SIGKILL and how
	// long Kill waits for the exit (default 10 s).
	StartTimeout time.Duration
	StopTimeout  time.Duration
	// RaftIP, if set, is the loopback IP the node binds Raft on (port 0 on
	// the first start, the port it got on every later one) instead of
	// 127.0.0.1; maosd then dials its peers from that IP.
	RaftIP string
	// RaftProxy, if set, is advertised as the node's Raft address
	// (--raft-advertise), so every peer reaches the node through it; its
	// target is set to the node's real Raft address as soon as the node
	// logs it (OpenMessage). The caller owns the proxy and closes it.
	RaftProxy *Proxy
	// IP, if set, is the address the node binds its API, gossip and
	// (without RaftIP) Raft on, port 0 on the first start, instead of
	// 127.0.0.1: a namespace-mode node's own address.
	IP string
	// Netns, if set, names the network namespace (ip netns) maosd runs
	// in: it is started as `ip netns exec NETNS maosd ...`, which execs
	// maosd in the same process, so the PID, the parent-death signal and
	// every signal the harness sends are maosd's own.
	Netns string
	// Security, if set, starts the node with authentication and TLS (its
	// flags come after ExtraArgs, so they win), and makes the harness's
	// own client of the node (Client) speak https, verifying the node
	// against Security.TLS.CA, with the admin token.
	Security *NodeSecurity
}

// NewNode returns a node that is not started yet. Most tests use
// NewCluster instead.
func NewNode(cfg NodeConfig) (*Node, error) {
	if cfg.ID == "" || cfg.Dir == "" || cfg.Maosd == "" {
		return nil, errors.New("harness: NewNode: ID, Dir and Maosd are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: node %s: %w", cfg.ID, err)
	}
	n := &Node{
		ID:      cfg.ID,
		Dir:     cfg.Dir,
		DataDir: filepath.Join(cfg.Dir, "data"),
		LogPath: filepath.Join(cfg.Dir, "maosd.log"),
		bin:     cfg.Maosd,
		extra:   append([]string(nil), cfg.ExtraArgs...),
		env:     append([]string(nil), cfg.Env...),
		join:    append([]string(nil), cfg.Join...),
		to:      timeouts{start: cfg.StartTimeout, stop: cfg.StopTimeout},
		raftIP:  cfg.RaftIP,
		ip:      cfg.IP,
		netns:   cfg.Netns,
		proxy:   cfg.RaftProxy,
	}
	if cfg.Security != nil {
		if err := cfg.Security.validate(); err != nil {
			return nil, fmt.Errorf("harness: node %s: %w", cfg.ID, err)
		}
		sec := *cfg.Security
		n.sec = &sec
	}
	if cfg.Security != nil && !cfg.Security.NoTLS {
		tc, err := client.TLSFiles{CA: cfg.Security.TLS.CA, CAFlag: "NodeSecurity.TLS.CA"}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("harness: node %s: %w", cfg.ID, err)
		}
		n.tlsCfg = tc
	}
	if n.to.start <= 0 {
		n.to.start = 30 * time.Second
	}
	if n.to.stop <= 0 {
		n.to.stop = 10 * time.Second
	}
	return n, nil
}

// APIAddr is the node's HTTP API address (host:port), "" before the first
// start.
func (n *Node) APIAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.apiAddr
}

// RaftAddr is the node's advertised Raft address -- what its peers dial,
// its RaftProxy's address if it has one -- "" before the first start.
func (n *Node) RaftAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.raftAddr
}

// RaftBindAddr is the address the node's Raft transport listens on: the
// RaftAddr unless the node is proxied; "" before the first start.
func (n *Node) RaftBindAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.raftBind == "" {
		return n.raftAddr
	}
	return n.raftBind
}

// GossipAddr is the node's gossip (memberlist) address, "" before the
// first start.
func (n *Node) GossipAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gossipAddr
}

// RaftIP is the IP the node binds Raft on and dials its peers from.
func (n *Node) RaftIP() string {
	if n.raftIP == "" {
		return n.IP()
	}
	return n.raftIP
}

// IP is the address the node binds its API and gossip on: 127.0.0.1, or
// its own in a namespace-mode cluster.
func (n *Node) IP() string {
	if n.ip == "" {
		return "127.0.0.1"
	}
	return n.ip
}

// Netns is the network namespace the node runs in, "" for the test's own.
func (n *Node) Netns() string { return n.netns }

// Proxy is the proxy in front of the node's Raft port, nil if none.
func (n *Node) Proxy() *Proxy { return n.proxy }

// Client is an API client for the node; nil before the first start. It
// stays valid across restarts (the address does not change). For a node
// with Security it speaks https, verifying the node against the CA, and
// presents the admin token; WithToken gives one that presents another.
func (n *Node) Client() *client.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.client
}

// PID is the process id of the running maosd, 0 when none runs.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return 0
	}
	return n.proc.pid
}

// Running reports whether the node's process runs (possibly paused).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked()
}

func (n *Node) runningLocked() bool {
	if n.proc == nil {
		return false
	}
	select {
	case <-n.proc.done:
		return false
	default:
		return true
	}
}

// Paused reports whether the node is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused && n.runningLocked()
}

// Live reports whether the node runs and is not paused: it should answer.
func (n *Node) Live() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.paused && n.runningLocked()
}

// Starts is how many times the node was started.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// UnexpectedExits describes each time the process exited without the
// harness asking it to (a crash, a fatal error): exit status and log tail.
func (n *Node) UnexpectedExits() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.unexpected...)
}

// Start launches maosd and waits (up to the start timeout) for its ready
// line. On the first start it learns the addresses from that line; later
// starts reuse them. A restart whose port is momentarily taken by another
// socket is retried until the start timeout. Start does not wait for the
// node to have a leader: use WaitReady.
func (n *Node) Start() error {
	n.op.Lock()
	defer n.op.Unlock()
	return n.start()
}

func (n *Node) start() error {
	if n.Running() {
		return fmt.Errorf("harness: start %s: already running (pid %d)", n.ID, n.PID())
	}
	deadline := time.Now().Add(n.to.start)
	for {
		retry, err := n.launch(deadline)
		if err == nil || !retry || time.Now().After(deadline) {
			return err
		}
		// The address of a restart is held by some other socket (an
		// outgoing connection's ephemeral port, say); it frees up soon.
		time.Sleep(10 * PollInterval)
	}
}

// args builds the command line of the next start.
func (n *Node) args() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	args := append([]string(nil), n.extra...)
	if n.sec != nil {
		args = append(args, n.sec.args()...)
	}
	args = append(args, "--node-id", n.ID, "--data-dir", n.DataDir, "--log-format", "json")
	gossip := n.gossipAddr
	if gossip == "" {
		gossip = net.JoinHostPort(n.IP(), "0")
	}
	args = append(args, "--gossip-addr", gossip)
	if n.apiAddr == "" {
		args = append(args, "--http-addr", net.JoinHostPort(n.IP(), "0"), "--raft-addr", net.JoinHostPort(n.RaftIP(), "0"))
		for _, j := range n.join {
			args = append(args, "--join", j)
		}
	} else {
		bind := n.raftBind
		if bind == "" {
			bind = n.raftAddr
		}
		args = append(args, "--http-addr", n.apiAddr, "--raft-addr", bind)
	}
	if n.proxy != nil {
		args = append(args, "--raft-advertise", n.proxy.Addr())
	}
	return args
}

// launch runs maosd once and waits for its ready line. retry reports a
// failure worth another try (a restart's address in use).
func (n *Node) launch(deadline time.Time) (retry bool, err error) {
	args := n.args()
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, fmt.Errorf("harness: start %s: log file: %w", n.ID, err)
	}
	n.mu.Lock()
	n.starts++
	startNo := n.starts
	first := n.apiAddr == ""
	n.mu.Unlock()
	bin := n.bin
	if n.netns != "" {
		ip, err := exec.LookPath("ip")
		if err != nil {
			logf.Close()
			return false, fmt.Errorf("harness: start %s in namespace %s: %w", n.ID, n.netns, err)
		}
		// ip execs maosd in its own process: the PID stays maosd's.
		bin, args = ip, append([]string{"netns", "exec", n.netns, n.bin}, args...)
	}
	fmt.Fprintf(logf, "=== harness: start #%d of %s at %s: %s %s\n", startNo, n.ID,
		time.Now().UTC().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	lw := newLogWriter(logf, n.onOpen)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lw, lw
	cmd.Dir = n.Dir
	if len(n.env) > 0 {
		cmd.Env = append(os.Environ(), n.env...)
	}
	// Wait returns at most this long after the process exited even if
	// something still held its output pipe.
	cmd.WaitDelay = 5 * time.Second
	if err := StartProcess(cmd); err != nil {
		logf.Close()
		return false, fmt.Errorf("harness: start %s: %w", n.ID, err)
	}
	p := &process{cmd: cmd, lw: lw, pid: cmd.Process.Pid, start: startNo, done: make(chan struct{})}
	n.mu.Lock()
	n.proc, n.paused = p, false
	n.mu.Unlock()
	go n.reap(p, logf)

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-lw.ready:
		bind := lw.raftBind()
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.proxy != nil && bind == "" {
			return false, fmt.Errorf("harness: %s (start #%d, pid %d) is ready but never logged %q with its raft_bind; the harness cannot set its Raft proxy's target",
				n.ID, startNo, p.pid, OpenMessage)
		}
		if first {
			n.apiAddr, n.raftAddr, n.raftBind, n.gossipAddr = r.APIAddr, r.RaftAddr, bind, r.GossipAddr
			switch {
			case n.sec != nil && n.sec.NoTLS:
				n.hc = &http.Client{Transport: client.NewHTTPTransport()}
				n.client = client.NewClient(n.apiAddr, n.hc).WithToken(n.sec.AdminToken)
			case n.sec != nil:
				n.hc = &http.Client{Transport: client.NewHTTPTransportTLS(n.tlsCfg)}
				n.client = client.NewClientTLS(n.apiAddr, n.hc).WithToken(n.sec.AdminToken)
			default:
				n.hc = &http.Client{Transport: client.NewHTTPTransport()}
				n.client = client.NewClient(n.apiAddr, n.hc)
			}
		} else if r.APIAddr != n.apiAddr || r.RaftAddr != n.raftAddr || n.raftBind != "" && bind != n.raftBind ||
			n.gossipAddr != "" && r.GossipAddr != n.gossipAddr {
			return false, fmt.Errorf("harness: restart of %s serves api %s raft %s (bound on %s) gossip %s, want api %s raft %s (bound on %s) gossip %s",
				n.ID, r.APIAddr, r.RaftAddr, bind, r.GossipAddr, n.apiAddr, n.raftAddr, n.raftBind, n.gossipAddr)
		}
		if n.proxy != nil && r.RaftAddr != n.proxy.Addr() {
			return false, fmt.Errorf("harness: %s advertises raft %s, not its proxy %s", n.ID, r.RaftAddr, n.proxy.Addr())
		}
		return false, nil
	case <-p.done:
		tail := n.startTail(startNo, 40)
		inUse := !first && strings.Contains(tail, "address already in use")
		return inUse, fmt.Errorf("harness: %s (start #%d, pid %d) exited before it was ready: %s; log:\n%s",
			n.ID, startNo, p.pid, p.state, tail)
	case <-timer.C:
		_ = n.signalAndWait(p, syscall.SIGKILL, n.to.stop)
		return false, fmt.Errorf("harness: %s (start #%d, pid %d) did not log %q within %s; killed it; log:\n%s",
			n.ID, startNo, p.pid, ReadyMessage, n.to.start, n.startTail(startNo, 40))
	}
}

// reap waits for p to exit, records how, and closes its log file.
func (n *Node) reap(p *process, logf *os.File) {
	_ = p.cmd.Wait() // the exit status is in ProcessState
	p.state = p.cmd.ProcessState
	n.mu.Lock()
	expected := p.expect
	n.mu.Unlock()
	p.lw.mu.Lock()
	wasReady := p.lw.sent
	p.lw.mu.Unlock()
	fmt.Fprintf(logf, "=== harness: %s (start #%d, pid %d) exited at %s: %s (expected: %v)\n",
		n.ID, p.start, p.pid, time.Now().UTC().Format(time.RFC3339Nano), p.state, expected)
	logf.Close()
	close(p.done)
	// An exit before the ready line is reported by Start's error.
	if !expected && wasReady {
		msg := fmt.Sprintf("%s (start #%d, pid %d) exited on its own: %s; log:\n%s",
			n.ID, p.start, p.pid, p.state, n.startTail(p.start, 40))
		n.mu.Lock()
		n.unexpected = append(n.unexpected, msg)
		n.mu.Unlock()
	}
}

// running returns the current process, or an error naming op if there is
// none.
func (n *Node) running(op string) (*process, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return nil, fmt.Errorf("harness: %s %s: not running", op, n.ID)
	}
	return n.proc, nil
}

// signalAndWait marks p as told to exit, sends sig to its PID and waits up
// to d for it to exit.
func (n *Node) signalAndWait(p *process, sig syscall.Signal, d time.Duration) error {
	n.mu.Lock()
	p.expect = true
	n.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: %s %s (pid %d): %w", sig, n.ID, p.pid, err)
	}
	if !p.waitExit(d) {
		return fmt.Errorf("harness: %s (pid %d) still running %s after %s", n.ID, p.pid, d, sig)
	}
	n.closeIdle() // pooled connections to the dead process are useless
	return nil
}

// waitExit waits up to d for p to exit and reports whether it did.
func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Kill sends SIGKILL to the node's process and waits for it to exit: a
// crash, with nothing flushed beyond what maosd already synced.
func (n *Node) Kill() error {
	n.op.Lock()
	defer n.op.Unlock()
	return n.kill()
}

func (n *Node) kill() error {
	p, err := n.running("kill")
	if err != nil {
		return err
	}
	if err := n.signalAndWait(p, syscall.SIGKILL, n.to.stop); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// Stop asks the node to shut down (SIGTERM; a paused node is resumed so it
// can act on it) and waits up to the stop timeout, then SIGKILLs it. It
// returns an error if the node had to be killed or exited with a non-zero
// status: a graceful shutdown is expected to work.
func (n *Node) Stop() error {
	n.op.Lock()
	defer n.op.Unlock()
	return n.stop()
}

func (n *Node) stop() error {
	p, err := n.running("stop")
	if err != nil {
		return err
	}
	n.mu.Lock()
	p.expect = true
	paused := n.paused
	n.paused = false
	n.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: stop %s (pid %d): %w", n.ID, p.pid, err)
	}
	if paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	if !p.waitExit(n.to.stop) {
		if kerr := n.signalAndWait(p, syscall.SIGKILL, n.to.stop); kerr != nil {
			return kerr
		}
		return fmt.Errorf("harness: stop %s (pid %d): no exit within %s of SIGTERM; SIGKILLed it; log:\n%s",
			n.ID, p.pid, n.to.stop, n.startTail(p.start, 30))
	}
	n.closeIdle()
	if !p.state.Success() {
		return fmt.Errorf("harness: stop %s (pid %d): exited with %s after SIGTERM; log:\n%s",
			n.ID, p.pid, p.state, n.startTail(p.start, 30))
	}
	return nil
}

// SetEnv sets the environment variable key to value for the node's next
// starts (on top of NodeConfig.Env, replacing an earlier value of key).
func (n *Node) SetEnv(key, value string) {
	n.op.Lock()
	defer n.op.Unlock()
	kv := key + "=" + value
	for i, e := range n.env {
		if strings.HasPrefix(e, key+"=") {
			n.env[i] = kv
			return
		}
	}
	n.env = append(n.env, kv)
}

// SetMaosd makes the node's next starts run the maosd binary at path (a
// rolling upgrade: stop, SetMaosd, start on the same data dir).
func (n *Node) SetMaosd(path string) {
	n.op.Lock()
	defer n.op.Unlock()
	n.bin = path
}

// Restart stops the node if it runs (Stop), then starts it again from its
// data dir with the same id and addresses and no --join.
func (n *Node) Restart() error {
	n.op.Lock()
	defer n.op.Unlock()
	if n.Running() {
		if err := n.stop(); err != nil {
			return err
		}
	}
	return n.start()
}

// Pause stops the process with SIGSTOP (it keeps its sockets; peers see
// it hang, not refuse) and waits until the kernel reports it stopped.
func (n *Node) Pause() error {
	n.op.Lock()
	defer n.op.Unlock()
	p, err := n.running("pause")
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("harness: pause %s (pid %d): %w", n.ID, p.pid, err)
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	return WaitFor(n.to.stop, fmt.Sprintf("%s (pid %d) to stop after SIGSTOP", n.ID, p.pid), func() error {
		st, err := procState(p.pid)
		if err != nil || st == "T" || st == "t" {
			return nil // no /proc to check: trust the signal
		}
		return fmt.Errorf("process state %s", st)
	})
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error {
	n.op.Lock()
	defer n.op.Unlock()
	p, err := n.running("resume")
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("harness: resume %s (pid %d): %w", n.ID, p.pid, err)
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// procState is the state letter of /proc/PID/stat (R, S, D, T, Z, ...).
func procState(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return string(b[i+2]), nil
}

// Status fetches the node's GET /v1/cluster/status, bounded by d.
func (n *Node) Status(d time.Duration) (api.Status, error) {
	c := n.Client()
	if c == nil {
		return api.Status{}, fmt.Errorf("harness: %s was never started", n.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Status(ctx)
}

// WaitReady polls GET /readyz until the node answers 200 (it knows a
// leader and has applied what it knows to be committed), up to timeout.
func (n *Node) WaitReady(timeout time.Duration) error {
	c := n.Client()
	if c == nil {
		return fmt.Errorf("harness: %s was never started", n.ID)
	}
	return WaitFor(timeout, n.ID+" to answer /readyz with 200", func() error {
		if !n.Running() {
			return fmt.Errorf("%s is not running", n.ID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ready(ctx)
	})
}

// LogTail returns the last lines lines of the node's log (all its starts).
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return lastLines(string(b), lines)
}

// startTail returns the last lines of the log written by start number
// startNo (and after it).
func (n *Node) startTail(startNo, lines int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	s := string(b)
	if i := strings.LastIndex(s, fmt.Sprintf("=== harness: start #%d of ", startNo)); i >= 0 {
		s = s[i:]
	}
	return lastLines(s, lines)
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if n <= 0 {
		return ""
	}
	idx := len(s)
	for i := 0; i < n; i++ {
		j := strings.LastIndexByte(s[:idx], '\n')
		if j < 0 {
			return s
		}
		idx = j
	}
	return s[idx+1:]
}

// closeIdle drops the client's pooled connections.
func (n *Node) closeIdle() {
	n.mu.Lock()
	hc := n.hc
	n.mu.Unlock()
	if hc != nil {
		hc.CloseIdleConnections()
	}
}

// onOpen is called with the Raft bind address a starting maosd logged
// (OpenMessage), before its ready line: a proxied node's proxy forwards to
// it from then on, which a joining node needs to become ready at all.
func (n *Node) onOpen(raftBind string) {
	if n.proxy == nil {
		return
	}
	n.mu.Lock()
	want := n.raftBind
	n.mu.Unlock()
	if want == "" || want == raftBind {
		n.proxy.SetTarget(raftBind)
	} // else the restart moved: launch reports it
}

// readyLine is the part of maosd's ready and open log lines the harness
// reads.
type readyLine struct {
	Msg        string `json:"msg"`
	NodeID     string `json:"node_id"`
	APIAddr    string `json:"api_addr"`
	RaftAddr   string `json:"raft_addr"`
	RaftBind   string `json:"raft_bind"`
	GossipAddr string `json:"gossip_addr"`
}

// logWriter copies a process's output to its log file and spots the open
// line (OpenMessage) and the ready line.
type logWriter struct {
	mu     sync.Mutex
	f      *os.File
	buf    []byte
	sent   bool
	bind   string            // raft_bind of the open line, once seen
	onOpen func(bind string) // called with it, under mu
	ready  chan readyLine    // capacity 1; receives the first ready line
}

func newLogWriter(f *os.File, onOpen func(string)) *logWriter {
	return &logWriter{f: f, onOpen: onOpen, ready: make(chan readyLine, 1)}
}

// raftBind is the raft_bind of the open line, "" if none was seen.
func (w *logWriter) raftBind() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bind
}

// maxLine caps how much of an unterminated line logWriter keeps.
const maxLine = 1 << 20

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.f.Write(p) // losing log output must not block or kill the child
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := w.buf[:i]
		w.buf = w.buf[i+1:]
		if b, ok := parseOpen(line); ok && w.bind == "" {
			w.bind = b
			if w.onOpen != nil {
				w.onOpen(b)
			}
			continue
		}
		if r, ok := parseReady(line); ok {
			w.sent = true
			w.buf = nil
			w.ready <- r
			break
		}
	}
	if len(w.buf) > maxLine {
		w.buf = nil
	}
	return len(p), nil
}

// parseOpen returns the raft_bind of line if it is a node's JSON open line.
func parseOpen(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(OpenMessage)) || !bytes.Contains(line, []byte("raft_bind")) {
		return "", false
	}
	var r readyLine
	if err := json.Unmarshal(bytes.TrimSpace(line), &r); err != nil || r.Msg != OpenMessage || r.RaftBind == "" {
		return "", false
	}
	return r.RaftBind, true
}

// parseReady decodes line if it is maosd's JSON ready line.
func parseReady(line []byte) (readyLine, bool) {
	if !bytes.Contains(line, []byte(ReadyMessage)) {
		return readyLine{}, false
	}
	var r readyLine
	if err := json.Unmarshal(bytes.TrimSpace(line), &r); err != nil {
		return readyLine{}, false
	}
	if r.Msg != ReadyMessage || r.APIAddr == "" || r.RaftAddr == "" {
		return readyLine{}, false
	}
	return r, true
}
