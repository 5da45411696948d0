package cluster

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Config describes one node. NodeID, DataDir, RaftAddr and APIAddr are
// required; zero durations take the defaults below.
type Config struct {
	NodeID  string // unique in the cluster; ^[a-z0-9][a-z0-9._-]{0,63}$
	DataDir string // raft.db, state.db, snapshots/ and LOCK live here

	// RaftAddr is the host:port the Raft transport listens on (port 0 picks
	// a free one); RaftAdvertise is what peers dial, by default the bound
	// address, which then must not be a wildcard. A node bound on a
	// specific loopback IP dials its loopback peers from that IP.
	RaftAddr      string
	RaftAdvertise string
	// APIAddr is the host:port other nodes and clients reach this node's
	// HTTP API on (the advertised address, registered in the log).
	APIAddr string

	// AdminToken is the admin bootstrap bearer token of a cluster that runs
	// with auth (maosd --auth). The node sends it on every call it makes to
	// another node's API -- forwarded writes and strong reads, join, status
	// -- so every node of such a cluster must hold the same one. "" sends no
	// token, for a cluster without auth.
	AdminToken string

	// ServerTLS and ClientTLS, both set or both nil, secure the node's
	// network with the cluster CA (transport.TLSFiles builds both). The
	// Raft transport serves with a clone of ServerTLS that requires and
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
	// committed, so this bounds delivery to a follower's watchers.
	CommitTimeout time.Duration
	// SnapshotThreshold is how many entries since the last snapshot trigger
	// a new one (default DefaultSnapshotThreshold); SnapshotInterval how
	// often that is checked (default raft's 120 s, randomised up to twice).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
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
	// heartbeat (default 30 s); after it the agent shows OFFLINE,
	// "heartbeat lapsed", on every node.
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
	if c.GossipReconnectInterval == 0 {
		c.GossipReconnectInterval = 10 * time.Second
	}
}

// DefaultCommitTimeout is Config.CommitTimeout's default: hashicorp/raft's
// 50 ms left a follower's stream 50-100 ms behind the leader's. At 2 ms an
// idle leader sends each follower an empty AppendEntries every 2-4 ms, a
// few hundred small RPCs a second.
const DefaultCommitTimeout = 2 * time.Millisecond

// DefaultSnapshotThreshold is Config.SnapshotThreshold's default. A
// snapshot copies the whole state file, so raft's 8192 meant writing ~400
// KB of snapshot per 1 KiB message once a million messages were stored;
// 65536 is an eighth of that, for a raft log of ~100 MB between snapshots.
const DefaultSnapshotThreshold = 65536

// DefaultPresenceTTL is Config.PresenceTTL's default.
const DefaultPresenceTTL = 30 * time.Second

// Validate checks the config, naming the field at fault.
func (c *Config) Validate() error {
	if c.CommitTimeout != 0 && (c.CommitTimeout < time.Millisecond || c.CommitTimeout > time.Second) {
		return fmt.Errorf("cluster: commit timeout %s: want 1ms..1s (--raft-commit-timeout)", c.CommitTimeout)
	}
	if !fsm.ValidName(c.NodeID) {
		return fmt.Errorf("cluster: node id %q must match ^[a-z0-9][a-z0-9._-]{0,63}$", c.NodeID)
	}
	if c.DataDir == "" {
		return fmt.Errorf("cluster: data dir is required")
	}
	if c.RaftAddr == "" {
		return fmt.Errorf("cluster: raft address is required")
	}
	if c.RaftAdvertise != "" {
		if err := checkAdvertise("raft advertise address", c.RaftAdvertise); err != nil {
			return err
		}
	}
	if err := checkAdvertise("API address", c.APIAddr); err != nil {
		return err
	}
	// A token the peers' servers would refuse as malformed fails here, not
	// as a 401 on every forwarded call.
	if err := (&transport.AuthConfig{AdminToken: c.AdminToken}).Validate(); err != nil {
		return fmt.Errorf("cluster: admin token: %w", err)
	}
	return c.validateGossip()
}

// validateGossip checks the gossip settings: IP:port addresses (memberlist
// takes no host names), an advertise address when the bind is a wildcard,
// a key memberlist accepts, a TTL that is not negative.
func (c *Config) validateGossip() error {
	if c.PresenceTTL < 0 {
		return fmt.Errorf("cluster: presence TTL %s is negative", c.PresenceTTL)
	}
	if c.GossipAddr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.GossipAddr)
	if err != nil || port == "" {
		return fmt.Errorf("cluster: gossip address %q is not IP:port", c.GossipAddr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("cluster: gossip address %q: port must be 0..65535", c.GossipAddr)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("cluster: gossip address %q: want an IP address, not a host name (memberlist binds an IP)", c.GossipAddr)
	}
	if c.GossipAdvertise != "" {
		if err := checkAdvertise("gossip advertise address", c.GossipAdvertise); err != nil {
			return err
		}
		ahost, _, _ := net.SplitHostPort(c.GossipAdvertise)
		if net.ParseIP(ahost) == nil {
			return fmt.Errorf("cluster: gossip advertise address %q: want an IP address, not a host name", c.GossipAdvertise)
		}
	} else if ip.IsUnspecified() {
		return fmt.Errorf("cluster: gossip address %q is a wildcard; give a gossip advertise address peers can reach", c.GossipAddr)
	}
	if len(c.GossipKey) > 0 {
		if err := memberlist.ValidateKey(c.GossipKey); err != nil {
			return fmt.Errorf("cluster: gossip key of %d bytes: want 16, 24 or 32 bytes (AES-128, -192 or -256)", len(c.GossipKey))
		}
	}
	return nil
}

// checkAdvertise refuses an address peers could not dial: empty, not
// host:port, or a wildcard host such as 0.0.0.0.
func checkAdvertise(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return fmt.Errorf("cluster: %s %q is not host:port", what, addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("cluster: %s %q is a wildcard; advertise an address peers can reach", what, addr)
	}
	return nil
}
