package cli

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// The presence half of ctlFakeService, kept beside it (keyed by the fake)
// so maosctl_test.go needs no new fields: records by agent with versions
// 1, 2, 3... in put order, stamped now unless the heartbeat carries a time,
// and a fixed three-member gossip view.
type ctlPresenceState struct {
	mu      sync.Mutex
	recs    map[string]transport.Presence
	version uint64
}

var ctlPresences sync.Map // *ctlFakeService → *ctlPresenceState

func (f *ctlFakeService) presence() *ctlPresenceState {
	v, _ := ctlPresences.LoadOrStore(f, &ctlPresenceState{recs: map[string]transport.Presence{}})
	return v.(*ctlPresenceState)
}

// setPresence stores p as it is (a test's way to show an OFFLINE agent).
func (f *ctlFakeService) setPresence(p transport.Presence) {
	s := f.presence()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[p.AgentID] = p
}

func (f *ctlFakeService) PutPresence(_ context.Context, agent string, u transport.PresenceUpdate) (transport.Presence, error) {
	s := f.presence()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	ts := time.Now().UTC()
	if u.Timestamp != nil {
		ts = *u.Timestamp
	}
	p := transport.Presence{AgentID: agent, Node: "n1", State: u.State, Substate: u.Substate, Channel: u.Channel,
		PID: u.PID, Task: u.Task, Reason: u.Reason, Timestamp: ts, Version: s.version, Origin: "n1"}
	s.recs[agent] = p
	return p, nil
}

func (f *ctlFakeService) Presence(context.Context) ([]transport.Presence, error) {
	s := f.presence()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []transport.Presence
	for _, p := range s.recs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

func (f *ctlFakeService) AgentPresence(_ context.Context, agent string) (transport.Presence, error) {
	s := f.presence()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.recs[agent]
	if !ok {
		return p, fmt.Errorf("node n1 has no record of agent %q: %w", agent, fsm.ErrNotFound)
	}
	return p, nil
}

func (f *ctlFakeService) Members(context.Context) (transport.MembersResponse, error) {
	return transport.MembersResponse{NodeID: "n1", Members: []transport.Member{
		{NodeID: "n1", Status: "alive", GossipAddr: "127.0.0.1:7072", APIAddr: "127.0.0.1:7070", RaftAddr: "127.0.0.1:7071", Version: "v0.1.0"},
		{NodeID: "n2", Status: "dead", GossipAddr: "127.0.0.1:7082", APIAddr: "127.0.0.1:7080", RaftAddr: "127.0.0.1:7081", Version: "v0.1.0"},
		{NodeID: "n3", Status: "left", GossipAddr: "127.0.0.1:7092"},
	}}, nil
}
