package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/hostport"
)

// Validate names the Config field at fault and says why; address errors
// carry hostport's kinds, so callers can tell a wildcard from a typo.
func TestConfigValidateFields(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*cluster.Config)
		field string
		kind  error // nil: any
		says  string
	}{
		{"bad node id", func(c *cluster.Config) { c.NodeID = "Bad ID" }, "NodeID", nil, `must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Bad ID")`},
		{"no data dir", func(c *cluster.Config) { c.DataDir = "" }, "DataDir", nil, "required"},
		{"no raft addr", func(c *cluster.Config) { c.RaftAddr = "" }, "RaftAddr", nil, "required"},
		{"raft addr not host:port", func(c *cluster.Config) { c.RaftAddr = "nonsense" }, "RaftAddr", hostport.ErrSyntax, `"nonsense" is not host:port`},
		{"raft wildcard without advertise", func(c *cluster.Config) { c.RaftAddr = "0.0.0.0:0" }, "RaftAddr", hostport.ErrWildcard, "set RaftAdvertise"},
		{"raft empty host without advertise", func(c *cluster.Config) { c.RaftAddr = ":7071" }, "RaftAddr", hostport.ErrWildcard, "not a wildcard"},
		{"raft advertise port 0", func(c *cluster.Config) { c.RaftAdvertise = "10.0.0.5:0" }, "RaftAdvertise", hostport.ErrPort, "port must be 1..65535"},
		{"raft advertise wildcard", func(c *cluster.Config) { c.RaftAddr, c.RaftAdvertise = "0.0.0.0:0", "0.0.0.0:7071" }, "RaftAdvertise", hostport.ErrWildcard, "not a wildcard"},
		{"api addr empty", func(c *cluster.Config) { c.APIAddr = "" }, "APIAddr", hostport.ErrSyntax, "is not host:port"},
		{"api addr port 0", func(c *cluster.Config) { c.APIAddr = "127.0.0.1:0" }, "APIAddr", hostport.ErrPort, "port must be 1..65535"},
		{"api addr wildcard", func(c *cluster.Config) { c.APIAddr = "[::]:7070" }, "APIAddr", hostport.ErrWildcard, "not a wildcard"},
		{"admin token too short", func(c *cluster.Config) { c.AdminToken = "short" }, "AdminToken", nil, "5 bytes, want 16..512"},
		{"admin token characters", func(c *cluster.Config) { c.AdminToken = "0123456789abcdef!<>" }, "AdminToken", nil, "cannot carry"},
		{"commit timeout over 1s", func(c *cluster.Config) { c.CommitTimeout = 2 * time.Second }, "CommitTimeout", nil, "2s: want 1ms..1s"},
		{"snapshot threshold under the floor", func(c *cluster.Config) { c.SnapshotThreshold = 10 }, "SnapshotThreshold", nil, "10: want at least 1024 entries"},
		{"snapshot interval negative", func(c *cluster.Config) { c.SnapshotInterval = -time.Second }, "SnapshotInterval", nil, "-1s is negative"},
		{"gossip advertise port 0", func(c *cluster.Config) { c.GossipAddr, c.GossipAdvertise = "0.0.0.0:0", "10.0.0.5:0" }, "GossipAdvertise", hostport.ErrPort, "port must be 1..65535"},
		{"gossip wildcard without advertise", func(c *cluster.Config) { c.GossipAddr = "[::]:0" }, "GossipAddr", hostport.ErrWildcard, "set GossipAdvertise"},
	} {
		cfg := clustertest.Config("n1", t.TempDir(), "127.0.0.1:7070")
		tc.tweak(&cfg)
		err := cfg.Validate()
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) ||
			!strings.HasPrefix(err.Error(), "cluster: "+tc.field+": ") || (tc.kind != nil && !errors.Is(err, tc.kind)) {
			t.Errorf("%s: Validate() = %v (%T), want a FieldError for %s saying %q (kind %v)", tc.name, err, err, tc.field, tc.says, tc.kind)
		}
	}
	cfg := clustertest.Config("n1", t.TempDir(), "127.0.0.1:7070")
	cfg.RaftAddr, cfg.RaftAdvertise, cfg.SnapshotThreshold = "0.0.0.0:0", "node-1.example:7071", cluster.MinSnapshotThreshold
	if err := cfg.Validate(); err != nil {
		t.Errorf("a wildcard raft bind with a host name to advertise was refused: %v", err)
	}
}
