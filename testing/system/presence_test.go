package system

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// presenceWait bounds each wait of the presence test: memberlist's LAN
// timing declares a dead node dead in about five seconds.
const presenceWait = 30 * time.Second

// agentOn reads one agent's presence from n.
func agentOn(n *harness.Node, agent string) (api.Presence, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return n.Client().AgentPresence(ctx, agent)
}

// waitAgent polls each node until agent's presence there satisfies ok.
func waitAgent(t *testing.T, nodes []*harness.Node, agent, what string, ok func(api.Presence) error) {
	t.Helper()
	for _, n := range nodes {
		harness.NoErr(t, harness.WaitFor(presenceWait, fmt.Sprintf("%s: %s on %s", agent, what, n.ID), func() error {
			p, err := agentOn(n, agent)
			if err != nil {
				return err
			}
			return ok(p)
		}))
	}
}

// waitMember polls n until it sees each member in want with that status.
func waitMember(t *testing.T, n *harness.Node, want map[string]string) {
	t.Helper()
	harness.NoErr(t, harness.WaitFor(presenceWait, fmt.Sprintf("gossip members %v on %s", want, n.ID), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := n.Client().Members(ctx)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, m := range res.Members {
			got[m.NodeID] = m.Status
		}
		for id, st := range want {
			if got[id] != st {
				return fmt.Errorf("members %+v", res.Members)
			}
		}
		return nil
	}))
}

// SIGKILL one node: on the others its agents turn OFFLINE with the reason
// and the node shows dead. Restarted with the same flags and no --join, it
// rejoins gossip (it learns the presence records again, and the others see
// it alive) and Raft (ready, takes writes) with no manual step.
func TestPresenceNodeKilledAndRestarted(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, ExtraArgs: []string{"--presence-ttl", "10m"}})
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	alive := map[string]string{"n1": "alive", "n2": "alive", "n3": "alive"}
	for _, n := range c.Nodes() {
		if n.GossipAddr() == "" {
			t.Fatalf("%s logged no gossip_addr in its ready line", n.ID)
		}
		waitMember(t, n, alive)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	codex, err := checked(t, n2).PutPresence(ctx, "codex", api.PresenceUpdate{
		State: "AWAKE", Substate: "WORKING", Channel: "review", PID: 4242, Task: "reviewing PR 12"})
	harness.NoErr(t, err)
	_, err = n1.Client().PutPresence(ctx, "claude", api.PresenceUpdate{State: "AWAKE"})
	harness.NoErr(t, err)
	waitAgent(t, []*harness.Node{n1, n3}, "codex", "AWAKE from n2", func(p api.Presence) error {
		if p != codex {
			return fmt.Errorf("%+v, want %+v", p, codex)
		}
		return nil
	})

	harness.NoErr(t, n2.Kill())
	waitAgent(t, []*harness.Node{n1, n3}, "codex", "OFFLINE, node n2 dead", func(p api.Presence) error {
		if p.State != "OFFLINE" || p.Reason != "node n2 dead" || p.Node != "n2" || p.Task != "reviewing PR 12" {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	for _, n := range []*harness.Node{n1, n3} {
		waitMember(t, n, map[string]string{"n1": "alive", "n2": "dead", "n3": "alive"})
		p, err := agentOn(n, "claude")
		if err != nil || p.State != "AWAKE" {
			t.Errorf("%s: claude on the live n1 is %+v (%v), want AWAKE", n.ID, p, err)
		}
	}

	// Same id, data dir and addresses (gossip too); no --join.
	harness.NoErr(t, n2.Restart())
	for _, n := range c.Nodes() {
		waitMember(t, n, alive)
	}
	harness.NoErr(t, n2.WaitReady(presenceWait))
	harness.NoErr(t, c.WaitReady())
	// It learned the presence records again from its peers, which no
	// longer say its node is gone (cluster/presence.go, markNodeBack): the
	// agent stays OFFLINE until its own next heartbeat.
	waitAgent(t, []*harness.Node{n2}, "codex", "OFFLINE as the others recorded it, n2 back", func(p api.Presence) error {
		if p.State != "OFFLINE" || p.Reason != "node n2 back, no heartbeat since" {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	// Raft: a write through it commits.
	registerNames(t, c, nil, "claude")
	m := &api.Message{ID: "msg-presence-back-0001", Channel: "review", From: "codex", To: api.Recipients{"claude"},
		Content: api.Content{Text: "back"}}
	res, err := checked(t, n2).Send(ctx, m)
	harness.NoErr(t, err)
	if res.Seq == 0 {
		t.Errorf("send through the restarted node answered %+v", res)
	}
	// A new heartbeat through it wins over the OFFLINE record everywhere.
	back, err := checked(t, n2).PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE"})
	if _, err := checked(t, n1).Members(ctx); err != nil {
		t.Errorf("members through n1: %v", err)
	}
	harness.NoErr(t, err)
	waitAgent(t, c.Nodes(), "codex", "AWAKE again", func(p api.Presence) error {
		if p != back {
			return fmt.Errorf("%+v, want %+v", p, back)
		}
		return nil
	})
}
