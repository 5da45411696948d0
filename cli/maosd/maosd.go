package maosd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/a2arelay"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/internal/version"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/console"
	"github.com/maos-project/maos/secrets"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/watcher"
)

// App builds the maosd command: one maos node.
func App() *cli.App {
	return &cli.App{
		Name:    "maosd",
		Usage:   "run one node of a maos mailbox cluster",
		Version: version.String(),
		Description: `maosd replicates the maos message log through Raft and serves the HTTP API.

Run with no flags it is a working single-node cluster on 127.0.0.1:7070
with its data in ./maos-data. A three-node cluster on one host:

   maosd --node-id n1 --data-dir d1 --http-addr 127.0.0.1:7070 --raft-addr 127.0.0.1:7071
   maosd --node-id n2 --data-dir d2 --http-addr 127.0.0.1:7080 --raft-addr 127.0.0.1:7081 --join 127.0.0.1:7070
   maosd --node-id n3 --data-dir d3 --http-addr 127.0.0.1:7090 --raft-addr 127.0.0.1:7091 --join 127.0.0.1:7070

Nodes gossip membership and agent presence over memberlist on
--gossip-addr (UDP and TCP), by default the --raft-addr IP with the next
port (7072, 7082 and 7092 above). Encrypt it with the same --gossip-key on
every node: a key is 16, 24 or 32 random bytes in base64 (openssl rand
-base64 32). A node whose key does not match the cluster's cannot join, and
says why.

Without --auth anyone who can reach the API can send as any agent and read
every inbox: that is only for a single-node local setup, and maosd warns
about it at start. Give every node of a multi-host cluster --auth and the
SAME --admin-token-file (one line, openssl rand -base64 32 > admin.token;
chmod 600 admin.token): every request then needs "Authorization: Bearer
TOKEN", nodes call each other with a node credential derived from it (never the
token itself, and only at the addresses the Raft log registers), and
agents get their own tokens from 'maosctl token create'. With --auth,
gossip beyond loopback needs --gossip-key (or --insecure-gossip).

With --tls-cert, --tls-key and --tls-ca (all three; one CA signs every
node's certificate, which needs SANs for the addresses peers and clients
dial, e.g. IP:10.0.0.5) the API serves https, nodes present their
certificates to each other, and Raft runs over mutual TLS: a node without a
certificate from that CA can neither join nor reach Raft. Clients verify
the API with maosctl --ca. Gossip is encrypted by --gossip-key, not TLS.

A node restarted from its data dir rejoins its cluster (Raft and gossip) on
its own; --join is only read the first time. Every flag also reads the
environment variable shown.

maosd runs Go's garbage collector at GOGC=200 (less CPU per send for a
heap up to three times its live size) unless the environment sets GOGC,
which then wins (docs/OPERATIONS.md).`,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node-id", EnvVars: []string{"MAOS_NODE_ID"}, Value: defaultNodeID(),
				Usage: "unique node id, " + api.NamePattern, DefaultText: "from the hostname"},
			&cli.StringFlag{Name: "data-dir", EnvVars: []string{"MAOS_DATA_DIR"}, Value: "./maos-data",
				Usage: "directory for the Raft log, snapshots and state"},
			&cli.StringFlag{Name: "http-addr", EnvVars: []string{"MAOS_HTTP_ADDR"}, Value: "127.0.0.1:7070",
				Usage: "host:port the HTTP API listens on"},
			&cli.StringFlag{Name: "http-advertise", EnvVars: []string{"MAOS_HTTP_ADVERTISE"},
				Usage: "host:port peers and clients reach the API on (default: --http-addr)"},
			&cli.StringFlag{Name: "raft-addr", EnvVars: []string{"MAOS_RAFT_ADDR"}, Value: "127.0.0.1:7071",
				Usage: "host:port the Raft transport listens on"},
			&cli.StringFlag{Name: "raft-advertise", EnvVars: []string{"MAOS_RAFT_ADVERTISE"},
				Usage: "host:port peers reach Raft on (default: --raft-addr)"},
			&cli.StringSliceFlag{Name: "join", EnvVars: []string{"MAOS_JOIN"},
				Usage: "API (or gossip) host:port of any member to join through (repeat or comma-separate); first start only"},
			&cli.BoolFlag{Name: "replace", EnvVars: []string{"MAOS_REPLACE"},
				Usage: "with --join: take the place of the voter that has this --node-id (or --raft-addr), a dead node rebuilt with a new data dir; refused while that voter still answers. Without it such a join is refused"},
			&cli.StringFlag{Name: "gossip-addr", EnvVars: []string{"MAOS_GOSSIP_ADDR"},
				DefaultText: "the --raft-addr IP and the next port: 127.0.0.1:7072",
				Usage:       "IP:port memberlist gossip listens on, UDP and TCP (port 0 picks a free one)"},
			&cli.StringFlag{Name: "gossip-advertise", EnvVars: []string{"MAOS_GOSSIP_ADVERTISE"},
				Usage: "IP:port peers reach gossip on (default: --gossip-addr)"},
			&cli.StringFlag{Name: "gossip-key", EnvVars: []string{"MAOS_GOSSIP_KEY"},
				Usage: "base64 key of 16, 24 or 32 bytes encrypting gossip, the same on every node (default: none, gossip in the clear); a flag shows in the process list, so prefer --gossip-key-file"},
			&cli.StringFlag{Name: "gossip-key-file", EnvVars: []string{"MAOS_GOSSIP_KEY_FILE"},
				Usage: "`FILE` holding the --gossip-key on one line (mode 0600; openssl rand -base64 32 > gossip.key)"},
			&cli.BoolFlag{Name: "auth", EnvVars: []string{"MAOS_AUTH"},
				Usage: "require a bearer token on every API request (needs --admin-token-file); use it on every multi-host cluster"},
			&cli.StringFlag{Name: "admin-token-file", EnvVars: []string{"MAOS_ADMIN_TOKEN_FILE"},
				Usage: "`FILE` holding the admin bootstrap token on one line, chmod 600; required with --auth, the same file on every node"},
			&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"MAOS_TLS_CERT"},
				Usage: "this node's certificate `FILE` (PEM), signed by --tls-ca, with SANs for its API and Raft addresses; with --tls-key and --tls-ca: https API, mutual TLS between nodes"},
			&cli.StringFlag{Name: "tls-key", EnvVars: []string{"MAOS_TLS_KEY"},
				Usage: "the private key `FILE` of --tls-cert (PEM)"},
			&cli.StringFlag{Name: "tls-ca", EnvVars: []string{"MAOS_TLS_CA"},
				Usage: "`FILE` of the CA certificate(s) that sign every node's certificate (PEM)"},
			&cli.Uint64Flag{Name: "snapshot-threshold", EnvVars: []string{"MAOS_SNAPSHOT_THRESHOLD"}, Value: cluster.DefaultSnapshotThreshold,
				Usage: "log entries since the last snapshot that make a new one (a snapshot copies the whole state file; higher writes less, keeps a longer raft log)"},
			&cli.DurationFlag{Name: "raft-commit-timeout", EnvVars: []string{"MAOS_RAFT_COMMIT_TIMEOUT"}, Value: cluster.DefaultCommitTimeout,
				Usage: "how soon an idle leader tells followers the commit index, so their streams deliver (1ms..1s); each tick is an RPC per follower even at rest. From 50ms the leader pushes the index after each write instead (a no-op entry): under 1% of a core at rest, slower single writes (docs/PERFORMANCE.md)"},
			&cli.DurationFlag{Name: "presence-ttl", EnvVars: []string{"MAOS_PRESENCE_TTL"}, Value: cluster.DefaultPresenceTTL,
				Usage: "an agent with no heartbeat for this long shows OFFLINE (\"heartbeat lapsed\")"},
			&cli.Int64Flag{Name: "max-message-bytes", EnvVars: []string{"MAOS_MAX_MESSAGE_BYTES"}, Value: api.DefaultMaxBytes,
				Usage: "largest accepted message body, in bytes"},
			&cli.Float64Flag{Name: "send-rate", EnvVars: []string{"MAOS_SEND_RATE"},
				Usage: "messages (and interrupts) per second one agent may send through this node, a token bucket's refill; " +
					"0 = unlimited. A multi-host cluster with --auth should set it (e.g. 20)"},
			&cli.IntFlag{Name: "send-burst", EnvVars: []string{"MAOS_SEND_BURST"}, DefaultText: "twice --send-rate, at least 1",
				Usage: "sends one idle agent may make at once before --send-rate applies"},
			&cli.IntFlag{Name: "max-recipients", EnvVars: []string{"MAOS_MAX_RECIPIENTS"}, Value: api.MaxRecipients,
				Usage: fmt.Sprintf("most entries in a message's \"to\", 1..%d (0: %d)", api.MaxRecipients, api.MaxRecipients)},
			&cli.IntFlag{Name: "max-streams-per-agent", EnvVars: []string{"MAOS_MAX_STREAMS_PER_AGENT"}, Value: 16,
				Usage: "most event streams (GET /v1/stream) one agent may hold open on this node; 0 = unlimited"},
			&cli.Int64Flag{Name: "max-artifact-bytes", EnvVars: []string{"MAOS_MAX_ARTIFACT_BYTES"}, Value: transport.DefaultMaxArtifactBytes,
				Usage: fmt.Sprintf("largest accepted artifact (PUT /v1/artifacts), in bytes, 1..%d (16 GiB); every voter stores each artifact, beside the raft log", transport.MaxArtifactBytesCeiling)},
			&cli.IntFlag{Name: "max-conns-per-client", EnvVars: []string{"MAOS_MAX_CONNS_PER_CLIENT"}, Value: 256,
				Usage: "most API connections one client IP holds open at once (streams included); more are closed as they are accepted. 0 = unlimited. The node's own watchers, relays and push deliverer use <data-dir>/api.sock and are not counted"},
			&cli.DurationFlag{Name: "http-idle-timeout", EnvVars: []string{"MAOS_HTTP_IDLE_TIMEOUT"}, Value: 2 * time.Minute,
				Usage: "an idle keep-alive API connection is closed after this long"},
			&cli.DurationFlag{Name: "http-body-timeout", EnvVars: []string{"MAOS_HTTP_BODY_TIMEOUT"}, Value: transport.DefaultBodyStallTimeout,
				Usage: "a request whose body sends no byte for this long is ended and its connection closed (a body that keeps arriving is never cut)"},
			&cli.StringFlag{Name: "agents", EnvVars: []string{"MAOS_AGENTS"},
				Usage: "watcher config (YAML, a top-level agents: list): run these agents' watchers against this node once it is ready"},
			&cli.BoolFlag{Name: "a2a-relay", EnvVars: []string{"MAOS_A2A_RELAY"}, Value: true,
				Usage: "relay the tasks and messages of the agents registered with --a2a (maosctl agents register ID --a2a URL) to their remote A2A agents; " +
					"every node runs the relays and each agent's lease makes one of them relay it. --a2a-relay=false: this node never relays"},
			&cli.StringFlag{Name: "log-level", EnvVars: []string{"MAOS_LOG_LEVEL"}, Value: "info",
				Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", EnvVars: []string{"MAOS_LOG_FORMAT"}, Value: "text",
				Usage: "text or json"},
			&cli.BoolFlag{Name: "insecure-no-auth", EnvVars: []string{"MAOS_INSECURE_NO_AUTH"},
				Usage: "serve the API on a non-loopback address without --auth (anyone who reaches it can send as any agent and read every inbox); refused otherwise"},
			&cli.BoolFlag{Name: "insecure-gossip", EnvVars: []string{"MAOS_INSECURE_GOSSIP"},
				Usage: "with --auth, run gossip on a non-loopback --gossip-addr without --gossip-key (anyone who reaches it can join the gossip and claim agents' presence); refused otherwise"},
			&cli.StringFlag{Name: "metrics-addr", EnvVars: []string{"MAOS_METRICS_ADDR"},
				Usage: "`HOST:PORT` to serve Prometheus metrics on (GET /metrics) WITHOUT auth, beside the API's admin-only GET /metrics; bind it to loopback or a private network (docs/OPERATIONS.md); off by default"},
			&cli.StringFlag{Name: "debug-addr", EnvVars: []string{"MAOS_DEBUG_ADDR"},
				Usage: "loopback `IP:PORT` to serve Go's pprof profiles on (/debug/pprof/; block and mutex sampling on); off by default"},
			pushAllowFlag, // push.go
		},
		Action: run,
	}
}

// run is maosd in the steps of a node's life: read the flags into a
// config, create the node (listen, validate, open), start serving, join
// the cluster, start the watchers, wait for a signal, shut down.
func run(c *cli.Context) error {
	cfg, err := readConfig(c)
	if err != nil {
		return refused(err)
	}
	gcDefault()
	d, err := create(cfg)
	if err != nil {
		return err
	}
	d.start()
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.join(ctx); err != nil {
		d.close()
		return failed(err)
	}
	d.logReady()
	d.startWatchers(ctx)
	d.startPush(ctx)
	d.wait(ctx)
	d.shutdown()
	return nil
}

// warmSecrets is secrets.Warm; a test replaces it.
var warmSecrets = secrets.Warm

// refused is the exit of a command line maosd refuses: status 2.
func refused(err error) error { return cli.Exit("maosd: "+err.Error(), 2) }

// failed is the exit of a node that could not start: status 1.
func failed(err error) error { return cli.Exit("maosd: "+err.Error(), 1) }

// daemon is one running maosd: the API listener, the node and the HTTP
// server in front of it, and the watchers of --agents.
type daemon struct {
	cfg     *config
	logger  *slog.Logger
	apiLn   net.Listener
	sockLn  net.Listener // <data dir>/api.sock (socket.go); nil if it cannot be served
	debugLn net.Listener // nil without --debug-addr
	// metricsLn and metricsSrv serve --metrics-addr; nil without it.
	metricsLn  net.Listener
	metricsSrv *http.Server
	node       *cluster.Node
	srv        *http.Server
	served     chan error // what srv.Serve returned

	stopWatchers context.CancelFunc
	watchersDone chan struct{}
	stopPush     context.CancelFunc // nil without --a2a-push-allow (push.go)
}

// create binds the API, completes the node's config with the address it
// is reached on (--http-advertise, else the bound address), validates
// it, refuses an API open beyond loopback without auth, binds
// --debug-addr and opens the node. Its error is the cli.Exit to return:
// status 2 for a flag at fault, 1 for a node that cannot start.
func create(cfg *config) (*daemon, error) {
	d := &daemon{cfg: cfg, logger: cfg.node.Logger}
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	var err error
	if d.apiLn, err = net.Listen("tcp", cfg.httpAddr); err != nil {
		return nil, failed(fmt.Errorf("--http-addr: %w", err))
	}
	cfg.node.APIAddr = cfg.httpAdvertise
	if cfg.node.APIAddr == "" {
		cfg.node.APIAddr = d.apiLn.Addr().String()
	}
	if err := cfg.validate(); err != nil {
		return nil, refused(err)
	}
	if err := checkOpenAPI(d.apiLn.Addr(), cfg.node.AdminToken != "", cfg.insecureNoAuth); err != nil {
		return nil, refused(err)
	}
	if err := checkGossipKey(cfg.node.GossipAddr, cfg.node.AdminToken != "", len(cfg.node.GossipKey) > 0, cfg.insecureGossip); err != nil {
		return nil, refused(err)
	}
	if cfg.debugAddr != "" {
		if d.debugLn, err = serveDebug(cfg.debugAddr, d.logger); err != nil {
			return nil, refused(err)
		}
	}
	if cfg.metricsAddr != "" {
		if d.metricsLn, err = listenMetrics(cfg.metricsAddr); err != nil {
			return nil, failed(err)
		}
	}
	// The secret detector compiles its rules once per process: now, so the
	// first send does not pay for it. A node that cannot load them would
	// refuse every send under the default secret_guard.
	if err := warmSecrets(); err != nil {
		return nil, failed(fmt.Errorf("secret detection: %w", err))
	}
	if d.node, err = cluster.Open(cfg.node); err != nil {
		return nil, failed(err)
	}
	if err := checkAuthRequired(d.node, cfg.node.AdminToken); err != nil {
		return nil, failed(err)
	}
	d.warnGossip()
	d.sockLn = d.listenAPISocket() // after Open: the data dir is locked, a socket there is stale
	if d.metricsLn != nil {
		d.metricsSrv = d.serveMetrics(d.metricsLn, d.node.Metrics())
	}

	d.srv = &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Bounded connections (conns.go): idle keep-alives close, a
		// stalled body ends its request (BodyStallTimeout), and
		// start caps the connections of one client.
		IdleTimeout: cfg.conns.idleTimeout,
		ErrorLog:    slog.NewLogLogger(d.logger.Handler(), slog.LevelWarn),
	}
	ok = true
	return d, nil
}

// handler is the node's HTTP handler: the API, the web console at /ui/ in
// front of it (console.Mount: its assets hold no data, its pages read
// through the API's auth) and, in front of both, every agent as an A2A
// agent at /a2a/agents/ (a2ahost.Mount: a client of the same API with the
// caller's token).
func (d *daemon) handler() http.Handler {
	cfg := d.cfg
	// The node is the API's blob store too: artifacts' bytes on a
	// majority of voters, beside the log (cluster/blobs.go). Its metrics
	// count the API's sends and streams and are served on GET /metrics.
	opts := transport.ServerOptions{MaxMessageBytes: cfg.maxMessageBytes, Logger: d.logger, Limits: cfg.limits,
		BodyStallTimeout: cfg.conns.bodyTimeout, PushAllow: cfg.pushAllow,
		PeerClient: d.node.PeerClient, Blobs: d.node, Metrics: d.node.Metrics()}
	if cfg.agents != nil {
		opts.Interrupt = cfg.agents.Interrupt
	}
	if cfg.node.AdminToken != "" {
		opts.Auth = &transport.AuthConfig{AdminToken: cfg.node.AdminToken}
	}
	apiServer := transport.NewServer(d.node, opts)
	return a2ahost.Mount(apiServer,
		console.Mount(apiServer, console.Options{ClientTLS: cfg.node.ClientTLS}),
		a2ahost.Options{Version: version.Get().Version, PushAllow: cfg.pushAllow})
}

// warnGossip warns that gossip runs in the clear without --gossip-key.
func (d *daemon) warnGossip() {
	if len(d.cfg.node.GossipKey) > 0 {
		return
	}
	if d.cfg.node.ServerTLS != nil {
		d.logger.Warn("TLS secures the API and Raft, but gossip is not encrypted: anyone who can reach --gossip-addr can read agent presence and join the gossip; "+
			"give every node the same --gossip-key (openssl rand -base64 32)", "gossip_addr", d.node.GossipAddr())
		return
	}
	d.logger.Warn("gossip is not encrypted: anyone who can reach --gossip-addr can read agent presence and join the gossip; "+
		"give every node the same --gossip-key (openssl rand -base64 32)", "gossip_addr", d.node.GossipAddr())
}

// start serves the API in the background, https with TLS, and plain on
// the data dir's socket, which --max-conns-per-client does not bound: its
// clients are the node's own (localClient).
func (d *daemon) start() {
	ln := limitPerClient(d.apiLn, d.cfg.conns.maxPerClient, d.logger)
	if d.cfg.node.ServerTLS != nil {
		ln = tls.NewListener(ln, d.cfg.node.ServerTLS)
	}
	d.served = make(chan error, 1)
	go func() { d.served <- d.srv.Serve(ln) }()
	if d.sockLn != nil {
		go func() {
			if err := d.srv.Serve(d.sockLn); !errors.Is(err, http.ErrServerClosed) {
				d.logger.Error("serving the API on the data dir's socket stopped", "error", err)
			}
		}()
	}
}

// join makes the node a member: from its data dir it rejoins on its own;
// without --join it bootstraps a new cluster; else it joins through a
// member of --join.
func (d *daemon) join(ctx context.Context) error {
	switch {
	case d.node.HasState():
		if len(d.cfg.join) > 0 {
			// A data dir of another cluster must not start quietly.
			if err := d.node.CheckJoinTargets(ctx, d.cfg.join); err != nil {
				return err
			}
			d.logger.Warn("--join is ignored: the data dir holds cluster state, so the node rejoins its own cluster from it (--join is read on a first start only)",
				"join", d.cfg.join, "data_dir", d.cfg.node.DataDir)
		}
		return nil
	case len(d.cfg.join) == 0:
		return d.node.Bootstrap()
	}
	return d.node.JoinVia(ctx, d.cfg.join)
}

// logReady says the node serves, with its addresses and settings: the
// API socket its own clients use ("" when they use TCP: socket.go) and
// whether it runs the A2A relays.
func (d *daemon) logReady() {
	l := d.cfg.limits
	sock := ""
	if d.sockLn != nil {
		sock = d.sockLn.Addr().String()
	}
	d.logger.Info("maosd ready to serve", "node_id", d.node.ID(), "api_addr", d.cfg.node.APIAddr, "api_socket", sock,
		"send_rate", l.SendRate, "send_burst", l.SendBurst, "max_recipients", l.MaxRecipients,
		"max_streams_per_agent", l.MaxStreamsPerAgent, "max_artifact_bytes", l.MaxArtifactBytes,
		"raft_addr", d.node.RaftAddr(), "gossip_addr", d.node.GossipAddr(), "data_dir", d.cfg.node.DataDir,
		"auth", d.cfg.node.AdminToken != "", "a2a_relay", d.cfg.a2aRelay)
}

// startWatchers runs the watchers of --agents and, unless
// --a2a-relay=false, the A2A relays (a2arelay.Supervisor) against this
// node's own API until ctx ends or shutdown stops them.
func (d *daemon) startWatchers(ctx context.Context) {
	ctx, d.stopWatchers = context.WithCancel(ctx)
	d.watchersDone = make(chan struct{})
	// One client speaks for several agents: with auth it needs the admin
	// token. The agents' CLIs get the TCP address: the socket is the node's.
	cl := d.localClient()
	// The node's id names this node in the agents' leases (an agent
	// configured on several nodes is served by one, the others stand
	// by). The instance is the same on every start: one maosd runs per
	// node (its data dir is locked), so a restarted node takes its own
	// live leases back at once instead of standing by for their ttl.
	// Runs count in the node's metrics.
	opts := watcher.Options{Client: cl, Addr: apiClient(d.cfg.node.APIAddr, d.cfg.node.ClientTLS).Addr(), Logger: d.logger, Metrics: d.node.Metrics(), Node: d.cfg.node.NodeID, Instance: "maosd",
		Dir: filepath.Join(d.cfg.node.DataDir, "watcher")} // agents' shared-context folders: <data dir>/watcher/<agent>/context
	var wg sync.WaitGroup
	if d.cfg.agents != nil {
		wg.Go(func() {
			if err := watcher.Run(ctx, d.cfg.agents, opts); err != nil {
				d.logger.Error("watchers stopped", "err", err)
			}
		})
		d.logger.Info("watchers started", "agents", len(d.cfg.agents.Agents), "file", d.cfg.agentsFile)
	}
	if d.cfg.a2aRelay {
		// Every node relays the registry's A2A agents; each agent's lease
		// makes one of them relay it.
		sup := &a2arelay.Supervisor{Client: cl, Watcher: opts, Logger: d.logger, Dir: filepath.Join(d.cfg.node.DataDir, "a2arelay")}
		wg.Go(func() { sup.Run(ctx) })
	}
	go func() {
		wg.Wait()
		close(d.watchersDone)
	}()
}

// wait returns on a signal (ctx's end) or when the API server stops.
func (d *daemon) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
		d.logger.Info("signal received; shutting down")
	case err := <-d.served:
		if !errors.Is(err, http.ErrServerClosed) {
			d.logger.Error("http server failed", "error", err)
		}
	}
}

// shutdown stops the watchers first, so they can set their agents OFFLINE
// through the API, then the API (5 s for requests in flight), then the
// node.
func (d *daemon) shutdown() {
	if d.stopPush != nil {
		d.stopPush()
	}
	d.stopWatchers()
	<-d.watchersDone
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
	d.close()
}

// close releases whatever create and start took; safe on a daemon
// create gave up on half way.
func (d *daemon) close() {
	if d.srv != nil {
		_ = d.srv.Close()
	}
	if d.node != nil {
		if err := d.node.Close(); err != nil {
			d.logger.Error("close", "error", err)
		}
	}
	if d.debugLn != nil {
		_ = d.debugLn.Close()
	}
	if d.metricsSrv != nil {
		_ = d.metricsSrv.Close()
	} else if d.metricsLn != nil {
		_ = d.metricsLn.Close()
	}
	if d.apiLn != nil {
		_ = d.apiLn.Close()
	}
	if d.sockLn != nil {
		_ = d.sockLn.Close() // removes the socket file
	}
}
