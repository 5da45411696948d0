package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/blobstore"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/metrics"
	"github.com/maos-project/maos/transport"
)

// Node is one member of a maos cluster. Its lifecycle: Open, then exactly
// one of Bootstrap (first node of a new cluster), JoinVia (new node joining
// an existing one) or nothing (a restarted node, which rejoins on its own
// from its data dir), then Close.
type Node struct {
	cfg    Config
	logger *slog.Logger

	lock      *dirLock
	fsm       *fsm.FSM
	store     *raftboltdb.BoltStore
	stable    *stableGuard // store as raft's stable store, closed before store
	snaps     *raft.FileSnapshotStore
	raftNet   *raft.NetworkTransport // Raft's RPCs between nodes, on a raftStreamLayer (not the API's transport)
	raftBind  string                 // the address the Raft network listens on
	raft      *raft.Raft
	hasState  bool
	httpc     *http.Client
	readyTerm syncTerm   // term in which this node, leading, applied an entry
	beats     heartbeats // the leader's failing heartbeats to followers (reach.go)
	presence  *presenceStore
	blobs     *blobstore.Store // artifacts' bytes (blobs.go)
	gossip    *gossip          // nil when Config.GossipAddr is ""
	metrics   *metrics.Metrics // this node's registry (metrics.go)
	batch     *batcher         // a follower's forwarded writes (batch.go)

	// fixingID: a fixClusterID runs; lastIDTry: when one last began (Unix
	// ns), so a leader without an id retries every clusterIDRetry.
	fixingID  atomic.Bool
	lastIDTry atomic.Int64

	// raisingVersion: a raiseClusterVersion runs; lastVersionTry: when
	// one last began (Unix ns); lastVersionHold: the server the version
	// last waited for (a string), logged once per server (version.go).
	raisingVersion  atomic.Bool
	lastVersionTry  atomic.Int64
	lastVersionHold atomic.Value
	versionChecks   atomic.Int64 // raiseClusterVersion runs that asked the servers, for tests
	// versionMu: held by raiseClusterVersion from its question to its
	// entry and by addVoter from its version check to its AddVoter.
	versionMu sync.Mutex

	leaderMu      sync.Mutex
	leaderChanged chan struct{} // closed and replaced when the leader changes

	shutdown  chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// File names inside the data dir.
const (
	raftDBFile  = "raft.db"
	stateDBFile = "state.db"
)

// Open starts a node from cfg.DataDir, creating it if needed. If the data
// dir already holds Raft state the node rejoins its cluster on its own;
// HasState tells the caller whether to Bootstrap or JoinVia. A second
// process opening the same data dir fails at once with ErrDataDirLocked.
func Open(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateTLS(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	n := &Node{cfg: cfg, logger: cfg.Logger.With("node", cfg.NodeID), shutdown: make(chan struct{}), leaderChanged: make(chan struct{}),
		metrics: metrics.New()}
	n.batch = newBatcher(cfg.RetryTimeout, n.shutdown)
	n.httpc = &http.Client{Transport: client.NewHTTPTransport()}
	if cfg.ClientTLS != nil {
		n.httpc = &http.Client{Transport: client.NewHTTPTransportTLS(cfg.ClientTLS)}
	}
	ok := false
	defer func() {
		if !ok {
			n.release(true)
		}
	}()

	var err error
	if n.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	hclogger := newHCLogger("raft", n.logger)
	// raft.db, snapshots, state.db; a damaged file is refused or rebuilt.
	if err = n.openStores(hclogger); err != nil {
		return nil, err
	}
	// Artifacts' bytes: beside the log, never in a snapshot.
	if err = n.openBlobs(); err != nil {
		return nil, err
	}
	if err = n.openRaftNet(hclogger); err != nil {
		return nil, err
	}
	if err = n.startRaft(hclogger); err != nil {
		return nil, err
	}
	if err = n.checkDataDirIsOurs(); err != nil {
		return nil, err
	}
	// Gossip starts after Raft: its node events are proposed through it.
	n.presence = newPresenceStore(cfg.NodeID, cfg.PresenceTTL, cfg.Now)
	if cfg.GossipAddr != "" {
		n.gossip, err = startGossip(n.cfg, gossipOptions{
			meta:  nodeMeta{ID: cfg.NodeID, API: cfg.APIAddr, Raft: n.cfg.RaftAdvertise, Version: cfg.Version},
			store: n.presence, logger: n.logger, onEvent: n.recordNodeEvent,
		})
		if err != nil {
			return nil, err
		}
	}
	n.metrics.Observe(n.MetricsState, n.logger)
	ok = true
	n.logger.Info("node open", "data_dir", cfg.DataDir, "raft_addr", n.cfg.RaftAdvertise, "raft_bind", n.raftBind,
		"api_addr", cfg.APIAddr, "gossip_addr", n.GossipAddr(), "gossip_encrypted", len(cfg.GossipKey) > 0, "tls", cfg.ServerTLS != nil,
		"existing_state", n.hasState, "applied_index", n.fsm.AppliedIndex())
	n.wg.Add(3)
	go n.watchLeadership()
	go n.blobLoop()
	go n.commitPushLoop()
	if n.gossip != nil {
		n.wg.Add(1)
		go n.reconnectGossip()
	}
	return n, nil
}

// openRaftNet opens the Raft stream layer (TLS when configured) and
// the network transport over it, and records the addresses it bound and
// advertises.
func (n *Node) openRaftNet(hclogger hclog.Logger) error {
	stream, err := newRaftStreamLayer(n.cfg.RaftAddr, n.cfg.RaftAdvertise)
	if err != nil {
		return err
	}
	if n.cfg.ServerTLS != nil {
		stream.useTLS(n.cfg.ServerTLS, n.cfg.ClientTLS, n.logger)
	}
	n.raftBind = stream.boundAddr().String()
	n.raftNet = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 5, Timeout: 10 * time.Second, Logger: hclogger,
		// No pipelined replication: with MaxRPCsInFlight 2 its two channels
		// are unbuffered, and a follower's Success=false can leave the send
		// loop parked on one while the decoder parks on the other; the
		// follower then gets heartbeats but never another entry, and
		// Shutdown waits forever (seen here as a Close that hung in
		// netPipeline.AppendEntries/decodeResponses; grafana/pyroscope#5518).
		// Synchronous AppendEntries cost little with batching (raft#541).
		MaxRPCsInFlight: 1,
	})
	n.cfg.RaftAdvertise = string(n.raftNet.LocalAddr())
	return nil
}

// startRaft starts Raft over the node's stores, snapshots and transport.
func (n *Node) startRaft(hclogger hclog.Logger) error {
	var err error
	if n.hasState, err = raft.HasExistingState(n.store, n.store, n.snaps); err != nil {
		return fmt.Errorf("cluster: read raft state: %w", err)
	}
	logs, err := raft.NewLogCache(1024, n.store)
	if err != nil {
		return fmt.Errorf("cluster: log cache: %w", err)
	}
	rc, err := n.raftConfig(hclogger)
	if err != nil {
		return err
	}
	n.stable = &stableGuard{StableStore: n.store}
	if n.raft, err = raft.NewRaft(rc, meteredFSM{FSM: n.fsm, m: n.metrics}, logs, n.stable, n.snaps, n.raftNet); err != nil {
		return fmt.Errorf("cluster: start raft: %w", err)
	}
	return nil
}

// checkDataDirIsOurs refuses a data dir whose Raft configuration (the
// latest, from its snapshot and log, as raft read it at start) has voters
// but not this node's id: another node's data dir, or a wrong --node-id.
// Started anyway, the node would answer for a server it is not. A data
// dir with no configuration yet (a node that joined but received nothing)
// passes.
func (n *Node) checkDataDirIsOurs() error {
	if !n.hasState {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("cluster: read the data dir's raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		return nil
	}
	var members []string
	for _, s := range servers {
		if string(s.ID) == n.cfg.NodeID {
			return nil
		}
		members = append(members, fmt.Sprintf("%s at %s", s.ID, s.Address))
	}
	cluster := n.fsm.ClusterID()
	if cluster == "" {
		cluster = "(whose id this data dir has not applied yet)"
	}
	return fmt.Errorf("cluster: --node-id %s does not match the data dir %s: it holds the state of cluster %s, whose Raft configuration "+
		"has %s and no node %s. Start it with the node id it was made for, or give this node an empty --data-dir to join as a new node "+
		"(a node removed from the cluster: move its data dir away and join again)",
		n.cfg.NodeID, n.cfg.DataDir, cluster, strings.Join(members, ", "), n.cfg.NodeID)
}

func (n *Node) raftConfig(logger hclog.Logger) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.NodeID)
	rc.Logger = logger
	// Group commit: many proposals per append and per FSM batch.
	rc.MaxAppendEntries = 512
	rc.BatchApplyCh = true
	rc.CommitTimeout = n.cfg.CommitTimeout
	if n.cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	}
	if n.cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = n.cfg.ElectionTimeout
	}
	if n.cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	}
	if n.cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	}
	if n.cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = n.cfg.SnapshotInterval
	}
	if n.cfg.TrailingLogs > 0 {
		rc.TrailingLogs = n.cfg.TrailingLogs
	}
	// The state file survives restarts, so raft need not restore the last
	// snapshot into it -- unless the file is behind that snapshot (a crash
	// in the middle of installing one from the leader), in which case the
	// log after the snapshot would not reach back far enough.
	rc.NoSnapshotRestoreOnStart = true
	metas, err := n.snaps.List()
	if err != nil {
		return nil, fmt.Errorf("cluster: list snapshots: %w", err)
	}
	if len(metas) > 0 && metas[0].Index > n.fsm.AppliedIndex() {
		n.logger.Warn("state file is behind the latest snapshot; restoring it",
			"applied_index", n.fsm.AppliedIndex(), "snapshot_index", metas[0].Index)
		rc.NoSnapshotRestoreOnStart = false
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("cluster: raft config: %w", err)
	}
	return rc, nil
}

// HasState reports whether the data dir held Raft state at Open: such a node
// is already a member and needs neither Bootstrap nor JoinVia.
func (n *Node) HasState() bool { return n.hasState }

// ID is the node id.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr is the advertised Raft address.
func (n *Node) RaftAddr() string { return n.cfg.RaftAdvertise }

// RaftBindAddr is the address the Raft network listens on: RaftAddr with
// the port a port-0 bind got. It differs from RaftAddr when an advertise
// address was given.
func (n *Node) RaftBindAddr() string { return n.raftBind }

// GossipAddr is the advertised gossip address (with the port a port-0 bind
// got), "" when the node runs without gossip.
func (n *Node) GossipAddr() string {
	if n.gossip == nil {
		return ""
	}
	return n.gossip.addr
}

// FSM exposes the node's state machine for local, eventually consistent
// reads.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Bootstrap makes this node the only voter of a new cluster. It fails if
// the node already has state.
func (n *Node) Bootstrap() error {
	cfg := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.NodeID), Address: raft.ServerAddress(n.cfg.RaftAdvertise),
	}}}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	n.logger.Info("bootstrapped a new cluster")
	return nil
}

// JoinVia asks the cluster, through any member's API (or gossip) address
// in addrs, to add this node as a voter. With gossip it first joins the
// member's gossip (found through its status; see gossip_node.go), so a node
// whose gossip key does not match the cluster's fails with an error
// wrapping ErrGossipRefused, saying why, and is never added to Raft. It
// tries each address in turn with backoff until one accepts or ctx ends.
func (n *Node) JoinVia(ctx context.Context, addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("cluster: join: no address to join through")
	}
	req := api.JoinRequest{NodeID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAdvertise, APIAddr: n.cfg.APIAddr, Replace: n.cfg.Replace,
		StateVersion: n.fsm.MaxStateVersion()}
	backoff := newBackoff()
	var lastErr error
	attempts, gossipFails := 0, 0
	notAPI := map[string]int{} // consecutive answers of addr that were no maos API's
	for {
		for _, addr := range addrs {
			apiAddr, err := n.joinGossipVia(ctx, addr, &gossipFails)
			if errors.Is(err, ErrGossipRefused) {
				n.logger.Error("cannot join the cluster's gossip", "via", addr, "error", err)
				return fmt.Errorf("cluster: join via %s: %w", addr, err)
			}
			if err == nil {
				actx, cancel := context.WithTimeout(ctx, 15*time.Second)
				err = n.client(apiAddr).Join(actx, req)
				cancel()
				if err == nil {
					n.logger.Info("joined the cluster", "via", apiAddr, "gossip", n.gossip != nil)
					return nil
				}
			}
			final := err != nil && apiAddr != "" && isFinal(err)
			if why := n.notAnAPI(err); why != "" {
				// Once may be a node going down mid-answer; three in a row
				// is what listens there (a final answer says it at once).
				if notAPI[addr]++; notAPI[addr] >= 3 || final {
					return fmt.Errorf("cluster: --join %s: %s", addr, why)
				}
			} else {
				notAPI[addr] = 0
			}
			if final {
				return fmt.Errorf("cluster: join via %s: %w", apiAddr, err)
			}
			lastErr = err
			attempts++
			if attempts%10 == 1 {
				n.logger.Info("cannot join yet; retrying", "via", addr, "attempts", attempts, "error", err)
			}
		}
		if err := backoff.wait(ctx, n.shutdown); err != nil {
			return fmt.Errorf("cluster: join via %v: gave up: %w (last error: %v)", addrs, err, lastErr)
		}
	}
}

// notAnAPI says, in one line, why err shows that what answers a --join
// address is no maos API this node can talk to (a Raft or gossip port, a
// TLS mismatch, a certificate of another CA), or "" when err is no such
// answer (nothing listening yet, a refusal, a timeout: worth a retry).
func (n *Node) notAnAPI(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if why := httpMismatch(msg); why != "" {
		return why
	}
	if strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "malformed HTTP") {
		return "something listens there but does not answer HTTP (it closed the connection): is it a Raft (--raft-addr) port, or a gossip port of a " +
			"node this one cannot gossip with? --join takes a member's API address (--http-addr)"
	}
	return ""
}

// httpMismatch says why an HTTP(S) server that answered (msg, an error
// of a request to it) is one this node cannot talk to -- plain HTTP and
// TLS on either side, or a certificate of another CA -- or "" when msg
// shows no such answer.
func httpMismatch(msg string) string {
	tlsFlags := "--tls-cert, --tls-key and --tls-ca"
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "it serves plain HTTP and this node runs with TLS (" + tlsFlags + "): every node of a cluster runs with TLS, or none does"
	case strings.Contains(msg, "Client sent an HTTP request to an HTTPS server"):
		return "it serves HTTPS and this node runs without TLS: start it with the cluster's " + tlsFlags
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls: "):
		return "TLS with it fails (" + lastLine(msg) + "): its certificate must be signed by this node's --tls-ca, and name the address dialed"
	}
	return ""
}

// lastLine is the part of an error message after its last ": ".
func lastLine(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// CheckJoinTargets asks the members at addrs (API addresses, as --join
// gives them) for their status and returns an error naming both clusters
// when one belongs to another cluster than this node's data dir (the call
// carries this node's cluster id, which the member checks:
// api.HeaderCluster). A member that does not answer is skipped: the
// node rejoins its own cluster from its data dir anyway.
func (n *Node) CheckJoinTargets(ctx context.Context, addrs []string) error {
	mine := n.fsm.ClusterID()
	if mine == "" {
		return nil
	}
	for _, addr := range addrs {
		sctx, cancel := context.WithTimeout(ctx, gossipStatusTimeout)
		st, err := n.client(addr).Status(sctx)
		cancel()
		switch {
		case errors.Is(err, api.ErrConflict):
			return fmt.Errorf("cluster: the data dir %s holds cluster %s, and --join %s is a member of another: %w", n.cfg.DataDir, mine, addr, err)
		case err == nil && st.ClusterID != "" && st.ClusterID != mine:
			return fmt.Errorf("cluster: the data dir %s holds cluster %s, and --join %s (node %s) is a member of cluster %s: "+
				"start the node with its own cluster's --join, or give it an empty --data-dir to join cluster %s as a new node",
				n.cfg.DataDir, mine, addr, st.NodeID, st.ClusterID, st.ClusterID)
		}
	}
	return nil
}

// PeerClient returns a client for node id's API, for the requests the API
// server relays to it (an interrupt's ESC): id must be in the Raft
// configuration and registered (apiAddrOf); an address a gossip member
// advertises is never called. maosd gives it to the API server
// (transport.ServerOptions.PeerClient).
func (n *Node) PeerClient(id string) (*client.Client, error) {
	if !n.inConfiguration(id) {
		return nil, fmt.Errorf("node %s is not in the Raft configuration", id)
	}
	addr := n.apiAddrOf(id)
	if addr == "" {
		return nil, fmt.Errorf("node %s has no API address in the node registry", id)
	}
	return n.client(addr), nil
}

// inConfiguration reports whether id is a server of the Raft
// configuration.
func (n *Node) inConfiguration(id string) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// client is a client of another node's API at addr: https when the node
// has TLS (registered and --join addresses are host:port), authenticated
// as a node when the cluster runs with auth (transport.NodeCredential:
// forwarding, join, status and blob calls act for several agents, but a
// node never sends the admin token). Its callers pass only addresses of
// the node registry (apiAddrOf) or the operator's --join.
func (n *Node) client(addr string) *client.Client {
	c := client.NewClient(addr, n.httpc)
	if n.cfg.ClientTLS != nil {
		c = client.NewClientTLS(addr, n.httpc)
	}
	if cred := transport.NodeCredential(n.cfg.AdminToken); cred != "" {
		c = c.WithToken(cred)
	}
	// A node of another cluster refuses the call (api.HeaderCluster).
	return c.WithCluster(n.fsm.ClusterID())
}

// Close leaves the node stopped with everything flushed and the data dir
// unlocked. A leader first hands leadership to a follower (bounded to a
// few seconds) so the cluster does not wait out an election timeout.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.raft != nil && n.raft.State() == raft.Leader && n.voterCount() > 1 {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.logger.Warn("leadership transfer before shutdown failed", "error", err)
			}
		}
		if n.gossip != nil {
			// The others mark this node left, not dead, and its agents
			// OFFLINE with that reason.
			if err := n.gossip.leave(2 * time.Second); err != nil {
				n.logger.Warn("leaving gossip failed", "error", err)
			}
		}
		close(n.shutdown)
		n.wg.Wait()
		n.closeErr = n.release(true)
		n.logger.Info("node closed")
	})
	return n.closeErr
}

// release stops everything the node runs and closes its files. With
// clean it then leaves the clean marker (if both files closed without
// error); without it (tests' Crash) it leaves the data dir as a crash of
// the process would, but for the state file, which its Close syncs.
func (n *Node) release(clean bool) error {
	var errs []error
	if n.gossip != nil {
		// Before raft: its event handler proposes through raft.
		errs = append(errs, n.gossip.shutdown())
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if n.raftNet != nil {
		errs = append(errs, n.raftNet.Close())
	}
	if n.stable != nil {
		n.stable.close() // a heartbeat still under way must not save to a closed store
	}
	var storeErr, fsmErr error
	if n.store != nil {
		storeErr = n.store.Close()
		errs = append(errs, storeErr)
	}
	if n.fsm != nil {
		fsmErr = n.fsm.Close()
		errs = append(errs, fsmErr)
	}
	if clean && n.store != nil && n.fsm != nil && storeErr == nil && fsmErr == nil {
		// The state file wrote its free list as it closed; the raft log's
		// store cannot, so it is reopened once to do it.
		err := fsm.PersistFreelist(filepath.Join(n.cfg.DataDir, raftDBFile))
		if err == nil {
			err = putCleanMarker(n.cfg.DataDir)
		}
		errs = append(errs, err)
	}
	if n.httpc != nil {
		n.httpc.CloseIdleConnections()
	}
	n.lock.release()
	return errors.Join(errs...)
}

func (n *Node) voterCount() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}
