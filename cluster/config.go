package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/hostport"
	"github.com/maos-project/maos/transport"
)

// Config describes one node. NodeID, DataDir, RaftAddr and APIAddr are
// required; zero durations take the defaults below.
type Config struct {
	NodeID  string // unique in the cluster; ^[a-z0-9][a-z0-9._-]{0,63}$
	DataDir string // raft.db, state.db, snapshots/ and LOCK live here

	// RaftAddr is the host:port the Raft network listens on (port 0 picks
	// a free one); RaftAdvertise is what peers dial, by default the bound
	// address, which then must not be a wildcard. A node bound on a
	// specific loopback IP dials its loopback peers from that IP.
	RaftAddr      string
	RaftAdvertise string
	// APIAddr is the host:port other nodes and clients reach this node's
	// HTTP API on (the advertised address, registered in the log).
	APIAddr string
	// Version is the build's version as --version prints it (maosd sets
	// cli/internal/version's): the node reports it in its gossip metadata,
	// so in every node's members list, and in its status.
	Version string

	// Replace makes JoinVia ask to take the place of the voter that has
	// this node's id (or Raft address) on purpose (maosd --replace): a dead
	// node rebuilt with a new data dir. Refused while that voter's Raft
	// address still answers; without it such a join is refused.
	Replace bool

	// AdminToken is the admin bootstrap bearer token of a cluster that runs
	// with auth (maosd --auth). The node never sends it: it derives from it
	// the node credential (transport.NodeCredential) it presents on every
	// call to another node's API -- forwarded writes and strong reads,
	// join, status, blobs -- so every node of such a cluster must hold the
	// same one. "" sends no credential, for a cluster without auth.
	AdminToken string

	// ServerTLS and ClientTLS, both set or both nil, secure the node's
	// network with the cluster CA (transport.TLSFiles builds both). The
	// Raft network serves with a clone of ServerTLS that requires and
	// verifies a client certificate, and dials peers with ClientTLS, which
	// must carry the node's certificate; calls to other nodes' APIs
	// (forwarding, join, read index, status) go over https with ClientTLS.
	// Peers are dialed at their advertised addresses, so each node's
	// certificate needs SANs for its Raft and API addresses. nil: plain TCP
	// and http.
	ServerTLS *tls.Config
	ClientTLS *tls.Config

	Logger *slog.Logger

	// ApplyTimeout bounds one Raft apply on the leader (default 10 s).
	ApplyTimeout time.Duration
	// RetryTimeout bounds the whole forward/retry loop of one write or
	// strong read, through elections (default 10 s).
	RetryTimeout time.Duration
	// Raft timing; zero keeps hashicorp/raft's defaults (1 s heartbeat and
	// election timeout, 500 ms leader lease).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long an idle leader waits before it sends its
	// followers an AppendEntries carrying the commit index (default
	// DefaultCommitTimeout; raft waits up to twice it). A follower applies
	// an entry, and wakes its streams, only when it learns the entry is
	// committed, so this bounds delivery to a follower's watchers; from
	// CommitPushAbove on, the leader pushes the commit index after each
	// write instead (commitpush.go) and the tick is a fallback.
	CommitTimeout time.Duration
	// SnapshotThreshold is how many entries since the last snapshot trigger
	// a new one (default DefaultSnapshotThreshold, at least
	// MinSnapshotThreshold); SnapshotInterval how
	// often that is checked (default DefaultSnapshotInterval, randomised
	// up to twice; negative is refused).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is how many entries the log keeps behind the newest
	// snapshot when it is compacted (default DefaultTrailingLogs): a
	// follower that far behind catches up from the log, one further
	// behind is sent the whole snapshot. Tests lower it to make a
	// follower need the snapshot.
	TrailingLogs uint64
	// Now is the clock that stamps proposed commands and presence
	// heartbeats (default time.Now).
	Now func() time.Time

	// GossipAddr is the IP:port memberlist listens on, UDP and TCP on the
	// same port (port 0 picks a free one); memberlist binds an IP, not a
	// host name. "" runs the node without gossip: presence is then local
	// to the node, membership lists only itself and node events are not
	// audited -- for tests and embedding; maosd always sets it.
	// GossipAdvertise is the IP:port peers reach it on, by default the
	// bound address, which then must not be a wildcard.
	GossipAddr      string
	GossipAdvertise string
	// GossipKey encrypts and authenticates gossip (AES-GCM; 16, 24 or 32
	// bytes, the same on every node). nil gossips in the clear, and a node
	// with a key and one without cannot gossip with each other.
	GossipKey []byte
	// PresenceTTL is how long an AWAKE agent stays AWAKE without a
	// heartbeat (default 30 s; negative is refused); after it the agent
	// shows OFFLINE, "heartbeat lapsed", on every node.
	PresenceTTL time.Duration
	// Gossip timing; zero keeps memberlist's LAN defaults (probe every 1 s
	// with a 500 ms timeout, suspicion multiplier 4, gossip every 200 ms,
	// full state push/pull every 30 s), which declare a dead node dead in
	// about 5 s. GossipReconnectInterval is how often a node tries to
	// reach Raft members missing from gossip (default 10 s).
	GossipProbeInterval     time.Duration
	GossipProbeTimeout      time.Duration
	GossipSuspicionMult     int
	GossipInterval          time.Duration
	GossipPushPullInterval  time.Duration
	GossipReconnectInterval time.Duration

	// BootID names the running kernel's boot (default: the contents of
	// /proc/sys/kernel/random/boot_id). The state file commits without
	// fsync, so after an unclean stop it is trusted only if the machine
	// has not rebooted since it was written: the node records the boot id
	// in its data dir and rebuilds the state file from the snapshots and
	// the Raft log when it differs or cannot be read (datadir.go). Tests
	// set it to simulate a reboot; maosd reads MAOS_TEST_BOOT_ID for the
	// same purpose.
	BootID func() (string, error)

	// MaxStateVersion makes the node behave, for tests, as a build that
	// applies state versions up to it only (1..fsm.MaxStateVersion): it
	// reports it in its status and joins, and refuses a state or an entry
	// above it (fsm.Options.MaxStateVersion). Zero is the build's,
	// fsm.MaxStateVersion.
	MaxStateVersion int
	// OpVersions, for tests of the version gate, raises the state version
	// the named ops need on this node's proposals (fsm.Options.OpVersions;
	// versions 1..fsm.MaxStateVersion).
	OpVersions map[api.Op]int
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 10 * time.Second
	}
	if c.RetryTimeout == 0 {
		c.RetryTimeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PresenceTTL == 0 {
		c.PresenceTTL = DefaultPresenceTTL
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.GossipReconnectInterval == 0 {
		c.GossipReconnectInterval = 10 * time.Second
	}
	if c.BootID == nil {
		c.BootID = ProcBootID
	}
}

// DefaultCommitTimeout is Config.CommitTimeout's default: hashicorp/raft's
// 50 ms left a follower's stream 50-100 ms behind the leader's. At 2 ms an
// idle leader sends each follower an empty AppendEntries every 2-4 ms,
// about a tenth of a core per node at rest; from CommitPushAbove on, the
// leader pushes the commit index instead (commitpush.go), which idles
// under 1% but costs c=1 latency.
const DefaultCommitTimeout = 2 * time.Millisecond

// DefaultSnapshotThreshold is Config.SnapshotThreshold's default. A
// snapshot copies the whole state file, so raft's 8192 meant writing ~400
// KB of snapshot per 1 KiB message once a million messages were stored;
// 65536 is an eighth of that, for a raft log of ~100 MB between snapshots.
const DefaultSnapshotThreshold = 65536

// DefaultSnapshotInterval is Config.SnapshotInterval's default. The check
// is cheap (two indexes compared), but the log grows until it runs: at
// raft's 120 s (up to 240 s) a node taking 1,500 sends/s can write up to
// 360,000 entries past the threshold before it snapshots (issue 19's run
// of 135,196 sends in 150 s was never compacted), and the raft log's
// file, which never shrinks, keeps that high-water mark. At 10 s the
// overshoot is at most 20 s of writes (docs/PERFORMANCE.md, issue 19).
const DefaultSnapshotInterval = 10 * time.Second

// DefaultTrailingLogs is Config.TrailingLogs's default, raft's own. It
// is a small part of the log's size (the threshold's entries are most of
// it) and lets a follower that was away for 10,240 entries (seconds at
// full load, or a restart) catch up without the snapshot.
const DefaultTrailingLogs = 10240

// DefaultPresenceTTL is Config.PresenceTTL's default.
const DefaultPresenceTTL = 30 * time.Second

// Bounds Validate puts on Config fields (0 in either means the default).
const (
	// MinSnapshotThreshold is the least SnapshotThreshold: a snapshot
	// copies the whole state file, so a smaller threshold would copy it
	// every few writes.
	MinSnapshotThreshold = 1024
	// MinCommitTimeout and MaxCommitTimeout bound CommitTimeout: raft's
	// floor, and a follower's streams would deliver up to that late.
	MinCommitTimeout = time.Millisecond
	MaxCommitTimeout = time.Second
)

// fieldErr is a Config field Validate refuses, as an *api.FieldError whose
// Field is the Config field's Go name ("APIAddr", "GossipKey") and whose Err
// says why without naming it, so a caller that fills Config from elsewhere
// (maosd from its flags) can put its own name in front; for an address Err
// wraps the *hostport.Error, so errors.Is(err, hostport.ErrWildcard) and
// the like tell the cases apart. The text is "cluster: FIELD: why".
func fieldErr(field, format string, args ...any) error {
	return configErr(field, fmt.Errorf(format, args...))
}

// configErr is fieldErr for a cause already made.
func configErr(field string, err error) error {
	return fmt.Errorf("cluster: %w", &api.FieldError{Field: field, Err: err})
}

// Validate checks the config and returns the first field at fault as an
// *api.FieldError. Zero durations and thresholds stand for their defaults and
// pass. Addresses: RaftAddr and GossipAddr are listened on (port 0 picks a
// free one), and advertised as bound unless RaftAdvertise or
// GossipAdvertise is set, so without one they must not be a wildcard;
// RaftAdvertise, GossipAdvertise and APIAddr are dialed by peers (port
// 1..65535, no wildcard); gossip addresses are IP:port (memberlist binds
// an IP). Open calls it; a caller may call it first to fail before
// anything is opened.
func (c *Config) Validate() error {
	if !api.ValidName(c.NodeID) {
		return fieldErr("NodeID", "%s", api.NameRule(c.NodeID))
	}
	if c.DataDir == "" {
		return fieldErr("DataDir", "required")
	}
	if c.RaftAddr == "" {
		return fieldErr("RaftAddr", "required")
	}
	if err := checkBind("RaftAddr", c.RaftAddr, "RaftAdvertise", c.RaftAdvertise, hostport.Listen); err != nil {
		return err
	}
	if err := hostport.Check(c.APIAddr, hostport.Dial); err != nil {
		return configErr("APIAddr", err)
	}
	// A token the peers' servers would refuse as malformed fails here, not
	// as a 401 on every forwarded call.
	if err := (&transport.AuthConfig{AdminToken: c.AdminToken}).Validate(); err != nil {
		var fe *api.FieldError
		if errors.As(err, &fe) {
			return fieldErr("AdminToken", "%s", fe.Reason)
		}
		return configErr("AdminToken", err)
	}
	switch {
	case c.CommitTimeout != 0 && (c.CommitTimeout < MinCommitTimeout || c.CommitTimeout > MaxCommitTimeout):
		return fieldErr("CommitTimeout", "%s: want %s..%s", c.CommitTimeout, MinCommitTimeout, MaxCommitTimeout)
	case c.SnapshotThreshold != 0 && c.SnapshotThreshold < MinSnapshotThreshold:
		return fieldErr("SnapshotThreshold", "%d: want at least %d entries", c.SnapshotThreshold, MinSnapshotThreshold)
	case c.SnapshotInterval < 0:
		return fieldErr("SnapshotInterval", "%s is negative; want a positive duration", c.SnapshotInterval)
	case c.PresenceTTL < 0:
		return fieldErr("PresenceTTL", "%s is negative; want a positive duration", c.PresenceTTL)
	case c.MaxStateVersion < 0 || c.MaxStateVersion > fsm.MaxStateVersion:
		return fieldErr("MaxStateVersion", "%d: want 1..%d (0: this build's)", c.MaxStateVersion, fsm.MaxStateVersion)
	}
	for op, v := range c.OpVersions {
		if v < 1 || v > fsm.MaxStateVersion {
			return fieldErr("OpVersions", "%s: %d: want 1..%d", op, v, fsm.MaxStateVersion)
		}
	}
	return c.validateGossip()
}

// validateGossip checks the gossip settings: IP:port addresses (memberlist
// takes no host names), an advertise address when the bind is a wildcard,
// a key memberlist accepts.
func (c *Config) validateGossip() error {
	if c.GossipAddr == "" {
		return nil
	}
	if err := checkBind("GossipAddr", c.GossipAddr, "GossipAdvertise", c.GossipAdvertise, hostport.IP); err != nil {
		return err
	}
	if len(c.GossipKey) > 0 {
		if err := memberlist.ValidateKey(c.GossipKey); err != nil {
			return fieldErr("GossipKey", "%d bytes: want 16, 24 or 32 bytes (AES-128, -192 or -256)", len(c.GossipKey))
		}
	}
	return nil
}

// checkBind checks a listen address bind (field) and its advertise
// address (advField, "" for none) under rule (hostport.IP or Listen).
// Without an advertise address the bound one is advertised, so it must
// name one host: a wildcard is refused, saying which field to set.
func checkBind(field, bind, advField, advertise string, rule hostport.Rule) error {
	if err := hostport.Check(bind, rule); err != nil {
		return configErr(field, err)
	}
	if advertise != "" {
		if err := hostport.Check(advertise, rule|hostport.Dial); err != nil {
			return configErr(advField, err)
		}
		return nil
	}
	if err := hostport.Check(bind, rule|hostport.Specific); err != nil {
		return configErr(field, fmt.Errorf("%w; set %s to the address peers reach", err, advField))
	}
	return nil
}

// validateTLS checks Config.ServerTLS and ClientTLS: both or neither, a
// certificate on each side (a node presents its own when it dials), and
// the CA to verify peers against on each side.
func (c *Config) validateTLS() error {
	sc, cc := c.ServerTLS, c.ClientTLS
	switch {
	case sc == nil && cc == nil:
		return nil
	case sc == nil || cc == nil:
		return errors.New("cluster: TLS: set both the server and the client TLS config, or neither")
	case len(sc.Certificates) == 0 && sc.GetCertificate == nil:
		return errors.New("cluster: server TLS config has no certificate (the node's --tls-cert)")
	case sc.ClientCAs == nil:
		return errors.New("cluster: server TLS config has no ClientCAs: Raft verifies its peers' certificates against the cluster CA (--tls-ca)")
	case len(cc.Certificates) == 0 && cc.GetClientCertificate == nil:
		return errors.New("cluster: client TLS config has no certificate: a node presents its own (--tls-cert) to its peers")
	case cc.RootCAs == nil:
		return errors.New("cluster: client TLS config has no RootCAs: a node verifies its peers against the cluster CA (--tls-ca), not the system's roots")
	}
	return nil
}
