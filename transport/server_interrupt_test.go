package transport_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Node A gets the interrupt; presence places the agent on n2, so A
// forwards it to n2, whose hook (its watchers' panes) presses ESC.
func TestInterruptRoutesToHostingNode(t *testing.T) {
	hostFake := newFake()
	var mu sync.Mutex
	var pressed []string
	host := serve(t, hostFake, transport.ServerOptions{Interrupt: func(_ context.Context, agent string) error {
		mu.Lock()
		defer mu.Unlock()
		pressed = append(pressed, agent)
		return nil
	}})
	hostAddr := strings.TrimPrefix(host.URL, "http://")
	hp := hostFake.presence()
	hp.members.NodeID = "n2"
	hp.recs["claude"] = transport.Presence{AgentID: "claude", Node: "n2", State: "AWAKE"}

	entryFake := newFake()
	ep := entryFake.presence()
	ep.members.Members[1] = transport.Member{NodeID: "n2", Status: "alive", APIAddr: hostAddr}
	ep.recs["claude"] = transport.Presence{AgentID: "claude", Node: "n2", State: "AWAKE"}
	ep.recs["ghost"] = transport.Presence{AgentID: "ghost", Node: "n9", State: "AWAKE"}
	st := newStreamState(t, entryFake) // a real state machine: roles and rules
	for _, a := range []fsm.RegisterAgentCommand{{ID: "master", Role: "master"}, {ID: "worker", Role: "worker"}} {
		st.idx++
		data, err := fsm.Encode(fsm.OpRegisterAgent, time.Now().UnixNano(), a)
		if err != nil {
			t.Fatal(err)
		}
		if res := st.f.ApplyBatch([]*raft.Log{{Index: st.idx, Type: raft.LogCommand, Data: data}})[0]; res == nil {
			t.Fatal("register: nil result")
		} else if err, ok := res.(error); ok {
			t.Fatal(err)
		}
	}
	var peers []string
	entry := serve(t, entryFake, transport.ServerOptions{PeerClient: func(addr string) *transport.Client {
		peers = append(peers, addr)
		return transport.NewClient(addr, nil)
	}})
	c := transport.NewClient(entry.URL, nil)
	ctx := context.Background()

	res, err := c.InterruptAgent(ctx, "claude", transport.InterruptRequest{From: "master", Reason: "stop"})
	if err != nil || res.Node != "n2" || res.Agent != "claude" {
		t.Fatalf("interrupt = %+v, %v", res, err)
	}
	mu.Lock()
	if len(pressed) != 1 || pressed[0] != "claude" {
		t.Fatalf("ESC pressed for %v, want [claude]", pressed)
	}
	mu.Unlock()
	if calls := hostFake.callsTo("AgentPresence"); len(calls) != 1 || !calls[0].forwarded {
		t.Fatalf("the hosting node saw %+v, want one forwarded request", calls)
	}
	if len(peers) != 1 || peers[0] != hostAddr {
		t.Fatalf("relayed through PeerClient(%q), want one call for %s", peers, hostAddr)
	}

	for _, tt := range []struct {
		agent, from string
		want        error
		text        string
	}{
		{"ghost", "master", fsm.ErrNotFound, "not an alive member"},
		{"nobody", "master", fsm.ErrNotFound, "no presence"},
		{"claude", "Not Valid", fsm.ErrInvalid, "from"},
		// Without a rules document only master and orchestrator interrupt.
		{"claude", "worker", fsm.ErrForbidden, `role "worker"`},
	} {
		_, err := c.InterruptAgent(ctx, tt.agent, transport.InterruptRequest{From: tt.from, Reason: "x"})
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("interrupt %s from %q: %v, want %v mentioning %q", tt.agent, tt.from, err, tt.want, tt.text)
		}
	}
	// A node that runs no watcher with panes says so.
	ep.recs["local"] = transport.Presence{AgentID: "local", Node: "n1", State: "AWAKE"}
	if _, err := c.InterruptAgent(ctx, "local", transport.InterruptRequest{From: "master"}); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("interrupt with no local panes: %v", err)
	}
}
