package maosd

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/internal/secretfile"
	"github.com/maos-project/maos/cli/internal/version"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/hostport"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/watcher"
)

// maxMessageBytesLimit bounds --max-message-bytes.
const maxMessageBytesLimit = 16 << 20

// config is maosd's command line: the node's cluster.Config and what runs
// around the node. readConfig fills it from the flags, refusing what only
// maosd knows about; validate checks the node's part with
// cluster.Config.Validate once the API listens.
type config struct {
	// node is complete but for APIAddr, which create sets once the API
	// listens: a port-0 --http-addr gets its port then.
	node cluster.Config

	httpAddr, httpAdvertise string   // --http-addr, --http-advertise
	debugAddr               string   // "" serves no profiles
	metricsAddr             string   // "" serves metrics on the API only
	join                    []string // API or gossip addresses; first start only
	agentsFile              string
	agents                  *watcher.File // nil without --agents
	a2aRelay                bool          // --a2a-relay
	maxMessageBytes         int64
	limits                  transport.Limits
	insecureNoAuth          bool
	insecureGossip          bool // --insecure-gossip
	conns                   connLimits
	pushAllow               []string // --a2a-push-allow (push.go)

	// Where the gossip key and the admin token came from, for errors.
	gossipKeyFrom, adminTokenFile string
}

// readConfig reads the flags into a config. It refuses, naming the flag,
// what is the command line's own business: log settings, limits, the
// watcher file, the secret and TLS files, --debug-addr, and a 0 where
// cluster.Config would read 0 as "the default". The node's settings are
// checked by validate.
func readConfig(c *cli.Context) (*config, error) {
	logger, err := newLogger(c.App.ErrWriter, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return nil, err
	}
	cfg := &config{
		node: cluster.Config{
			NodeID:            c.String("node-id"),
			DataDir:           c.String("data-dir"),
			RaftAddr:          c.String("raft-addr"),
			RaftAdvertise:     c.String("raft-advertise"),
			GossipAdvertise:   c.String("gossip-advertise"),
			PresenceTTL:       c.Duration("presence-ttl"),
			CommitTimeout:     c.Duration("raft-commit-timeout"),
			SnapshotThreshold: c.Uint64("snapshot-threshold"),
			Replace:           c.Bool("replace"),
			Version:           version.Get().Version,
			Logger:            logger,
		},
		httpAddr:        c.String("http-addr"),
		httpAdvertise:   c.String("http-advertise"),
		debugAddr:       c.String("debug-addr"),
		metricsAddr:     c.String("metrics-addr"),
		join:            c.StringSlice("join"),
		agentsFile:      c.String("agents"),
		a2aRelay:        c.Bool("a2a-relay"),
		maxMessageBytes: c.Int64("max-message-bytes"),
		insecureNoAuth:  c.Bool("insecure-no-auth"),
		insecureGossip:  c.Bool("insecure-gossip"),
		adminTokenFile:  strings.TrimSpace(c.String("admin-token-file")),
	}
	if n := cfg.maxMessageBytes; n <= 0 || n > maxMessageBytesLimit {
		return nil, fmt.Errorf("--max-message-bytes %d: want 1..%d (16 MiB): every message is a raft entry that every node writes and sends", n, maxMessageBytesLimit)
	}
	if cfg.limits, err = limitFlags(c); err != nil {
		return nil, err
	}
	if cfg.conns, err = connFlags(c); err != nil {
		return nil, err
	}
	if err := refuseZeros(&cfg.node); err != nil {
		return nil, err
	}
	// A test hook, not a setting: the chaos suite's power-loss nemesis
	// restarts nodes as if the machine had rebooted (cluster.Config.BootID).
	if boot := os.Getenv(testBootIDEnv); boot != "" {
		cfg.node.BootID = func() (string, error) { return boot, nil }
	}
	// A bad watcher config fails before anything is opened.
	if cfg.agentsFile != "" {
		if cfg.agents, err = watcher.LoadFile(cfg.agentsFile); err != nil {
			return nil, fmt.Errorf("--agents: %w", err)
		}
	}
	if cfg.node.GossipAddr, err = gossipAddr(c); err != nil {
		return nil, err
	}
	if cfg.node.GossipKey, cfg.gossipKeyFrom, err = gossipKey(c); err != nil {
		return nil, err
	}
	if cfg.node.AdminToken, err = authFlags(c, logger); err != nil {
		return nil, err
	}
	if cfg.node.ServerTLS, cfg.node.ClientTLS, err = tlsFlags(c); err != nil {
		return nil, err
	}
	if cfg.pushAllow, err = readPushAllow(c); err != nil {
		return nil, err
	}
	if err := checkListenAddrs(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkListenAddrs checks --debug-addr and --metrics-addr, when set.
func checkListenAddrs(cfg *config) error {
	if cfg.debugAddr != "" {
		if err := checkDebugAddr(cfg.debugAddr); err != nil {
			return err
		}
	}
	if cfg.metricsAddr != "" {
		return checkMetricsAddr(cfg.metricsAddr)
	}
	return nil
}

// validate checks the node's config with cluster.Config.Validate, the one
// check of it, and words a field error for the command line: the flag the
// field came from, then why ("--http-advertise: \"x\" is not host:port").
// A wildcard listen address without its advertise flag says to give that
// flag.
func (cfg *config) validate() error {
	err := cfg.node.Validate()
	var fe *api.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	flag, advertise := cfg.flagOf(fe.Field)
	if flag == "" {
		return err
	}
	var addr *hostport.Error
	if advertise != "" && errors.As(fe.Err, &addr) && errors.Is(addr, hostport.ErrWildcard) {
		return fmt.Errorf("%s %s binds every interface; also give %s HOST:PORT that peers can reach", flag, addr.Addr, advertise)
	}
	if fe.Field == "GossipKey" {
		return fmt.Errorf("%s: %w; make one with: openssl rand -base64 32", flag, fe.Err)
	}
	return fmt.Errorf("%s: %w", flag, fe.Err)
}

// flagOf names the flag a cluster.Config field was read from and, for a
// listen address taken as the advertised one, the flag that would
// advertise another; "" for a field maosd does not set.
func (cfg *config) flagOf(field string) (flag, advertise string) {
	switch field {
	case "NodeID":
		return "--node-id", ""
	case "DataDir":
		return "--data-dir", ""
	case "RaftAddr":
		return "--raft-addr", "--raft-advertise"
	case "RaftAdvertise":
		return "--raft-advertise", ""
	case "APIAddr":
		if cfg.httpAdvertise != "" {
			return "--http-advertise", ""
		}
		return "--http-addr", "--http-advertise"
	case "AdminToken":
		return "--admin-token-file " + cfg.adminTokenFile, ""
	case "GossipAddr":
		return "--gossip-addr", "--gossip-advertise"
	case "GossipAdvertise":
		return "--gossip-advertise", ""
	case "GossipKey":
		return cfg.gossipKeyFrom, ""
	case "PresenceTTL":
		return "--presence-ttl", ""
	case "CommitTimeout":
		return "--raft-commit-timeout", ""
	case "SnapshotThreshold":
		return "--snapshot-threshold", ""
	}
	return "", ""
}

// refuseZeros refuses 0 for the flags whose cluster.Config field reads 0
// as "the default": a flag shows its default already, so a 0 given on the
// command line is a mistake, refused like a value out of range.
func refuseZeros(node *cluster.Config) error {
	switch {
	case node.PresenceTTL == 0:
		return errors.New("--presence-ttl: 0s: want a positive duration")
	case node.CommitTimeout == 0:
		return fmt.Errorf("--raft-commit-timeout: 0s: want %s..%s", cluster.MinCommitTimeout, cluster.MaxCommitTimeout)
	case node.SnapshotThreshold == 0:
		return fmt.Errorf("--snapshot-threshold: 0: want at least %d entries", cluster.MinSnapshotThreshold)
	}
	return nil
}

// defaultNodeID derives a valid node id from the hostname.
func defaultNodeID() string {
	h, err := os.Hostname()
	if err != nil {
		return "maos"
	}
	return api.NameFrom(h, "maos")
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

// gossipAddr is --gossip-addr or, without it, the --raft-addr IP one port
// up (127.0.0.1:7072 with the defaults), so nodes started on one host with
// distinct Raft ports get distinct gossip ports too.
func gossipAddr(c *cli.Context) (string, error) {
	if addr := c.String("gossip-addr"); c.IsSet("gossip-addr") && addr != "" {
		return addr, nil
	}
	return defaultGossipAddr(c.String("raft-addr"))
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

// gossipKey reads --gossip-key or --gossip-key-file (one of them) and
// returns the decoded key, nil without one, and the flag it came from.
// The key's length is cluster.Config.Validate's to check.
func gossipKey(c *cli.Context) ([]byte, string, error) {
	raw, from := strings.TrimSpace(c.String("gossip-key")), "--gossip-key (or $MAOS_GOSSIP_KEY)"
	if file := strings.TrimSpace(c.String("gossip-key-file")); file != "" {
		if raw != "" {
			return nil, "", errors.New("--gossip-key and --gossip-key-file both given; give one")
		}
		var err error
		if raw, _, err = secretfile.Read(file); err != nil {
			return nil, "", fmt.Errorf("--gossip-key-file: %w", emptyRandomHint(err, file))
		}
		from = "--gossip-key-file " + file
	}
	if raw == "" {
		return nil, from, nil
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not base64: %v", from, err)
	}
	return key, from, nil
}

// limitFlags reads the abuse limits (--send-rate, --send-burst,
// --max-recipients, --max-streams-per-agent, --max-artifact-bytes) and
// checks them with transport.Limits.Validate, the one check of them; the
// error names the flag.
func limitFlags(c *cli.Context) (transport.Limits, error) {
	l := transport.Limits{
		SendRate:           c.Float64("send-rate"),
		SendBurst:          c.Int("send-burst"),
		MaxRecipients:      c.Int("max-recipients"),
		MaxStreamsPerAgent: c.Int("max-streams-per-agent"),
		MaxArtifactBytes:   c.Int64("max-artifact-bytes"),
	}
	if l.MaxArtifactBytes <= 0 {
		// 0 would mean the default to transport: refuse it, as
		// --max-message-bytes 0 is.
		return l, fmt.Errorf("--max-artifact-bytes %d: want 1..%d bytes (16 GiB)", l.MaxArtifactBytes, transport.MaxArtifactBytesCeiling)
	}
	if err := l.Validate(); err != nil {
		var fe *api.FieldError
		if !errors.As(err, &fe) {
			return l, err
		}
		flag := map[string]string{"SendRate": "--send-rate", "SendBurst": "--send-burst",
			"MaxRecipients": "--max-recipients", "MaxStreamsPerAgent": "--max-streams-per-agent", "MaxArtifactBytes": "--max-artifact-bytes"}[fe.Field]
		return l, fmt.Errorf("%s %s", flag, fe.Reason)
	}
	if l.SendRate > 0 && l.SendBurst == 0 {
		l.SendBurst = transport.DefaultSendBurst(l.SendRate)
	}
	if l.MaxRecipients == 0 {
		l.MaxRecipients = api.MaxRecipients
	}
	return l, nil
}

// testBootIDEnv names the environment variable that, when set, replaces
// the kernel's boot id (/proc/sys/kernel/random/boot_id) as the boot the
// node believes it runs in. For tests only: a different value after an
// unclean stop makes the node rebuild its state file as after a reboot.
const testBootIDEnv = "MAOS_TEST_BOOT_ID"

// connLimits bound the API's connections (conns.go).
type connLimits struct {
	maxPerClient int           // --max-conns-per-client; 0: unlimited
	idleTimeout  time.Duration // --http-idle-timeout
	bodyTimeout  time.Duration // --http-body-timeout
}

// connFlags reads the connection bounds, refusing a negative count and a
// timeout that is not positive.
func connFlags(c *cli.Context) (connLimits, error) {
	l := connLimits{maxPerClient: c.Int("max-conns-per-client"), idleTimeout: c.Duration("http-idle-timeout"),
		bodyTimeout: c.Duration("http-body-timeout")}
	if l.maxPerClient < 0 {
		return l, fmt.Errorf("--max-conns-per-client %d: want 0 (unlimited) or more", l.maxPerClient)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--http-idle-timeout", l.idleTimeout}, {"--http-body-timeout", l.bodyTimeout}} {
		if f.d <= 0 {
			return l, fmt.Errorf("%s %s: want a positive duration (e.g. 30s)", f.name, f.d)
		}
	}
	return l, nil
}
