package system

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/watcher"
)

// watcherWait bounds each wait of the watcher test: an invocation takes
// the stub's 3 s, a restart a few seconds more.
const watcherWait = 60 * time.Second

// TestWatcherSurvivesSIGKILL runs a watcher agent inside n3 (maosd
// --agents) whose model CLI is the stub sleeping 3 s, sends it a message
// through n1, waits until n3 reports the agent WORKING on that message,
// SIGKILLs n3 mid-invocation and restarts it with the same arguments. The
// message must then be answered exactly once (the reply id derived from
// agent and message id, no other reply to it in the channel on any node),
// the replicated cursor must end past it, and a second message sent after
// the restart must be answered exactly once too: a crash neither loses a
// message nor answers it twice.
func TestWatcherSurvivesSIGKILL(t *testing.T) {
	const (
		agent = "worker"
		ch    = "sigkill"
		host  = "n3" // runs the watcher
	)
	cfg := filepath.Join(t.TempDir(), "agents.yaml")
	harness.NoErr(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`agents:
  - id: %s
    role: worker
    channels: [%s]
    command: [%q, "--sleep", "3s"]
    timeout: 60s
    retries: 0
    context_messages: 0
`, agent, ch, stubmodelBin)), 0o644))
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, NodeArgs: func(id string) []string {
		if id == host {
			return []string{"--agents", cfg}
		}
		return nil
	}})
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node(host)

	m1 := &api.Message{ID: "msg-watch-1", Channel: ch, From: "alice", To: api.Recipients{agent},
		Content: api.Content{Text: "first question, asked before the crash"}}
	sends := sendAll(t, c, []*api.Message{m1}, 30*time.Second, harness.SendOptions{Nodes: []*harness.Node{n1}})
	seq1 := sends[m1.ID].seq

	// The watcher's own node learns its presence first: WORKING on m1
	// means the stub is running.
	harness.NoErr(t, harness.WaitFor(watcherWait, agent+" WORKING on "+m1.ID+" on "+host, func() error {
		p, err := agentOn(n3, agent)
		if err != nil {
			return err
		}
		if p.Substate != api.SubstateWorking || !strings.Contains(p.Task, m1.ID) {
			return fmt.Errorf("presence %s/%s task %q", p.State, p.Substate, p.Task)
		}
		return nil
	}))
	harness.NoErr(t, n3.Kill())

	// Killed mid-invocation: no reply yet and the cursor is still before
	// m1, so what follows proves the restarted watcher took it up again.
	r1 := replyIDOf(t, n1, agent, m1.ID)
	if m, err := getMessage(n1, r1); err == nil {
		t.Fatalf("%s was already answered (%s at seq %d) when %s was killed: the kill was not mid-invocation", m1.ID, m.ID, m.Seq, host)
	} else if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("get %s on n1: %v", r1, err)
	}
	if cur := cursorOf(t, n1, agent); cur >= seq1 {
		t.Fatalf("cursor of %s is %d before the restart, already at or past %s (seq %d)", agent, cur, m1.ID, seq1)
	}
	harness.NoErr(t, n3.Restart())
	harness.NoErr(t, c.WaitReady())

	waitReply(t, n2, agent, m1)
	waitCursor(t, n1.Client(), agent, seq1)

	m2 := &api.Message{ID: "msg-watch-2", Channel: ch, From: "bob", To: api.Recipients{agent},
		Content: api.Content{Text: "second question, asked after the restart"}}
	for id, s := range sendAll(t, c, []*api.Message{m2}, 30*time.Second, harness.SendOptions{Nodes: []*harness.Node{n2}}) {
		sends[id] = s
	}
	waitReply(t, n1, agent, m2)
	waitCursor(t, n2.Client(), agent, sends[m2.ID].seq)

	// Exactly one reply each, on every node: the channel holds the two
	// questions and the two answers, nothing else.
	_, err := c.WaitConverged()
	harness.NoErr(t, err)
	for _, n := range c.Nodes() {
		msgs, err := readChannel(n.Client(), ch, api.Local)
		harness.NoErr(t, err)
		replies := map[string][]string{}
		var ids []string
		for _, m := range msgs {
			ids = append(ids, m.ID)
			if m.InReplyTo != "" {
				replies[m.InReplyTo] = append(replies[m.InReplyTo], m.ID)
			}
		}
		for _, q := range []*api.Message{m1, m2} {
			if got, want := replies[q.ID], replyIDOf(t, n, agent, q.ID); len(got) != 1 || got[0] != want {
				t.Errorf("%s: replies to %s = %v, want exactly [%s]", n.ID, q.ID, got, want)
			}
		}
		if len(msgs) != 4 {
			t.Errorf("%s: channel %s holds %d messages %v, want the 2 questions and their 2 replies", n.ID, ch, len(msgs), ids)
		}
	}
	t.Logf("%s killed while %s ran on %s (seq %d); after the restart it was answered once, then %s too",
		host, agent, m1.ID, seq1, m2.ID)
}

// replyIDOf is the id of agent's reply to the message id as n stores it
// (watcher.ReplyID takes the stored timestamp).
func replyIDOf(t *testing.T, n *harness.Node, agent, id string) string {
	t.Helper()
	m, err := getMessage(n, id)
	harness.NoErr(t, err)
	return watcher.ReplyID(agent, m)
}

// getMessage reads one message by id from n, strongly.
func getMessage(n *harness.Node, id string) (*api.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return n.Client().Message(ctx, id, api.Strong)
}

// cursorOf reads agent's watcher cursor from n, strongly.
func cursorOf(t *testing.T, n *harness.Node, agent string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	cur, err := n.Client().Cursor(ctx, agent, api.Strong)
	harness.NoErr(t, err)
	return cur.Seq
}

// waitReply polls n until agent's reply to q exists, then checks it is
// the stub's answer, addressed back to q's sender in q's channel.
func waitReply(t *testing.T, n *harness.Node, agent string, q *api.Message) {
	t.Helper()
	id := replyIDOf(t, n, agent, q.ID)
	var r *api.Message
	harness.NoErr(t, harness.WaitFor(watcherWait, fmt.Sprintf("%s's reply %s to %s on %s", agent, id, q.ID, n.ID), func() error {
		var err error
		r, err = getMessage(n, id)
		return err
	}))
	if r.InReplyTo != q.ID || r.From != agent || r.Channel != q.Channel || r.Type != "response" ||
		len(r.To) != 1 || r.To[0] != q.From || r.Content.Text != "stub answer to "+q.ID {
		t.Errorf("reply %s: in_reply_to %q from %q channel %q type %q to %v text %q; want a response to %s from %s in %s to %s saying %q",
			id, r.InReplyTo, r.From, r.Channel, r.Type, r.To, r.Content.Text, q.ID, agent, q.Channel, q.From, "stub answer to "+q.ID)
	}
}

// waitCursor polls the node of cl until agent's cursor is at or past seq.
func waitCursor(t *testing.T, cl *client.Client, agent string, seq uint64) {
	t.Helper()
	harness.NoErr(t, harness.WaitFor(watcherWait, fmt.Sprintf("%s's cursor to pass seq %d on %s", agent, seq, cl.Addr()), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		cur, err := cl.Cursor(ctx, agent, api.Strong)
		if err != nil {
			return err
		}
		if cur.Seq < seq {
			return fmt.Errorf("cursor at %d", cur.Seq)
		}
		return nil
	}))
}
