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

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/transport"
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
	ttl := failoverTTL
	if v := os.Getenv("MAOS_FAILOVER_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		harness.NoErr(t, err)
		ttl = d
	}
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
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, NodeArgs: func(id string) []string {
		if id == "n1" || id == "n2" {
			return []string{"--agents", cfgOf(id)}
		}
		return nil
	}})
	n3 := c.Node("n3")
	cl := n3.Client()
	ctx := context.Background()
	leaseOn := func() (*fsm.AgentLease, error) {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		return cl.AgentLease(rctx, agent, transport.Strong)
	}

	// One holds the lease, the other stands by.
	var first *fsm.AgentLease
	harness.NoErr(t, harness.WaitFor(watcherWait, "a holder and a standby", func() error {
		l, err := leaseOn()
		if err != nil {
			return err
		}
		if l.Expired || len(l.Standbys) != 1 || l.Standbys[0].Node == l.Holder.Node {
			return fmt.Errorf("lease %+v", l)
		}
		first = l
		return nil
	}))
	holder, standby := c.Node(first.Holder.Node), c.Node(first.Standbys[0].Node)
	harness.NoErr(t, harness.WaitFor(watcherWait, "who shows the holder and the standby", func() error {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		p, err := cl.AgentPresence(rctx, agent)
		if err != nil {
			return err
		}
		if p.ServedBy != holder.ID || p.Standby != standby.ID {
			return fmt.Errorf("presence served_by %q standby %q", p.ServedBy, p.Standby)
		}
		return nil
	}))

	// The sender: total messages through n3, one every 100 ms, each
	// retried through an election (bounded by SendWithRetry's attempts
	// and a 60 s context).
	msgs := make([]*fsm.Message, total)
	for i := range msgs {
		msgs[i] = &fsm.Message{ID: fmt.Sprintf("msg-20261128-090000-pager-%08x", i+1), Channel: ch, From: "pager",
			To: fsm.Recipients{agent}, Content: fsm.Content{Text: fmt.Sprintf("incident %d", i+1)}}
	}
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
			sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			_, err := c.SendWithRetry(sctx, m, harness.SendOptions{Nodes: []*harness.Node{n3}})
			cancel()
			if err != nil {
				sendMu.Lock()
				sendErr = append(sendErr, fmt.Errorf("%s: %w", m.ID, err))
				sendMu.Unlock()
			}
		}
	}()
	replyOf := func(m *fsm.Message) (*fsm.Message, error) {
		q, err := getMessage(n3, m.ID)
		if err != nil {
			return nil, err
		}
		return getMessage(n3, watcher.ReplyID(agent, q))
	}
	harness.NoErr(t, harness.WaitFor(watcherWait, fmt.Sprintf("%d answers from %s", kill, holder.ID), func() error {
		for _, m := range msgs[:kill] {
			if _, err := replyOf(m); err != nil {
				return fmt.Errorf("%s: %w", m.ID, err)
			}
		}
		return nil
	}))
	wasLeader := false
	if l, err := c.Leader(); err == nil && l == holder {
		wasLeader = true
	}
	killedAt := time.Now()
	harness.NoErr(t, holder.Kill())

	// The standby takes over when the lease lapses.
	var taken *fsm.AgentLease
	harness.NoErr(t, harness.WaitFor(watcherWait, standby.ID+" takes the lease", func() error {
		l, err := leaseOn()
		if err != nil {
			return err
		}
		if l.Holder.Node != standby.ID || l.Expired {
			return fmt.Errorf("lease %+v", l)
		}
		taken = l
		return nil
	}))
	if taken.Fence <= first.Fence || taken.Reason != fsm.LeaseReasonLapsed {
		t.Errorf("takeover %+v: want a fence above %d, reason lapsed", taken, first.Fence)
	}

	// Every message answered, each once, on every live node.
	wg.Wait()
	for _, err := range sendErr {
		t.Errorf("send: %v", err)
	}
	replies := map[string]*fsm.Message{}
	harness.NoErr(t, harness.WaitFor(2*watcherWait, "every message answered", func() error {
		for _, m := range msgs {
			if replies[m.ID] != nil {
				continue
			}
			r, err := replyOf(m)
			if err != nil {
				return fmt.Errorf("%s: %w", m.ID, err)
			}
			replies[m.ID] = r
		}
		return nil
	}))
	_, err := c.WaitConverged()
	harness.NoErr(t, err)
	byNode := map[string]int{}
	var firstByStandby, lastByHolder time.Time
	for _, m := range msgs {
		r := replies[m.ID]
		on := ""
		for _, n := range []*harness.Node{holder, standby} {
			if r.Content.Text == "stub answer to "+m.ID+" on "+n.ID {
				on = n.ID
			}
		}
		if on == "" {
			t.Errorf("reply %s to %s says %q: from neither watcher", r.ID, m.ID, r.Content.Text)
			continue
		}
		byNode[on]++
		if on == standby.ID && (firstByStandby.IsZero() || r.Timestamp.Before(firstByStandby)) {
			firstByStandby = r.Timestamp
		}
		if on == holder.ID && r.Timestamp.After(lastByHolder) {
			lastByHolder = r.Timestamp
		}
	}
	for _, n := range c.Live() {
		stored, err := readChannel(n.Client(), ch, transport.Local)
		harness.NoErr(t, err)
		answers := map[string][]string{}
		for _, m := range stored {
			if m.InReplyTo != "" {
				answers[m.InReplyTo] = append(answers[m.InReplyTo], m.ID)
			}
		}
		for _, m := range msgs {
			if got := answers[m.ID]; len(got) != 1 || got[0] != replies[m.ID].ID {
				t.Errorf("%s: replies to %s = %v, want exactly [%s]", n.ID, m.ID, got, replies[m.ID].ID)
			}
		}
		if len(stored) != 2*total {
			t.Errorf("%s: channel %s holds %d messages, want %d questions and %d answers", n.ID, ch, len(stored), total, total)
		}
	}
	if byNode[holder.ID] < kill || byNode[standby.ID] == 0 {
		t.Errorf("answers by node %v: want at least %d by %s before the kill and some by %s after", byNode, kill, holder.ID, standby.ID)
	}

	// A late reply under the old fence is refused by it.
	last := msgs[total-1]
	q, err := getMessage(n3, last.ID)
	harness.NoErr(t, err)
	late := fsm.NewReply(q, agent, "late answer from the dead holder")
	late.ID = watcher.ReplyID(agent, q)
	sctx, cancel := context.WithTimeout(ctx, readTimeout)
	_, err = cl.SendFenced(sctx, late, first.Fence)
	cancel()
	if !errors.Is(err, fsm.ErrFenced) || !strings.Contains(err.Error(), fmt.Sprintf("fence %d is not the current lease's", first.Fence)) {
		t.Errorf("late reply under fence %d: %v, want refused by the fence", first.Fence, err)
	}

	// The audit records the takeover.
	actx, cancel := context.WithTimeout(ctx, readTimeout)
	page, err := cl.Audit(actx, 0, fsm.MaxPageLimit, transport.Strong)
	cancel()
	harness.NoErr(t, err)
	var takeover *transport.AuditEntry
	for i, ev := range page.Events {
		if ev.Label == "AGENT_TAKEOVER" {
			takeover = &page.Events[i]
		}
	}
	want := fmt.Sprintf("%s from %s/maosd (fence %d) to %s/maosd fence=%d: lapsed", agent, holder.ID, first.Fence, standby.ID, taken.Fence)
	if takeover == nil || !strings.Contains(takeover.Text, want) || !slices.Equal(takeover.To, []string{standby.ID}) {
		t.Fatalf("audit takeover = %+v, want %q", takeover, want)
	}
	// The fence's promise: nothing of the old holder after the takeover
	// (a reply of its in flight at the kill may commit just after it).
	if lastByHolder.After(takeover.Time) {
		t.Errorf("the killed %s's last reply is stamped %s, after the takeover at %s", holder.ID, lastByHolder, takeover.Time)
	}
	t.Logf("agent failover (lease_ttl %s, killed holder %s was the Raft leader: %v): kill → lease taken %d ms, kill → first answer by %s %d ms; answers %v",
		ttl, holder.ID, wasLeader, takeover.Time.Sub(killedAt).Milliseconds(), standby.ID, firstByStandby.Sub(killedAt).Milliseconds(), byNode)
}
