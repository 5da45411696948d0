package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// ErrGossipRefused: the cluster's gossip would not take this node -- a
// gossip key that differs from the cluster's, or one on one side only.
// Retrying cannot help; the operator must fix --gossip-key.
var ErrGossipRefused = errors.New("gossip refused this node")

// Gossip message types: the first byte of a user message or of the
// push/pull state.
const (
	msgPresence   byte = 1 // one api.Presence, JSON
	msgLeaving    byte = 2 // the sender's node id: it is about to leave
	statePresence byte = 1 // push/pull: JSON []api.Presence
)

// leavingWindow is how long a leave notice makes the sender's next
// disappearance count as "left" rather than "dead".
const leavingWindow = 30 * time.Second

// nodeMeta is what a node gossips about itself (memberlist's node
// metadata, at most memberlist.MetaMaxSize bytes): where its API and Raft
// are, so a follower can find the leader's API and a member given only a
// gossip address can find the others.
type nodeMeta struct {
	ID      string `json:"id"`
	API     string `json:"api,omitempty"`
	Raft    string `json:"raft,omitempty"`
	Version string `json:"v,omitempty"`
}

// nodeEvent is a membership change memberlist reported.
type nodeEvent struct {
	node  string
	event string // api.NodeEventJoin, NodeEventLeave or NodeEventDead
	addr  string // gossip host:port
	api   string
}

// memberEntry is what this node knows of one gossip member.
type memberEntry struct {
	meta    nodeMeta
	addr    string
	status  string    // transport.MemberAlive, MemberDead or MemberLeft
	since   time.Time // when status last changed
	leaving time.Time // when it said it was leaving; zero if it did not
	contact time.Time // when its last direct probe answered; zero: never
}

// gossip runs memberlist for one node: membership, node metadata and the
// dissemination of presence records (a broadcast queue for changes,
// push/pull state exchange for convergence).
type gossip struct {
	self      string
	logger    *slog.Logger
	store     *presenceStore
	ml        atomic.Pointer[memberlist.Memberlist]
	bq        *memberlist.TransmitLimitedQueue
	meta      []byte
	addr      string // advertised gossip host:port
	encrypted bool
	down      atomic.Bool // shutdown ran: memberlist must not be asked to leave

	mu    sync.Mutex
	table map[string]*memberEntry // every member heard of, by name

	// Events are handled on goroutines of their own: memberlist calls the
	// EventDelegate with its node lock held, so nothing done there may
	// call back into memberlist, queue a broadcast (the queue's lock is
	// held while it counts members) or block. The first marks the agents
	// of a gone node OFFLINE; the second runs onEvent (the audit trail),
	// which may wait seconds for a leader without delaying the first.
	events  *eventQueue
	audits  *eventQueue
	onEvent func(nodeEvent) // set before start
	stop    chan struct{}
	wg      sync.WaitGroup
}

// eventQueue is an unbounded FIFO of node events: pushing never blocks.
type eventQueue struct {
	mu    sync.Mutex
	items []nodeEvent
	ready chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev nodeEvent) {
	q.mu.Lock()
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// run calls f with each event in order until stop is closed.
func (q *eventQueue) run(stop <-chan struct{}, f func(nodeEvent)) {
	for {
		q.mu.Lock()
		var ev nodeEvent
		ok := len(q.items) > 0
		if ok {
			ev = q.items[0]
			q.items = q.items[1:]
		}
		q.mu.Unlock()
		if ok {
			f(ev)
		}
		select {
		case <-stop:
			return
		default:
		}
		if !ok {
			select {
			case <-stop:
				return
			case <-q.ready:
			}
		}
	}
}

// gossipOptions is what startGossip needs beyond Config.
type gossipOptions struct {
	meta    nodeMeta
	store   *presenceStore
	logger  *slog.Logger
	onEvent func(nodeEvent)
}

// startGossip binds memberlist on cfg.GossipAddr and starts it alone; join
// others with join.
func startGossip(cfg Config, o gossipOptions) (*gossip, error) {
	meta, err := json.Marshal(o.meta)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip metadata: %w", err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: gossip metadata (node id, API and Raft addresses) is %d bytes, over memberlist's %d", len(meta), memberlist.MetaMaxSize)
	}
	g := &gossip{
		self: cfg.NodeID, logger: o.logger, store: o.store, meta: meta, encrypted: len(cfg.GossipKey) > 0,
		table: map[string]*memberEntry{}, events: newEventQueue(), audits: newEventQueue(), onEvent: o.onEvent,
		stop: make(chan struct{}),
	}
	mc := memberlistConfig(cfg)
	mc.Delegate = g
	mc.Events = g
	mc.Ping = g
	mc.Logger = log.New(&memberlistLog{logger: o.logger}, "", 0)
	// The queue counts members from this node's own table, never by
	// asking memberlist: it holds its lock while counting, and memberlist
	// may be waiting for that lock with its node lock held.
	g.bq = &memberlist.TransmitLimitedQueue{NumNodes: g.numAlive, RetransmitMult: mc.RetransmitMult}
	g.store.broadcast = g.queue
	g.wg.Add(2)
	go func() { defer g.wg.Done(); g.events.run(g.stop, g.handleEvent) }()
	go func() {
		defer g.wg.Done()
		g.audits.run(g.stop, func(ev nodeEvent) {
			if g.onEvent != nil {
				g.onEvent(ev)
			}
		})
	}()
	ml, err := memberlist.Create(mc)
	if err != nil {
		close(g.stop)
		g.wg.Wait()
		g.store.broadcast = nil
		return nil, fmt.Errorf("cluster: start gossip on %s: %w", cfg.GossipAddr, err)
	}
	g.ml.Store(ml)
	g.addr = ml.LocalNode().Address()
	return g, nil
}

// memberlistConfig is memberlist's LAN configuration with cfg's gossip
// address, advertise address, key and timings (delegates not yet set).
func memberlistConfig(cfg Config) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	// Probes and gossip are tens of bytes: LZW-compressing each one was a
	// quarter of an idle node's CPU. memberlist still reads what an older
	// node sends compressed.
	mc.EnableCompression = false
	host, port, _ := net.SplitHostPort(cfg.GossipAddr) // checked by Validate
	mc.BindAddr = host
	mc.BindPort, _ = strconv.Atoi(port)
	// With no advertise address memberlist advertises the bound IP and
	// port; with one, address and port go together (a port left at the
	// LAN default 7946 would be advertised otherwise).
	mc.AdvertiseAddr, mc.AdvertisePort = "", 0
	if cfg.GossipAdvertise != "" {
		ahost, aport, _ := net.SplitHostPort(cfg.GossipAdvertise)
		mc.AdvertiseAddr = ahost
		mc.AdvertisePort, _ = strconv.Atoi(aport)
	}
	if len(cfg.GossipKey) > 0 {
		mc.SecretKey = append([]byte(nil), cfg.GossipKey...)
	}
	// A restarted node on a new address takes its name back at once
	// instead of being refused as a conflict while its old self is dead.
	mc.DeadNodeReclaimTime = time.Millisecond
	if cfg.GossipProbeInterval > 0 {
		mc.ProbeInterval = cfg.GossipProbeInterval
	}
	if cfg.GossipProbeTimeout > 0 {
		mc.ProbeTimeout = cfg.GossipProbeTimeout
	}
	if cfg.GossipSuspicionMult > 0 {
		mc.SuspicionMult = cfg.GossipSuspicionMult
	}
	if cfg.GossipInterval > 0 {
		mc.GossipInterval = cfg.GossipInterval
	}
	if cfg.GossipPushPullInterval > 0 {
		mc.PushPullInterval = cfg.GossipPushPullInterval
	}
	return mc
}

// join contacts the gossip members at addrs (host:port) and merges state
// with them; it returns how many answered.
func (g *gossip) join(addrs []string) (int, error) {
	return g.ml.Load().Join(addrs)
}

// leave tells the others this node is leaving, so they mark it left
// rather than dead, waiting up to timeout in all.
//
// memberlist's own leave message cannot tell them: it reaches the
// EventDelegate as a plain NotifyLeave (this version never fills in
// Node.State). So first a leave notice goes to every live member over TCP
// (SendReliable), then memberlist leaves.
func (g *gossip) leave(timeout time.Duration) error {
	if g.down.Load() {
		return nil // memberlist panics on a leave after shutdown
	}
	ml := g.ml.Load()
	notice := append([]byte{msgLeaving}, g.self...)
	var wg sync.WaitGroup
	for _, m := range ml.Members() {
		if m.Name == g.self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ml.SendReliable(m, notice); err != nil {
				g.logger.Debug("leave notice not delivered", "member", m.Name, "error", err)
			}
		}()
	}
	sent := make(chan struct{})
	go func() { wg.Wait(); close(sent) }()
	select {
	case <-sent:
	case <-time.After(timeout / 2):
	}
	return ml.Leave(timeout / 2)
}

// shutdown stops memberlist and the event goroutine. Without a leave
// first, the others will see this node die.
func (g *gossip) shutdown() error {
	g.down.Store(true)
	err := g.ml.Load().Shutdown()
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	g.wg.Wait()
	return err
}

// queue gossips a presence record. A newer record of the same agent
// replaces one still in the queue.
func (g *gossip) queue(p api.Presence) {
	msg, err := encodePresenceMsg(p)
	if err != nil {
		g.logger.Error("encode presence record", "agent", p.AgentID, "error", err)
		return
	}
	g.bq.QueueBroadcast(&presenceBroadcast{agent: p.AgentID, msg: msg})
}

func encodePresenceMsg(p api.Presence) ([]byte, error) {
	b, err := marshalCompact(p)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode presence of %s: %w", p.AgentID, err)
	}
	return append([]byte{msgPresence}, b...), nil
}

// presenceBroadcast is one record in the broadcast queue, named by agent.
type presenceBroadcast struct {
	agent string
	msg   []byte
}

func (b *presenceBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(*presenceBroadcast)
	return ok && o.agent == b.agent
}
func (b *presenceBroadcast) Name() string    { return "presence/" + b.agent }
func (b *presenceBroadcast) Message() []byte { return b.msg }
func (b *presenceBroadcast) Finished()       {}

// --- memberlist.Delegate ---

// NodeMeta is this node's metadata (nodeMeta as JSON).
func (g *gossip) NodeMeta(limit int) []byte { return g.meta }

// NotifyMsg takes a record a peer gossiped. A record new to this node is
// gossiped on, so a change spreads epidemically; the queue's transmit
// limit ends it.
func (g *gossip) NotifyMsg(b []byte) {
	if len(b) > 0 && b[0] == msgLeaving {
		g.mu.Lock()
		if e := g.table[string(b[1:])]; e != nil {
			e.leaving = time.Now()
		}
		g.mu.Unlock()
		return
	}
	if len(b) == 0 || b[0] != msgPresence {
		g.logger.Debug("unknown gossip message", "bytes", len(b))
		return
	}
	var p api.Presence
	if err := json.Unmarshal(b[1:], &p); err != nil {
		g.logger.Warn("malformed presence record in gossip", "error", err)
		return
	}
	fresh, err := g.store.merge(p)
	if err != nil {
		g.logger.Warn("refused a gossiped presence record", "error", err)
		return
	}
	if fresh {
		g.queue(p)
	}
}

// GetBroadcasts hands memberlist the queued records that fit in a packet.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte {
	return g.bq.GetBroadcasts(overhead, limit)
}

// LocalState is every record this node holds, for a push/pull exchange
// (over TCP, so its size is not bound by a packet).
func (g *gossip) LocalState(join bool) []byte {
	b, err := marshalCompact(g.store.all())
	if err != nil {
		g.logger.Error("encode presence state", "error", err)
		return nil
	}
	return append([]byte{statePresence}, b...)
}

// MergeRemoteState merges a peer's records; the newer record of each agent
// wins.
func (g *gossip) MergeRemoteState(buf []byte, join bool) {
	if len(buf) == 0 {
		return
	}
	if buf[0] != statePresence {
		g.logger.Warn("unknown gossip state format", "type", buf[0])
		return
	}
	var recs []api.Presence
	if err := json.Unmarshal(buf[1:], &recs); err != nil {
		g.logger.Warn("malformed presence state from a peer", "error", err)
		return
	}
	for _, p := range recs {
		if _, err := g.store.merge(p); err != nil {
			g.logger.Warn("refused a presence record from a peer's state", "error", err)
		}
	}
}

// --- memberlist.EventDelegate (called with memberlist's node lock held) ---

func (g *gossip) NotifyJoin(n *memberlist.Node) {
	g.update(n, api.NodeEventJoin)
}

func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.update(n, "") }

// NotifyLeave: a member is gone, "left" if it sent a leave notice shortly
// before, "dead" otherwise.
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	g.update(n, api.NodeEventDead)
}

// --- memberlist.PingDelegate: when each member last answered directly ---

// AckPayload adds nothing to this node's acks.
func (g *gossip) AckPayload() []byte { return nil }

// NotifyPingComplete: other answered this node's probe, so it was up now.
// That time is what the cluster view shows as its last contact, and a
// member that dies keeps it (memberlist calls this off its node lock).
func (g *gossip) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.table[other.Name]; e != nil { // NotifyJoin came first
		e.contact = time.Now().UTC()
	}
}

// update records n's address, metadata and status after event (join, dead,
// or "" for a metadata update) and queues the event for handleEvent.
func (g *gossip) update(n *memberlist.Node, event string) {
	g.mu.Lock()
	e := g.table[n.Name]
	if e == nil {
		e = &memberEntry{}
		g.table[n.Name] = e
	}
	before := e.status
	e.addr = n.Address()
	if len(n.Meta) > 0 {
		var m nodeMeta
		if err := json.Unmarshal(n.Meta, &m); err == nil {
			e.meta = m
		}
	}
	switch event {
	case "":
		e.status = transport.MemberAlive
	case api.NodeEventJoin:
		e.status, e.leaving = transport.MemberAlive, time.Time{}
	case api.NodeEventDead:
		e.status = transport.MemberDead
		if !e.leaving.IsZero() && time.Since(e.leaving) < leavingWindow {
			e.status, event = transport.MemberLeft, api.NodeEventLeave
		}
		e.leaving = time.Time{}
	}
	if e.status != before {
		e.since = time.Now()
	}
	ev := nodeEvent{node: n.Name, event: event, addr: e.addr, api: e.meta.API}
	g.mu.Unlock()
	if event != "" && n.Name != g.self {
		g.events.push(ev)
	}
}

// numAlive counts the members this node believes alive, itself included:
// the broadcast queue scales its retransmissions by it.
func (g *gossip) numAlive() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range g.table {
		if e.status == transport.MemberAlive {
			n++
		}
	}
	return max(n, 1)
}

// handleEvent acts on one membership change: the agents of a node that
// died or left turn OFFLINE, those of a node that is back no longer say it
// is gone; then the event goes on to the audit.
func (g *gossip) handleEvent(ev nodeEvent) {
	switch ev.event {
	case api.NodeEventJoin:
		if n := g.store.markNodeBack(ev.node); n > 0 {
			g.logger.Info("agents of a node that is back judged by their heartbeats again", "node", ev.node, "agents", n)
		}
	case api.NodeEventDead, api.NodeEventLeave:
		status := transport.MemberDead
		if ev.event == api.NodeEventLeave {
			status = transport.MemberLeft
		}
		if n := g.store.markNodeOffline(ev.node, reasonNode(ev.node, status)); n > 0 {
			g.logger.Info("agents of a gone node marked OFFLINE", "gone", ev.node, "status", status, "agents", n)
		}
	}
	g.logger.Info("gossip member "+ev.event, "member", ev.node, "gossip_addr", ev.addr)
	g.audits.push(ev)
}

// statusSince is member id's status as this node last heard ("" if
// unknown) and when it changed to it.
func (g *gossip) statusSince(id string) (string, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.table[id]; e != nil {
		return e.status, e.since
	}
	return "", time.Time{}
}

// statusOf is member id's status as this node last heard, "" if unknown.
func (g *gossip) statusOf(id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.table[id]; e != nil {
		return e.status
	}
	return ""
}

// apiAddrVia returns the API address of the member gossiping at addr, or
// else of any other live member: what a node given a gossip address joins
// Raft through.
func (g *gossip) apiAddrVia(addr string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var other string
	for id, e := range g.table {
		if id == g.self || e.status != transport.MemberAlive || e.meta.API == "" {
			continue
		}
		if sameHostPort(e.addr, addr) {
			return e.meta.API
		}
		other = e.meta.API
	}
	return other
}

// sameHostPort compares two host:port strings, resolving nothing.
func sameHostPort(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return a == b
	}
	if ai, bi := net.ParseIP(ah), net.ParseIP(bh); ai != nil && bi != nil {
		return ai.Equal(bi)
	}
	return ah == bh
}

// members lists every member this node has heard of, sorted by id.
func (g *gossip) members() []api.Member {
	g.mu.Lock()
	out := make([]api.Member, 0, len(g.table))
	for id, e := range g.table {
		m := api.Member{NodeID: id, Status: e.status, GossipAddr: e.addr,
			APIAddr: e.meta.API, RaftAddr: e.meta.Raft, Version: e.meta.Version}
		if !e.contact.IsZero() {
			t := e.contact
			m.LastContact = &t
		}
		out = append(out, m)
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// memberlistLog routes memberlist's log lines ("[WARN] memberlist: ...")
// into slog at their level.
type memberlistLog struct{ logger *slog.Logger }

var memberlistLevels = map[string]slog.Level{
	"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[WARN]": slog.LevelWarn,
	"[ERR]": slog.LevelError, "[ERROR]": slog.LevelError,
}

func (w *memberlistLog) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		lvl := slog.LevelInfo
		if tag, rest, ok := strings.Cut(s, " "); ok {
			if l, known := memberlistLevels[tag]; known {
				lvl, s = l, rest
			}
		}
		s = strings.TrimPrefix(s, "memberlist: ")
		w.logger.Log(context.Background(), lvl, s, "module", "memberlist")
	}
	return len(p), nil
}
