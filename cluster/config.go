package cluster

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/maos-project/maos/fsm"
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
	// SnapshotThreshold is how many entries since the last snapshot trigger
	// a new one (default 8192); SnapshotInterval how often that is checked
	// (default 120 s).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// Now is the clock that stamps proposed commands (default time.Now).
	Now func() time.Time
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
}

// Validate checks the config, naming the field at fault.
func (c *Config) Validate() error {
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
	return checkAdvertise("API address", c.APIAddr)
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
