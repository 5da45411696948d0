package transport_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// The presence half of fakeService. Its state lives beside the fake (keyed
// by it) so fake_test.go needs no new fields: records by agent, versions
// 1, 2, 3... in put order, node n1, timestamps from the fake's clock, and
// the updates the fake received, as the handler passed them.
type fakePresenceState struct {
	mu      sync.Mutex
	recs    map[string]transport.Presence
	updates []transport.PresenceUpdate
	version uint64
	members transport.MembersResponse
}

var fakePresences sync.Map // *fakeService → *fakePresenceState

func (f *fakeService) presence() *fakePresenceState {
	v, _ := fakePresences.LoadOrStore(f, &fakePresenceState{
		recs: map[string]transport.Presence{},
		members: transport.MembersResponse{NodeID: "n1", Encrypted: true, Members: []transport.Member{
			{NodeID: "n1", Status: "alive", GossipAddr: "127.0.0.1:9001", APIAddr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:8001", Version: "v0.1.0"},
			{NodeID: "n2", Status: "dead", GossipAddr: "127.0.0.1:9002", APIAddr: "127.0.0.1:7002", RaftAddr: "127.0.0.1:8002"},
		}},
	})
	return v.(*fakePresenceState)
}

// presenceUpdates returns the updates PutPresence received, in order.
func (f *fakeService) presenceUpdates() []transport.PresenceUpdate {
	p := f.presence()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]transport.PresenceUpdate(nil), p.updates...)
}

func (f *fakeService) PutPresence(ctx context.Context, agent string, u transport.PresenceUpdate) (transport.Presence, error) {
	if err := f.record(ctx, call{method: "PutPresence", arg: agent}); err != nil {
		return transport.Presence{}, err
	}
	p := f.presence()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updates = append(p.updates, u)
	p.version++
	ts := f.now.Add(time.Duration(p.version) * time.Second)
	if u.Timestamp != nil {
		ts = *u.Timestamp
	}
	rec := transport.Presence{AgentID: agent, Node: "n1", State: u.State, Substate: u.Substate, Channel: u.Channel,
		PID: u.PID, Task: u.Task, Reason: u.Reason, Timestamp: ts, Version: p.version, Origin: "n1"}
	p.recs[agent] = rec
	return rec, nil
}

func (f *fakeService) Presence(ctx context.Context) ([]transport.Presence, error) {
	if err := f.record(ctx, call{method: "Presence"}); err != nil {
		return nil, err
	}
	p := f.presence()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []transport.Presence // nil when empty: the handler must still answer []
	for _, r := range p.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

func (f *fakeService) AgentPresence(ctx context.Context, agent string) (transport.Presence, error) {
	if err := f.record(ctx, call{method: "AgentPresence", arg: agent}); err != nil {
		return transport.Presence{}, err
	}
	p := f.presence()
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.recs[agent]
	if !ok {
		return r, fmt.Errorf("fake: presence of %s: %w", agent, fsm.ErrNotFound)
	}
	return r, nil
}

func (f *fakeService) Members(ctx context.Context) (transport.MembersResponse, error) {
	if err := f.record(ctx, call{method: "Members"}); err != nil {
		return transport.MembersResponse{}, err
	}
	p := f.presence()
	p.mu.Lock()
	defer p.mu.Unlock()
	res := p.members
	res.Members = append([]transport.Member(nil), res.Members...)
	return res, nil
}
