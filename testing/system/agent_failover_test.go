package system

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/watcher"
)

// failoverTTL is the agent's lease_ttl in TestAgentFailover; the
// environment's MAOS_FAILOVER_LEASE_TTL (a Go duration) replaces it, to
// measure the failover with another ttl (docs/RELIABILITY.md).
const failoverTTL = 2 * time.Second

// TestAgentFailover runs the watchers of one agent on two nodes of three
// (maosd --agents on n1 and n2, the stub model; each node's prompt tags
// the answer with the node, so the test knows who answered). One holds
// the agent's lease and answers, the other stands by. A sender
// goroutine keeps mailing the agent through n3; once some messages are
// answered, the holder's node is SIGKILLed. The standby must take the
// lease when it lapses and answer the rest, from the agent's replicated
// cursor: at the end every message is answered exactly once on every
// live node (by the old holder before the takeover or the standby
// after), none twice, none lost; a late reply under the old fence is refused;
// the audit records the takeover. It logs the failover time: kill →
// lease taken (the takeover's entry time) and kill → the standby's first
// answer (its entry time), both stamped by this host's clock.
func TestAgentFailover(t *testing.T) {
	const (
		agent = "oncall"
		ch    = "failover"
		total = 40 // messages the sender mails
		kill  = 8  // answered before the kill
	)
	ttl := agentFailoverTTL(t)
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, NodeArgs: failoverNodeArgs(t, agent, ch, ttl)})
	n3 := c.Node("n3")
	cl := n3.Client()
	ctx := context.Background()

	// One holds the lease, the other stands by.
	first := awaitHolderAndStandby(t, cl, agent)
	holder, standby := c.Node(first.Holder.Node), c.Node(first.Standbys[0].Node)

	// The sender: total messages through n3, one every 100 ms.
	msgs := failoverMessages(agent, ch, total)
	sendErrs := startFailoverSender(c, n3, msgs)
	awaitAnswers(t, n3, agent, msgs[:kill], holder.ID)
	wasLeader := false
	if l, err := c.Leader(); err == nil && l == holder {
		wasLeader = true
	}
	killedAt := time.Now()
	harness.NoErr(t, holder.Kill())

	// The standby takes over when the lease lapses.
	taken := awaitTakeover(t, cl, agent, standby, first)

	// Every message answered, each once, on every live node.
	for _, err := range sendErrs() {
		t.Errorf("send: %v", err)
	}
	ans := checkAnsweredOnce(t, c, n3, agent, ch, msgs, holder, standby)
	byNode, firstByStandby, lastByHolder := ans.byNode, ans.firstBy[standby.ID], ans.lastBy[holder.ID]
	if byNode[holder.ID] < kill || byNode[standby.ID] == 0 {
		t.Errorf("answers by node %v: want at least %d by %s before the kill and some by %s after", byNode, kill, holder.ID, standby.ID)
	}

	// A late reply under the old fence is refused by it.
	last := msgs[total-1]
	q, err := getMessage(n3, last.ID)
	harness.NoErr(t, err)
	late := api.NewReply(q, agent, "late answer from the dead holder")
	late.ID = watcher.ReplyID(agent, q)
	sctx, cancel := context.WithTimeout(ctx, readTimeout)
	_, err = cl.SendFenced(sctx, late, first.Fence)
	cancel()
	if !errors.Is(err, api.ErrFenced) || !strings.Contains(err.Error(), fmt.Sprintf("fence %d is not the current lease's", first.Fence)) {
		t.Errorf("late reply under fence %d: %v, want refused by the fence", first.Fence, err)
	}

	// The audit records the takeover.
	takeover := auditedTakeover(t, cl, agent, holder, standby, first, taken)
	// The fence's promise: nothing of the old holder after the takeover
	// (a reply of its in flight at the kill may commit just after it).
	if lastByHolder.After(takeover.Time) {
		t.Errorf("the killed %s's last reply is stamped %s, after the takeover at %s", holder.ID, lastByHolder, takeover.Time)
	}
	t.Logf("agent failover (lease_ttl %s, killed holder %s was the Raft leader: %v): kill → lease taken %d ms, kill → first answer by %s %d ms; answers %v",
		ttl, holder.ID, wasLeader, takeover.Time.Sub(killedAt).Milliseconds(), standby.ID, firstByStandby.Sub(killedAt).Milliseconds(), byNode)
}

// The helpers below are shared by TestAgentFailover and
// TestAgentFailoverHolderCutOff (agent_failover_netns_test.go).

// agentFailoverTTL is failoverTTL, or MAOS_FAILOVER_LEASE_TTL if set.
func agentFailoverTTL(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("MAOS_FAILOVER_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		harness.NoErr(t, err)
		return d
	}
	return failoverTTL
}

// failoverNodeArgs runs a watcher of agent (the stub model, on channel ch,
// with the lease ttl) on n1 and n2; each node's prompt tags the answer
// with the node.
func failoverNodeArgs(t *testing.T, agent, ch string, ttl time.Duration) func(id string) []string {
	t.Helper()
	dir := t.TempDir()
	cfgOf := func(node string) string {
		p := filepath.Join(dir, node+".yaml")
		harness.NoErr(t, os.WriteFile(p, fmt.Appendf(nil, `agents:
  - id: %s
    role: oncall
    channels: [%s]
    command: [%q]
    timeout: 30s
    retries: 1
    context_messages: 0
    lease_ttl: %s
    prompt: "id: {{.Message.ID}} on %s\n{{.Message.Content.Text}}\n"
`, agent, ch, stubmodelBin, ttl, node), 0o644))
		return p
	}
	return func(id string) []string {
		if id == "n1" || id == "n2" {
			return []string{"--agents", cfgOf(id)}
		}
		return nil
	}
}

// awaitTakeover waits until standby's node holds agent's lease, and checks
// the takeover: a fence above first's, reason lapsed.
func awaitTakeover(t *testing.T, cl *client.Client, agent string, standby *harness.Node, first *api.AgentLease) *api.AgentLease {
	t.Helper()
	var taken *api.AgentLease
	harness.NoErr(t, harness.WaitFor(watcherWait, standby.ID+" takes the lease", func() error {
		l, err := agentLeaseOn(cl, agent)
		if err != nil {
			return err
		}
		if l.Holder.Node != standby.ID || l.Expired {
			return fmt.Errorf("lease %+v", l)
		}
		taken = l
		return nil
	}))
	if taken.Fence <= first.Fence || taken.Reason != api.LeaseReasonLapsed {
		t.Errorf("takeover %+v: want a fence above %d, reason lapsed", taken, first.Fence)
	}
	return taken
}

// agentLeaseOn reads agent's lease through cl, strongly.
func agentLeaseOn(cl *client.Client, agent string) (*api.AgentLease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return cl.AgentLease(ctx, agent, api.Strong)
}

// awaitPresence waits until who (through cl) shows agent served by
// servedBy with the standby standby.
func awaitPresence(t *testing.T, cl *client.Client, agent, servedBy, standby string) {
	t.Helper()
	harness.NoErr(t, harness.WaitFor(watcherWait, fmt.Sprintf("who shows %s served by %s, %s standing by", agent, servedBy, standby), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		p, err := cl.AgentPresence(ctx, agent)
		if err != nil {
			return err
		}
		if p.ServedBy != servedBy || p.Standby != api.NodeIDs(standby) {
			return fmt.Errorf("presence served_by %q standby %q", p.ServedBy, p.Standby)
		}
		return nil
	}))
}

// awaitHolderAndStandby waits until one watcher of agent holds its lease
// and another, on another node, stands by, and who shows both.
func awaitHolderAndStandby(t *testing.T, cl *client.Client, agent string) *api.AgentLease {
	t.Helper()
	var first *api.AgentLease
	harness.NoErr(t, harness.WaitFor(watcherWait, "a holder and a standby", func() error {
		l, err := agentLeaseOn(cl, agent)
		if err != nil {
			return err
		}
		if l.Expired || len(l.Standbys) != 1 || l.Standbys[0].Node == l.Holder.Node {
			return fmt.Errorf("lease %+v", l)
		}
		first = l
		return nil
	}))
	awaitPresence(t, cl, agent, first.Holder.Node, first.Standbys[0].Node)
	return first
}

// failoverMessages are total messages from pager to agent on ch.
func failoverMessages(agent, ch string, total int) []*api.Message {
	msgs := make([]*api.Message, total)
	for i := range msgs {
		msgs[i] = &api.Message{ID: fmt.Sprintf("msg-20261128-090000-pager-%08x", i+1), Channel: ch, From: "pager",
			To: api.Recipients{agent}, Content: api.Content{Text: fmt.Sprintf("incident %d", i+1)}}
	}
	return msgs
}

// startFailoverSender mails msgs through via, one every 100 ms, each
// retried through an election (bounded by SendWithRetry's attempts and a
// 60 s context). The function it returns waits for the sender and
// returns its failures.
func startFailoverSender(c *harness.Cluster, via *harness.Node, msgs []*api.Message) func() []error {
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr []error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for _, m := range msgs {
			<-tick.C
			sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			_, err := c.SendWithRetry(sctx, m, harness.SendOptions{Nodes: []*harness.Node{via}})
			cancel()
			if err != nil {
				sendMu.Lock()
				sendErr = append(sendErr, fmt.Errorf("%s: %w", m.ID, err))
				sendMu.Unlock()
			}
		}
	}()
	return func() []error {
		wg.Wait()
		sendMu.Lock()
		defer sendMu.Unlock()
		return sendErr
	}
}

// replyOf is agent's reply to m, read through n strongly.
func replyOf(n *harness.Node, agent string, m *api.Message) (*api.Message, error) {
	q, err := getMessage(n, m.ID)
	if err != nil {
		return nil, err
	}
	return getMessage(n, watcher.ReplyID(agent, q))
}

// awaitAnswers waits until each of msgs has agent's reply (read through n).
func awaitAnswers(t *testing.T, n *harness.Node, agent string, msgs []*api.Message, by string) {
	t.Helper()
	harness.NoErr(t, harness.WaitFor(watcherWait, fmt.Sprintf("%d answers from %s", len(msgs), by), func() error {
		for _, m := range msgs {
			if _, err := replyOf(n, agent, m); err != nil {
				return fmt.Errorf("%s: %w", m.ID, err)
			}
		}
		return nil
	}))
}

// failoverAnswers is who answered what in a failover test.
type failoverAnswers struct {
	replies map[string]*api.Message // by the question's id
	on      map[string]string       // the answering watcher's node, by the question's id
	byNode  map[string]int          // answers by node
	// firstBy and lastBy are the entry times of each node's earliest
	// and latest answers.
	firstBy, lastBy map[string]time.Time
}

// checkAnsweredOnce waits until every one of msgs has agent's reply (read
// through via) and every live node applied the same index, then checks
// that each reply comes from one of watchers (by its text) and that every
// live node stores exactly one reply to each message and nothing else on
// ch.
func checkAnsweredOnce(t *testing.T, c *harness.Cluster, via *harness.Node, agent, ch string, msgs []*api.Message, watchers ...*harness.Node) failoverAnswers {
	t.Helper()
	a := failoverAnswers{replies: map[string]*api.Message{}, on: map[string]string{}, byNode: map[string]int{},
		firstBy: map[string]time.Time{}, lastBy: map[string]time.Time{}}
	harness.NoErr(t, harness.WaitFor(2*watcherWait, "every message answered", func() error {
		for _, m := range msgs {
			if a.replies[m.ID] != nil {
				continue
			}
			r, err := replyOf(via, agent, m)
			if err != nil {
				return fmt.Errorf("%s: %w", m.ID, err)
			}
			a.replies[m.ID] = r
		}
		return nil
	}))
	_, err := c.WaitConverged()
	harness.NoErr(t, err)
	for _, m := range msgs {
		r := a.replies[m.ID]
		on := ""
		for _, n := range watchers {
			if r.Content.Text == "stub answer to "+m.ID+" on "+n.ID {
				on = n.ID
			}
		}
		if on == "" {
			t.Errorf("reply %s to %s says %q: from neither watcher", r.ID, m.ID, r.Content.Text)
			continue
		}
		a.on[m.ID] = on
		a.byNode[on]++
		if f := a.firstBy[on]; f.IsZero() || r.Timestamp.Before(f) {
			a.firstBy[on] = r.Timestamp
		}
		if r.Timestamp.After(a.lastBy[on]) {
			a.lastBy[on] = r.Timestamp
		}
	}
	for _, n := range c.Live() {
		stored, err := readChannel(n.Client(), ch, api.Local)
		harness.NoErr(t, err)
		answers := map[string][]string{}
		for _, m := range stored {
			if m.InReplyTo != "" {
				answers[m.InReplyTo] = append(answers[m.InReplyTo], m.ID)
			}
		}
		for _, m := range msgs {
			if got := answers[m.ID]; len(got) != 1 || got[0] != a.replies[m.ID].ID {
				t.Errorf("%s: replies to %s = %v, want exactly [%s]", n.ID, m.ID, got, a.replies[m.ID].ID)
			}
		}
		if len(stored) != 2*len(msgs) {
			t.Errorf("%s: channel %s holds %d messages, want %d questions and %d answers", n.ID, ch, len(stored), len(msgs), len(msgs))
		}
	}
	return a
}

// auditedTakeover is the audit's AGENT_TAKEOVER entry (read through cl)
// of taken, the lease the standby took from the holder of first (lapsed).
func auditedTakeover(t *testing.T, cl *client.Client, agent string, holder, standby *harness.Node, first, taken *api.AgentLease) *api.AuditEntry {
	t.Helper()
	actx, cancel := context.WithTimeout(context.Background(), readTimeout)
	page, err := cl.Audit(actx, 0, api.MaxPageLimit, api.Strong)
	cancel()
	harness.NoErr(t, err)
	var takeover *api.AuditEntry
	for i, ev := range page.Events {
		if ev.Label == "AGENT_TAKEOVER" {
			takeover = &page.Events[i]
		}
	}
	want := fmt.Sprintf("%s from %s/maosd (fence %d) to %s/maosd fence=%d: lapsed", agent, holder.ID, first.Fence, standby.ID, taken.Fence)
	if takeover == nil || !strings.Contains(takeover.Text, want) || !slices.Equal(takeover.To, []string{standby.ID}) {
		t.Fatalf("audit takeover = %+v, want %q", takeover, want)
	}
	return takeover
}
