package transport_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// Node A gets the interrupt; presence places the agent on n2, so A
// forwards it to n2, whose hook (its watchers' panes) presses ESC.
func TestInterruptRoutesToHostingNode(t *testing.T) {
	hostFake := transporttest.New(t)
	var mu sync.Mutex
	var pressed []string
	host := serve(t, hostFake, transport.ServerOptions{Interrupt: func(_ context.Context, agent string) error {
		mu.Lock()
		defer mu.Unlock()
		pressed = append(pressed, agent)
		return nil
	}})
	hostAddr := strings.TrimPrefix(host.URL, "http://")
	hostFake.EditMembers(func(m *transport.MembersResponse) { m.NodeID = "n2" })
	hostFake.SetPresence(transport.Presence{AgentID: "claude", Node: "n2", State: "AWAKE"})

	entryFake := transporttest.New(t)
	entryFake.EditMembers(func(m *transport.MembersResponse) {
		m.Members[1] = transport.Member{NodeID: "n2", Status: "alive", APIAddr: hostAddr}
	})
	entryFake.SetPresence(transport.Presence{AgentID: "claude", Node: "n2", State: "AWAKE"})
	entryFake.SetPresence(transport.Presence{AgentID: "ghost", Node: "n9", State: "AWAKE"})
	for _, a := range []fsm.RegisterAgentCommand{{ID: "master", Role: "master"}, {ID: "worker", Role: "worker"}} {
		if res, err := entryFake.ApplyCommand(fsm.OpRegisterAgent, a); err != nil {
			t.Fatal(err)
		} else if res == nil {
			t.Fatal("register: nil result")
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
	if calls := hostFake.CallsTo("AgentPresence"); len(calls) != 1 || !calls[0].Forwarded {
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
	entryFake.SetPresence(transport.Presence{AgentID: "local", Node: "n1", State: "AWAKE"})
	if _, err := c.InterruptAgent(ctx, "local", transport.InterruptRequest{From: "master"}); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("interrupt with no local panes: %v", err)
	}
}
