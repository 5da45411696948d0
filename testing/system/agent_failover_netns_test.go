package system

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// TestAgentFailoverHolderCutOff is TestAgentFailover with the holder
// alive but cut off, a real network split rather than a kill: three
// nodes in network namespaces, watchers of agent oncall on n1 and n2
// (lease_ttl 2 s), a sender mailing the agent through n3. Once some
// messages are answered, the holder's node is isolated from the other
// two on every plane (Raft, HTTP forwarding, gossip) while its maosd and
// watcher keep running and the test still reaches its API. The standby
// must take the lease with a larger fence (lapsed) while the old holder
// runs; the cut is held for a few ttl, then healed. At the end every
// message has exactly one reply on every node (the healed one too), none
// lost; none of the old holder's replies is stored with an entry time
// after the takeover (its writes under the old fence, in flight or
// retransmitted at the heal, are refused); the lease stays the new
// holder's, and the old holder's watcher stands by (the lease's standbys
// and who, read through n3 and through the old holder's node). It logs
// cut → lease taken and cut → the standby's first answer.
func TestAgentFailoverHolderCutOff(t *testing.T) {
	harness.RequireNetns(t)
	const (
		agent = "oncall"
		ch    = "failover"
		total = 60 // messages the sender mails
		cutAt = 8  // answered before the cut
	)
	ttl := agentFailoverTTL(t)
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, Netns: true, NodeArgs: failoverNodeArgs(t, agent, ch, ttl)})
	n3 := c.Node("n3")
	cl := n3.Client()

	first := awaitHolderAndStandby(t, cl, agent)
	holder, standby := c.Node(first.Holder.Node), c.Node(first.Standbys[0].Node)
	if holder == n3 || standby == n3 {
		t.Fatalf("lease %+v: n3 runs no watcher", first)
	}

	msgs := failoverMessages(agent, ch, total)
	sendErrs := startFailoverSender(c, n3, msgs)
	awaitAnswers(t, n3, agent, msgs[:cutAt], holder.ID)
	wasLeader := false
	if l, err := c.Leader(); err == nil && l == holder {
		wasLeader = true
	}

	// Isolate the holder's node on every plane; it keeps running.
	cutTime := time.Now()
	harness.NoErr(t, c.Partition([]*harness.Node{holder}))

	// The standby takes over when the lease lapses, the old holder alive.
	taken := awaitTakeover(t, cl, agent, standby, first)
	if !holder.Live() {
		t.Fatalf("the cut-off holder %s is not running", holder.ID)
	}
	if _, err := holder.Status(5 * time.Second); err != nil {
		t.Fatalf("the cut-off holder %s does not answer its API: %v", holder.ID, err)
	}

	// Hold the cut for three ttl from the takeover, and until the
	// standby answered something (bounded).
	takenSeen := time.Now()
	harness.NoErr(t, harness.WaitFor(watcherWait, "the cut held 3 ttl past the takeover, "+standby.ID+" answering", func() error {
		if d := time.Since(takenSeen); d < 3*ttl {
			return fmt.Errorf("cut held %s past the takeover", d.Round(time.Millisecond))
		}
		for _, m := range msgs[cutAt:] {
			r, err := replyOf(n3, agent, m)
			if err == nil && r.Content.Text == "stub answer to "+m.ID+" on "+standby.ID {
				return nil
			}
		}
		return fmt.Errorf("no answer by %s yet", standby.ID)
	}))
	if !holder.Live() {
		t.Fatalf("the cut-off holder %s stopped during the cut", holder.ID)
	}
	harness.NoErr(t, c.Heal())
	healedAt := time.Now()

	// Every message answered, each once, on every node.
	for _, err := range sendErrs() {
		t.Errorf("send: %v", err)
	}
	if got := len(c.Live()); got != 3 {
		t.Fatalf("%d nodes running after the heal, want 3", got)
	}
	ans := checkAnsweredOnce(t, c, n3, agent, ch, msgs, holder, standby)
	if ans.byNode[holder.ID] < cutAt || ans.byNode[standby.ID] == 0 {
		t.Errorf("answers by node %v: want at least %d by %s before the cut and some by %s after", ans.byNode, cutAt, holder.ID, standby.ID)
	}

	// The fence's promise: nothing of the cut-off holder after the
	// takeover.
	takeover := auditedTakeover(t, cl, agent, holder, standby, first, taken)
	for _, m := range msgs {
		if r := ans.replies[m.ID]; ans.on[m.ID] == holder.ID && r.Timestamp.After(takeover.Time) {
			t.Errorf("the cut-off %s's reply %s is stamped %s, after the takeover at %s", holder.ID, r.ID, r.Timestamp, takeover.Time)
		}
	}

	// The old holder's watcher stands by: the lease is still the one
	// taken, with the old holder's node among its standbys, read through
	// n3 and through the healed node; who says the same.
	for _, via := range []*harness.Node{n3, holder} {
		harness.NoErr(t, harness.WaitFor(watcherWait, fmt.Sprintf("%s's lease: %s holds it, %s stands by", via.ID, standby.ID, holder.ID), func() error {
			l, err := agentLeaseOn(via.Client(), agent)
			if err != nil {
				return err
			}
			if l.Holder.Node != standby.ID || l.Fence != taken.Fence || l.Expired ||
				!slices.ContainsFunc(l.Standbys, func(s api.AgentStandby) bool { return s.Node == holder.ID }) {
				return fmt.Errorf("lease %+v", l)
			}
			return nil
		}))
		awaitPresence(t, via.Client(), agent, standby.ID, holder.ID)
	}
	t.Logf("agent failover, holder cut off (lease_ttl %s, cut-off holder %s was the Raft leader: %v): cut → lease taken %d ms, cut → first answer by %s %d ms, cut held %d ms; answers %v",
		ttl, holder.ID, wasLeader, takeover.Time.Sub(cutTime).Milliseconds(), standby.ID, ans.firstBy[standby.ID].Sub(cutTime).Milliseconds(),
		healedAt.Sub(cutTime).Milliseconds(), ans.byNode)
}
