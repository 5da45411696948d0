package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Presence is soft state: each node holds every agent's latest record in
// memory, gossips changes (gossip.go) and never writes a heartbeat to the
// Raft log. A restarted node learns the records again from its peers.

// presenceRetention is how long a record is kept after its last heartbeat.
// Every node drops older records and ignores them when a peer sends one, so
// agents that are gone for good do not pile up forever.
const presenceRetention = 24 * time.Hour

// maxVersionAhead bounds how far a received record's version (microseconds
// of the writer's clock) may be ahead of this node's clock. A version far in
// the future would win over every later heartbeat of that agent; such a
// record is refused and logged, which points at a host with a wrong clock.
const maxVersionAhead = time.Hour

// Reasons an agent shows OFFLINE without having said so itself.
const (
	reasonLapsed = "heartbeat lapsed"
)

func reasonNode(node, status string) string { return "node " + node + " " + status }

// reasonBack is the reason of an agent OFFLINE since its node died or
// left, once that node is back and the agent has not heartbeat since.
func reasonBack(node string) string { return "node " + node + " back, no heartbeat since" }

// presenceStore holds the presence records this node knows, one per agent,
// and the node's version clock.
//
// Versions are a hybrid logical clock: a write stamps max(clock+1, now in
// Unix µs), and every record received pushes clock up to its version. So a
// write made after this node saw a record of the agent always gets a larger
// version than that record, whatever the hosts' clocks say; a restarted
// node, whose clock starts again from the wall clock, does not start from
// zero; and concurrent writes on two nodes are ordered by (version,
// origin node) the same way everywhere.
type presenceStore struct {
	self string
	ttl  time.Duration
	now  func() time.Time
	// broadcast queues a record for gossip; nil without gossip. Called with
	// mu held, so records of one agent are queued in version order.
	broadcast func(api.Presence)

	mu    sync.Mutex
	clock uint64
	recs  map[string]api.Presence
	stale uint64 // received records dropped because they were not newer
}

func newPresenceStore(self string, ttl time.Duration, now func() time.Time) *presenceStore {
	return &presenceStore{self: self, ttl: ttl, now: now, recs: map[string]api.Presence{}}
}

// tick advances the clock for a write at now and returns the new version.
// Call with mu held.
func (s *presenceStore) tick(now time.Time) uint64 {
	s.clock = max(s.clock+1, micros(now))
	return s.clock
}

func micros(t time.Time) uint64 {
	if us := t.UnixMicro(); us > 0 {
		return uint64(us)
	}
	return 0
}

// put records a heartbeat of agent accepted by this node. u is normalized
// and validated. A node other than this one, or a timestamp outside
// [now-TTL, now+MaxPresenceAhead], is a *api.FieldError; a timestamp older
// than the recorded heartbeat's is a conflict, and nothing changes.
func (s *presenceStore) put(agent string, u api.PresenceUpdate) (api.Presence, error) {
	if u.Node != "" && u.Node != s.self {
		return api.Presence{}, &api.FieldError{Field: "node", Reason: fmt.Sprintf(
			"%q, but this is node %s: send heartbeats to the node the agent runs next to, or leave node out", u.Node, s.self)}
	}
	now := s.now()
	ts := now
	if u.Timestamp != nil {
		ts = *u.Timestamp
		if ahead := ts.Sub(now); ahead > api.MaxPresenceAhead {
			return api.Presence{}, &api.FieldError{Field: "timestamp", Reason: fmt.Sprintf(
				"%s is %s ahead of node %s's clock (at most %s); leave timestamp out to let the node stamp the heartbeat",
				ts.UTC().Format(time.RFC3339Nano), ahead.Round(time.Millisecond), s.self, api.MaxPresenceAhead)}
		}
		if age := now.Sub(ts); age > s.ttl {
			return api.Presence{}, &api.FieldError{Field: "timestamp", Reason: fmt.Sprintf(
				"%s is %s old, past the presence TTL of %s: the heartbeat has already lapsed",
				ts.UTC().Format(time.RFC3339Nano), age.Round(time.Millisecond), s.ttl)}
		}
	}
	rec := api.Presence{
		AgentID: agent, Node: s.self, State: u.State, Substate: u.Substate, Source: u.Source, Channel: u.Channel,
		PID: u.PID, Task: u.Task, Reason: u.Reason, AgentHealth: u.AgentHealth, Timestamp: ts.UTC(), Origin: s.self,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.recs[agent]
	if ok && u.Timestamp != nil && ts.Before(cur.Timestamp) {
		return api.Presence{}, fmt.Errorf("cluster: presence of %s: the heartbeat at %s is older than the recorded one at %s (version %d); not applied: %w",
			agent, ts.UTC().Format(time.RFC3339Nano), cur.Timestamp.Format(time.RFC3339Nano), cur.Version, api.ErrConflict)
	}
	if ok && cur.State == api.PresenceAwake && now.Sub(cur.Timestamp) <= s.ttl {
		foldSources(&rec, &cur)
	}
	rec.Version = s.tick(now)
	wire, err := encodePresenceMsg(rec)
	if err != nil {
		return api.Presence{}, err
	}
	if len(wire) > api.MaxPresenceWire {
		return api.Presence{}, &api.FieldError{Field: "task", Reason: fmt.Sprintf(
			"the record would take %d bytes on the gossip wire, over the limit of %d; shorten task, reason or last_error",
			len(wire), api.MaxPresenceWire)}
	}
	s.recs[agent] = rec
	if s.broadcast != nil {
		s.broadcast(rec)
	}
	return rec, nil
}

// foldSources applies the presence-source rule (cluster/DESIGN.md,
// "Presence sources") to rec, a heartbeat about to replace cur, an AWAKE
// record whose heartbeat has not lapsed: a report whose source ranks below
// cur's (api.SourceRank: hook > pane > watcher) keeps cur's substate
// and source; and a hook, which speaks only of the substate, keeps cur's
// channel, pid, task and task health where it gives none.
func foldSources(rec, cur *api.Presence) {
	if rec.State != api.PresenceAwake {
		return
	}
	fromHook := rec.Source == api.SourceHook
	if api.SourceRank(rec.Source) < api.SourceRank(cur.Source) {
		rec.Substate, rec.Source = cur.Substate, cur.Source
	}
	if fromHook {
		rec.Channel = cmp.Or(rec.Channel, cur.Channel)
		rec.PID = cmp.Or(rec.PID, cur.PID)
		rec.Task = cmp.Or(rec.Task, cur.Task)
		if rec.AgentHealth == (api.AgentHealth{}) {
			rec.AgentHealth = cur.AgentHealth
		}
	}
}

// merge takes a record received from a peer. It reports whether the record
// was new to this node (and replaced what it held); a record that is not
// newer than the one held is counted as stale and dropped. An invalid or
// implausible record is an error and changes nothing.
func (s *presenceStore) merge(p api.Presence) (bool, error) {
	if err := checkRecord(&p); err != nil {
		return false, err
	}
	now := s.now()
	if now.Sub(p.Timestamp) > presenceRetention {
		return false, nil
	}
	if limit := micros(now.Add(maxVersionAhead)); p.Version > limit {
		return false, fmt.Errorf("presence of %s from %s: version %d is more than %s ahead of this node's clock; is that host's clock wrong?",
			p.AgentID, p.Origin, p.Version, maxVersionAhead)
	}
	p.Timestamp = p.Timestamp.UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = max(s.clock, p.Version)
	if cur, ok := s.recs[p.AgentID]; ok && !p.Newer(&cur) {
		s.stale++
		return false, nil
	}
	s.recs[p.AgentID] = p
	return true, nil
}

// checkRecord validates a record received from a peer as strictly as a
// heartbeat from an agent.
func checkRecord(p *api.Presence) error {
	u := api.PresenceUpdate{State: p.State, Substate: p.Substate, Source: p.Source, Channel: p.Channel, PID: p.PID, Task: p.Task, Reason: p.Reason,
		AgentHealth: p.AgentHealth}
	if err := u.Validate(p.AgentID); err != nil {
		return fmt.Errorf("presence of %q from %q: %w", p.AgentID, p.Origin, err)
	}
	if !api.ValidName(p.Node) || !api.ValidName(p.Origin) {
		return fmt.Errorf("presence of %s: node %q or origin %q is not a valid node id", p.AgentID, p.Node, p.Origin)
	}
	if p.Version == 0 {
		return fmt.Errorf("presence of %s from %s: no version", p.AgentID, p.Origin)
	}
	return nil
}

// agentsOf lists the agents whose latest record places them on node, by id.
func (s *presenceStore) agentsOf(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, p := range s.recs {
		if p.Node == node {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// markNodeOffline writes a new version, OFFLINE with reason, of every AWAKE
// agent of node, and returns how many it changed. Every node that sees the
// node die does it; the copies converge like any other update.
func (s *presenceStore) markNodeOffline(node, reason string) int {
	return s.rewriteNode(node, func(p *api.Presence) bool {
		if p.State != api.PresenceAwake {
			return false
		}
		p.MarkOffline(reason)
		return true
	})
}

// markNodeBack rewrites, for node, a member again, every agent of node
// that is OFFLINE because node died or left: still OFFLINE, since nothing
// says the agent is up (an AWAKE record needs a substate, which only its
// heartbeat knows), but with a reason that no longer says its node is
// gone (reasonBack). Its next heartbeat makes it AWAKE. It returns how
// many records it changed; every node that sees node come back does it,
// and the copies converge like any other update.
func (s *presenceStore) markNodeBack(node string) int {
	gone := map[string]bool{reasonNode(node, transport.MemberDead): true, reasonNode(node, transport.MemberLeft): true}
	return s.rewriteNode(node, func(p *api.Presence) bool {
		if p.State != api.PresenceOffline || !gone[p.Reason] {
			return false
		}
		p.Reason = reasonBack(node)
		return true
	})
}

// rewriteNode writes a new version, as change leaves it, of every record
// of an agent of node that change reports it changed, broadcasts each,
// and returns how many.
func (s *presenceStore) rewriteNode(node string, change func(p *api.Presence) bool) int {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, p := range s.recs {
		if p.Node != node || !change(&p) {
			continue
		}
		p.Origin = s.self
		p.Version = s.tick(now)
		s.recs[id] = p
		if s.broadcast != nil {
			s.broadcast(p)
		}
		n++
	}
	return n
}

// view is p as a reader sees it now: an AWAKE agent whose node is dead or
// left, or whose heartbeat is older than the TTL, is OFFLINE with the
// reason. nodeStatus gives a gossip member's status, "" if unknown.
func (s *presenceStore) view(p api.Presence, now time.Time, nodeStatus func(string) string) api.Presence {
	if p.State != api.PresenceAwake {
		return p
	}
	switch st := nodeStatus(p.Node); st {
	case transport.MemberDead, transport.MemberLeft:
		p.MarkOffline(reasonNode(p.Node, st))
		return p
	}
	if now.Sub(p.Timestamp) > s.ttl {
		p.MarkOffline(reasonLapsed)
	}
	return p
}

// list returns every record as seen now, sorted by agent id, dropping
// those past retention.
func (s *presenceStore) list(nodeStatus func(string) string) []api.Presence {
	now := s.now()
	s.mu.Lock()
	out := make([]api.Presence, 0, len(s.recs))
	for id, p := range s.recs {
		if now.Sub(p.Timestamp) > presenceRetention {
			delete(s.recs, id)
			continue
		}
		out = append(out, p)
	}
	s.mu.Unlock()
	for i := range out {
		out[i] = s.view(out[i], now, nodeStatus)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out
}

// get returns one agent's record as seen now.
func (s *presenceStore) get(agent string, nodeStatus func(string) string) (api.Presence, bool) {
	now := s.now()
	s.mu.Lock()
	p, ok := s.recs[agent]
	s.mu.Unlock()
	if !ok || now.Sub(p.Timestamp) > presenceRetention {
		return api.Presence{}, false
	}
	return s.view(p, now, nodeStatus), true
}

// all returns the raw records, for a push/pull state exchange.
func (s *presenceStore) all() []api.Presence {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]api.Presence, 0, len(s.recs))
	for _, p := range s.recs {
		out = append(out, p)
	}
	return out
}

// staleCount is how many received records were dropped as not newer.
func (s *presenceStore) staleCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale
}

// marshalCompact encodes v as JSON without HTML escaping (which would
// triple the size of '<', '>' and '&' in a task).
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// --- transport.PresenceStore, and Members of transport.Membership ---

// PutPresence records a heartbeat accepted by this node and gossips it.
// The handler has normalized and validated u; it is checked again here, as
// every receiving node checks a gossiped record.
func (n *Node) PutPresence(_ context.Context, agent string, u api.PresenceUpdate) (api.Presence, error) {
	u.Normalize()
	if err := u.Validate(agent); err != nil {
		return api.Presence{}, err
	}
	return n.presence.put(agent, u)
}

// Presence lists the agents this node knows of, as seen now.
func (n *Node) Presence(context.Context) ([]api.Presence, error) {
	return n.presence.list(n.memberStatus), nil
}

// AgentPresence returns one agent's presence, api.ErrNotFound if unknown.
func (n *Node) AgentPresence(_ context.Context, agent string) (api.Presence, error) {
	p, ok := n.presence.get(agent, n.memberStatus)
	if !ok {
		return p, fmt.Errorf("cluster: presence: node %s has no record of agent %q: %w", n.cfg.NodeID, agent, api.ErrNotFound)
	}
	return p, nil
}

// Members returns this node's view of gossip membership. Without gossip it
// lists only this node.
func (n *Node) Members(context.Context) (api.MembersResponse, error) {
	res := api.MembersResponse{NodeID: n.cfg.NodeID, Encrypted: len(n.cfg.GossipKey) > 0}
	if n.gossip == nil {
		res.Members = []api.Member{{NodeID: n.cfg.NodeID, Status: transport.MemberAlive,
			APIAddr: n.cfg.APIAddr, RaftAddr: n.cfg.RaftAdvertise, Version: n.cfg.Version}}
		return res, nil
	}
	res.Members = n.gossip.members()
	return res, nil
}

// memberStatus is a gossip member's status, "" if unknown or without
// gossip.
func (n *Node) memberStatus(id string) string {
	if n.gossip == nil {
		return ""
	}
	return n.gossip.statusOf(id)
}
