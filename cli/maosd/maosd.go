package maosd

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/cli/internal/secretfile"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/watcher"
)

// maxMessageBytesLimit bounds --max-message-bytes.
const maxMessageBytesLimit = 16 << 20

// App builds the maosd command: one maos node.
func App() *cli.App {
	return &cli.App{
		Name:  "maosd",
		Usage: "run one node of a maos mailbox cluster",
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
TOKEN", nodes call each other with the admin token, and agents get their
own tokens from 'maosctl token create'.

With --tls-cert, --tls-key and --tls-ca (all three; one CA signs every
node's certificate, which needs SANs for the addresses peers and clients
dial, e.g. IP:10.0.0.5) the API serves https, nodes present their
certificates to each other, and Raft runs over mutual TLS: a node without a
certificate from that CA can neither join nor reach Raft. Clients verify
the API with maosctl --ca. Gossip is encrypted by --gossip-key, not TLS.

A node restarted from its data dir rejoins its cluster (Raft and gossip) on
its own; --join is only read the first time. Every flag also reads the
environment variable shown.`,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node-id", EnvVars: []string{"MAOS_NODE_ID"}, Value: defaultNodeID(),
				Usage: "unique node id, ^[a-z0-9][a-z0-9._-]{0,63}$ (default: from the hostname)"},
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
				Usage: "how soon an idle leader tells followers the commit index, so their streams deliver (1ms..1s; lower is faster delivery on followers for more idle RPCs)"},
			&cli.DurationFlag{Name: "presence-ttl", EnvVars: []string{"MAOS_PRESENCE_TTL"}, Value: cluster.DefaultPresenceTTL,
				Usage: "an agent with no heartbeat for this long shows OFFLINE (\"heartbeat lapsed\")"},
			&cli.Int64Flag{Name: "max-message-bytes", EnvVars: []string{"MAOS_MAX_MESSAGE_BYTES"}, Value: fsm.DefaultMaxBytes,
				Usage: "largest accepted message body, in bytes"},
			&cli.Float64Flag{Name: "send-rate", EnvVars: []string{"MAOS_SEND_RATE"},
				Usage: "messages (and interrupts) per second one agent may send through this node, a token bucket's refill; " +
					"0 = unlimited. A multi-host cluster with --auth should set it (e.g. 20)"},
			&cli.IntFlag{Name: "send-burst", EnvVars: []string{"MAOS_SEND_BURST"}, DefaultText: "twice --send-rate, at least 1",
				Usage: "sends one idle agent may make at once before --send-rate applies"},
			&cli.IntFlag{Name: "max-recipients", EnvVars: []string{"MAOS_MAX_RECIPIENTS"}, Value: fsm.MaxRecipients,
				Usage: fmt.Sprintf("most entries in a message's \"to\", 1..%d", fsm.MaxRecipients)},
			&cli.IntFlag{Name: "max-streams-per-agent", EnvVars: []string{"MAOS_MAX_STREAMS_PER_AGENT"}, Value: 16,
				Usage: "most event streams (GET /v1/stream) one agent may hold open on this node; 0 = unlimited"},
			&cli.StringFlag{Name: "agents", EnvVars: []string{"MAOS_AGENTS"},
				Usage: "watcher config (YAML, a top-level agents: list): run these agents' watchers against this node once it is ready"},
			&cli.StringFlag{Name: "log-level", EnvVars: []string{"MAOS_LOG_LEVEL"}, Value: "info",
				Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", EnvVars: []string{"MAOS_LOG_FORMAT"}, Value: "text",
				Usage: "text or json"},
			&cli.BoolFlag{Name: "insecure-no-auth", EnvVars: []string{"MAOS_INSECURE_NO_AUTH"},
				Usage: "serve the API on a non-loopback address without --auth (anyone who reaches it can send as any agent and read every inbox); refused otherwise"},
			&cli.StringFlag{Name: "debug-addr", EnvVars: []string{"MAOS_DEBUG_ADDR"},
				Usage: "loopback `IP:PORT` to serve Go's pprof profiles on (/debug/pprof/; block and mutex sampling on); off by default"},
		},
		Action: runMaosd,
	}
}

var invalidIDChars = regexp.MustCompile(`[^a-z0-9._-]+`)

// defaultNodeID derives a valid node id from the hostname.
func defaultNodeID() string {
	h, err := os.Hostname()
	if err != nil {
		return "maos"
	}
	id := strings.Trim(invalidIDChars.ReplaceAllString(strings.ToLower(h), "-"), "-._")
	if len(id) > 64 {
		id = id[:64]
	}
	if !fsm.ValidName(id) {
		return "maos"
	}
	return id
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// advertised returns the address peers should dial for a listener bound at
// bound, refusing a wildcard bind without an explicit advertise address.
func advertised(flag, bound, advertise string) (string, error) {
	if advertise != "" {
		return advertise, nil
	}
	host, _, err := net.SplitHostPort(bound)
	if err != nil {
		return "", fmt.Errorf("--%s %q is not host:port", flag, bound)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", fmt.Errorf("--%s %s binds every interface; also give --%s HOST:PORT that peers can reach",
			flag, bound, strings.Replace(flag, "-addr", "-advertise", 1))
	}
	return bound, nil
}

// gossipFlags checks --gossip-addr, --gossip-advertise, --gossip-key and
// --presence-ttl, naming the flag at fault, and returns the gossip address
// and the decoded key (nil without one). Without --gossip-addr gossip
// listens on the --raft-addr IP, one port up (127.0.0.1:7072 with the
// defaults), so nodes started on one host with distinct Raft ports get
// distinct gossip ports too.
func gossipFlags(c *cli.Context) (string, []byte, error) {
	addr := c.String("gossip-addr")
	if !c.IsSet("gossip-addr") || addr == "" {
		var err error
		if addr, err = defaultGossipAddr(c.String("raft-addr")); err != nil {
			return "", nil, err
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--gossip-addr %q is not IP:port", addr)
	}
	if net.ParseIP(host) == nil {
		return "", nil, fmt.Errorf("--gossip-addr %q: want an IP address, not a host name (memberlist binds an IP)", addr)
	}
	if _, err := advertised("gossip-addr", addr, c.String("gossip-advertise")); err != nil {
		return "", nil, err
	}
	if adv := c.String("gossip-advertise"); adv != "" {
		ahost, aport, err := net.SplitHostPort(adv)
		if err != nil || net.ParseIP(ahost) == nil || aport == "" || aport == "0" {
			return "", nil, fmt.Errorf("--gossip-advertise %q: want the IP:port peers reach gossip on", adv)
		}
	}
	if n := c.Uint64("snapshot-threshold"); n < 1024 {
		return "", nil, fmt.Errorf("--snapshot-threshold %d: want at least 1024 entries", n)
	}
	if d := c.Duration("raft-commit-timeout"); d < time.Millisecond || d > time.Second {
		return "", nil, fmt.Errorf("--raft-commit-timeout %s: want 1ms..1s", d)
	}
	if c.Duration("presence-ttl") <= 0 {
		return "", nil, fmt.Errorf("--presence-ttl must be positive, not %s", c.Duration("presence-ttl"))
	}
	raw, from := strings.TrimSpace(c.String("gossip-key")), "--gossip-key (or $MAOS_GOSSIP_KEY)"
	if file := strings.TrimSpace(c.String("gossip-key-file")); file != "" {
		if raw != "" {
			return "", nil, errors.New("--gossip-key and --gossip-key-file both given; give one")
		}
		var err error
		if raw, _, err = secretfile.Read(file); err != nil {
			return "", nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
		from = "--gossip-key-file " + file
	}
	if raw == "" {
		return addr, nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return "", nil, fmt.Errorf("%s is not base64: %v", from, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return addr, key, nil
	}
	return "", nil, fmt.Errorf("%s decodes to %d bytes; want 16, 24 or 32 (openssl rand -base64 32)", from, len(key))
}

// defaultGossipAddr is the --raft-addr IP with the next port (port 0 stays
// 0: a free one).
func defaultGossipAddr(raftAddr string) (string, error) {
	host, port, err := net.SplitHostPort(raftAddr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p < 0 || p >= 65535 {
		return "", fmt.Errorf("--gossip-addr: cannot derive it from --raft-addr %q; give --gossip-addr IP:PORT", raftAddr)
	}
	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("--gossip-addr: --raft-addr %q has no IP to listen on for gossip; give --gossip-addr IP:PORT", raftAddr)
	}
	if p > 0 {
		p++
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

func runMaosd(c *cli.Context) error {
	logger, err := newLogger(c.App.ErrWriter, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	if !fsm.ValidName(c.String("node-id")) {
		return cli.Exit(fmt.Sprintf("maosd: --node-id %q must match ^[a-z0-9][a-z0-9._-]{0,63}$", c.String("node-id")), 2)
	}
	if n := c.Int64("max-message-bytes"); n <= 0 || n > maxMessageBytesLimit {
		return cli.Exit(fmt.Sprintf("maosd: --max-message-bytes %d: want 1..%d (16 MiB): every message is a raft entry that every node writes and sends", n, maxMessageBytesLimit), 2)
	}
	limits, err := limitFlags(c)
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	if _, err := advertised("raft-addr", c.String("raft-addr"), c.String("raft-advertise")); err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	// A bad watcher config fails before anything is opened.
	var agents *watcher.File
	if name := c.String("agents"); name != "" {
		if agents, err = watcher.LoadFile(name); err != nil {
			return cli.Exit("maosd: --agents: "+err.Error(), 2)
		}
	}
	gossipAddr, gossipKey, err := gossipFlags(c)
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	adminToken, err := authFlags(c, logger)
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	serverTLS, clientTLS, err := tlsFlags(c)
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	ln, err := net.Listen("tcp", c.String("http-addr"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("maosd: --http-addr: %v", err), 1)
	}
	defer ln.Close()
	if a := c.String("debug-addr"); a != "" {
		dln, err := serveDebug(a, logger)
		if err != nil {
			return cli.Exit("maosd: "+err.Error(), 2)
		}
		defer dln.Close()
	}
	apiAddr, err := advertised("http-addr", ln.Addr().String(), c.String("http-advertise"))
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}
	if err := checkOpenAPI(ln.Addr(), adminToken != "", c.Bool("insecure-no-auth")); err != nil {
		return cli.Exit("maosd: "+err.Error(), 2)
	}

	node, err := cluster.Open(cluster.Config{
		NodeID:        c.String("node-id"),
		DataDir:       c.String("data-dir"),
		RaftAddr:      c.String("raft-addr"),
		RaftAdvertise: c.String("raft-advertise"),
		APIAddr:       apiAddr,
		AdminToken:    adminToken,
		ServerTLS:     serverTLS,
		ClientTLS:     clientTLS,
		Logger:        logger,

		GossipAddr:        gossipAddr,
		GossipAdvertise:   c.String("gossip-advertise"),
		GossipKey:         gossipKey,
		PresenceTTL:       c.Duration("presence-ttl"),
		CommitTimeout:     c.Duration("raft-commit-timeout"),
		SnapshotThreshold: c.Uint64("snapshot-threshold"),
	})
	if err != nil {
		return cli.Exit("maosd: "+err.Error(), 1)
	}
	if err := checkAuthRequired(node, adminToken); err != nil {
		_ = node.Close()
		return cli.Exit("maosd: "+err.Error(), 1)
	}
	if len(gossipKey) == 0 && serverTLS != nil {
		logger.Warn("TLS secures the API and Raft, but gossip is not encrypted: anyone who can reach --gossip-addr can read agent presence and join the gossip; "+
			"give every node the same --gossip-key (openssl rand -base64 32)", "gossip_addr", node.GossipAddr())
	} else if len(gossipKey) == 0 {
		logger.Warn("gossip is not encrypted: anyone who can reach --gossip-addr can read agent presence and join the gossip; "+
			"give every node the same --gossip-key (openssl rand -base64 32)", "gossip_addr", node.GossipAddr())
	}
	closeNode := func() {
		if err := node.Close(); err != nil {
			logger.Error("close", "error", err)
		}
	}

	srvOpts := transport.ServerOptions{MaxMessageBytes: c.Int64("max-message-bytes"), Logger: logger, Limits: limits,
		PeerClient: node.PeerClient}
	if agents != nil {
		srvOpts.Interrupt = agents.Interrupt
	}
	if adminToken != "" {
		srvOpts.Auth = &transport.AuthConfig{AdminToken: adminToken}
	}
	srv := &http.Server{
		Handler:           transport.NewServer(node, srvOpts),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	apiLn := ln
	if serverTLS != nil {
		apiLn = tls.NewListener(ln, serverTLS)
	}
	go func() { serveErr <- srv.Serve(apiLn) }()

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	join := c.StringSlice("join")
	switch {
	case node.HasState():
		if len(join) > 0 {
			logger.Info("data dir holds cluster state; rejoining on our own and ignoring --join", "join", join)
		}
	case len(join) == 0:
		if err := node.Bootstrap(); err != nil {
			closeNode()
			return cli.Exit("maosd: "+err.Error(), 1)
		}
	default:
		if err := node.JoinVia(ctx, join); err != nil {
			_ = srv.Close()
			closeNode()
			return cli.Exit("maosd: "+err.Error(), 1)
		}
	}
	logger.Info("maosd ready to serve", "node_id", node.ID(), "api_addr", apiAddr,
		"send_rate", limits.SendRate, "send_burst", limits.SendBurst, "max_recipients", limits.MaxRecipients,
		"max_streams_per_agent", limits.MaxStreamsPerAgent,
		"raft_addr", node.RaftAddr(), "gossip_addr", node.GossipAddr(), "data_dir", c.String("data-dir"), "auth", adminToken != "")

	// Watchers run against this node's own API and stop before it closes,
	// so they can set their agents OFFLINE.
	watchCtx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	watchersDone := make(chan struct{})
	if agents != nil {
		go func() {
			defer close(watchersDone)
			// One client speaks for several agents: with auth it needs the
			// admin token.
			cl := apiClient(apiAddr, clientTLS)
			if adminToken != "" {
				cl = cl.WithToken(adminToken)
			}
			_ = watcher.Run(watchCtx, agents, watcher.Options{Client: cl, Logger: logger})
		}()
		logger.Info("watchers started", "agents", len(agents.Agents), "file", c.String("agents"))
	} else {
		close(watchersDone)
	}

	select {
	case <-ctx.Done():
		logger.Info("signal received; shutting down")
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server failed", "error", err)
		}
	}
	stopWatchers()
	<-watchersDone
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	closeNode()
	return nil
}

// limitFlags reads the abuse limits: --send-rate (≥ 0, 0 unlimited),
// --send-burst (≥ 0, 0 twice the rate, at least 1; only with a rate),
// --max-recipients (1..fsm.MaxRecipients), --max-streams-per-agent (≥ 0,
// 0 unlimited). The error names the flag.
func limitFlags(c *cli.Context) (transport.Limits, error) {
	l := transport.Limits{
		SendRate:           c.Float64("send-rate"),
		SendBurst:          c.Int("send-burst"),
		MaxRecipients:      c.Int("max-recipients"),
		MaxStreamsPerAgent: c.Int("max-streams-per-agent"),
	}
	switch {
	case math.IsNaN(l.SendRate) || math.IsInf(l.SendRate, 0) || l.SendRate < 0:
		return l, fmt.Errorf("--send-rate %v: want sends per second per agent, ≥ 0 (0: unlimited)", l.SendRate)
	case l.SendBurst < 0:
		return l, fmt.Errorf("--send-burst %d: want ≥ 0 (0: twice --send-rate, at least 1)", l.SendBurst)
	case l.SendBurst > 0 && l.SendRate == 0:
		return l, fmt.Errorf("--send-burst %d has no effect without --send-rate", l.SendBurst)
	case l.MaxRecipients < 1 || l.MaxRecipients > fsm.MaxRecipients:
		return l, fmt.Errorf("--max-recipients %d: want 1..%d", l.MaxRecipients, fsm.MaxRecipients)
	case l.MaxStreamsPerAgent < 0:
		return l, fmt.Errorf("--max-streams-per-agent %d: want ≥ 0 (0: unlimited)", l.MaxStreamsPerAgent)
	}
	if l.SendRate > 0 && l.SendBurst == 0 {
		l.SendBurst = transport.DefaultSendBurst(l.SendRate)
	}
	return l, nil
}
