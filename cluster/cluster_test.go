package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/fsm"
)

// Sends through a follower commit once and read back identically, in the
// same seq order, from every node.
func TestSendThroughFollowerReadsSameLogEverywhere(t *testing.T) {
	c := clustertest.New(t, 3)
	f := c.Follower()
	ctx := clustertest.Context(t)
	var ids []string
	for i := range 20 {
		res, err := f.Client.Send(ctx, clustertest.Msg("codex", "paper", fmt.Sprintf("hello %d", i)))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		ids = append(ids, res.ID)
	}
	var want []string
	for _, n := range c.Nodes {
		page, err := n.Client.ChannelPage(ctx, "paper", 0, 1000, api.Strong)
		if err != nil {
			t.Fatalf("%s strong read: %v", n.ID(), err)
		}
		var got []string
		for _, m := range page.Messages {
			got = append(got, fmt.Sprintf("%d:%s", m.Seq, m.ID))
		}
		if len(page.Messages) != len(ids) {
			t.Fatalf("%s has %d messages, want %d", n.ID(), len(page.Messages), len(ids))
		}
		for i, m := range page.Messages {
			if m.ID != ids[i] {
				t.Fatalf("%s message %d is %s, want %s", n.ID(), i, m.ID, ids[i])
			}
		}
		if want == nil {
			want = got
		} else if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s log %v differs from %v", n.ID(), got, want)
		}
	}
	// Local reads converge to the same state: compare the canonical dumps.
	var dumps []string
	clustertest.WaitFor(t, 10*time.Second, "identical state on every node", func() bool {
		dumps = dumps[:0]
		for _, n := range c.Nodes {
			var b bytes.Buffer
			if err := n.FSM().Dump(&b); err != nil {
				t.Fatal(err)
			}
			dumps = append(dumps, b.String())
		}
		return dumps[0] == dumps[1] && dumps[1] == dumps[2]
	})
}

// A retried send (same id, same content) through another node returns the
// original seq and stores nothing; other content under the id is a 409.
func TestRetriedSendIsStoredOnce(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	m := clustertest.Msg("claude", "ops", "deploy?")
	first, err := c.Follower().Client.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Leader().Client.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if again.Seq != first.Seq || again.ID != first.ID {
		t.Fatalf("retry got %+v, want %+v", again, first)
	}
	other := *m
	other.Content.Text = "something else"
	_, err = c.Follower().Client.Send(ctx, &other)
	if !errors.Is(err, api.ErrConflict) {
		t.Fatalf("reuse of id with other content: got %v, want conflict", err)
	}
	chans, err := c.Leader().Client.Channels(ctx, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if len(chans) != 1 || chans[0].Count != 1 {
		t.Fatalf("channels = %+v, want ops with 1 message", chans)
	}
}

// A strong read through a follower sees a send acknowledged just before it.
func TestStrongReadThroughFollowerSeesAcknowledgedSend(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	l, f := c.Leader(), c.Follower()
	for i := range 10 {
		res, err := l.Client.Send(ctx, clustertest.Msg("a", "c", fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Client.Message(ctx, res.ID, api.Strong)
		if err != nil {
			t.Fatalf("strong get %s via follower: %v", res.ID, err)
		}
		if got.Seq != res.Seq {
			t.Fatalf("seq %d, want %d", got.Seq, res.Seq)
		}
	}
	if _, err := f.Client.Message(ctx, "msg-nope", api.Strong); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("missing id: got %v, want not found", err)
	}
}

// A node restarted from its data dir, with no join, keeps its state and
// catches up on what it missed.
func TestRestartedNodeCatchesUp(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	f := c.Follower()
	if _, err := f.Client.Send(ctx, clustertest.Msg("a", "c", "before")); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, "follower applied the first send", func() bool {
		p, _ := f.FSM().ChannelPage("c", 0, 10)
		return len(p.Messages) == 1
	})
	f.Stop()
	res, err := c.Leader().Client.Send(ctx, clustertest.Msg("a", "c", "while down"))
	if err != nil {
		t.Fatal(err)
	}
	r := clustertest.Start(t, f.ID(), f.Dir, f.Addr, nil, clustertest.SameRaftAddr(f))
	c.Replace(f, r)
	clustertest.WaitFor(t, 20*time.Second, "restarted node caught up", func() bool {
		m, err := r.FSM().Message(res.ID)
		return err == nil && m.Seq == res.Seq
	})
	if p, _ := r.FSM().ChannelPage("c", 0, 10); len(p.Messages) != 2 {
		t.Fatalf("restarted node has %d messages, want 2", len(p.Messages))
	}
}

// A second process (here: a second Open) on the same data dir fails at once.
func TestSecondOpenOfDataDirFails(t *testing.T) {
	dir := t.TempDir()
	n := clustertest.Start(t, "solo", dir, "", nil)
	_ = n
	_, err := cluster.Open(clustertest.Config("solo", dir, "127.0.0.1:9"))
	if !errors.Is(err, cluster.ErrDataDirLocked) {
		t.Fatalf("second open: got %v, want ErrDataDirLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the data dir", err)
	}
}

// With no quorum, a send through a follower gives up after RetryTimeout
// with an outcome-unknown error that says retrying is safe; once quorum is
// back, retrying the same id stores it exactly once.
func TestSendWithoutQuorumIsOutcomeUnknownAndRetrySafe(t *testing.T) {
	shortRetry := clustertest.WithConfig(func(c *cluster.Config) { c.RetryTimeout = time.Second })
	c := clustertest.New(t, 3, shortRetry)
	ctx := clustertest.Context(t)
	l := c.Leader()
	var survivor, other *clustertest.Node
	for _, n := range c.Nodes {
		if n == l {
			continue
		}
		if survivor == nil {
			survivor = n
		} else {
			other = n
		}
	}
	l.Stop()
	other.Stop()
	m := clustertest.Msg("a", "c", "in the dark")
	_, err := survivor.Client.Send(ctx, m)
	if !errors.Is(err, api.ErrOutcomeUnknown) {
		t.Fatalf("send without quorum: got %v, want outcome unknown", err)
	}
	if !strings.Contains(err.Error(), "retrying with the same id is safe") {
		t.Fatalf("error %q does not say retrying is safe", err)
	}
	// Reads that need the leader fail as no leader.
	if _, err := survivor.Client.Channels(ctx, api.Strong); !errors.Is(err, api.ErrNoLeader) {
		t.Fatalf("strong read without quorum: got %v, want no leader", err)
	}
	if err := survivor.Client.Ready(ctx); !errors.Is(err, api.ErrNotReady) {
		t.Fatalf("readyz with no quorum: got %v, want not ready", err)
	}
	clustertest.Start(t, other.ID(), other.Dir, other.Addr, nil, clustertest.SameRaftAddr(other), shortRetry)
	// A client retries an unknown outcome with the same message, as the
	// error tells it to, until the cluster answers.
	var res *api.SendResponse
	clustertest.WaitFor(t, 30*time.Second, "the retried send to commit", func() bool {
		res, err = survivor.Client.Send(ctx, m)
		if err != nil && !errors.Is(err, api.ErrOutcomeUnknown) {
			t.Fatalf("retry: %v", err)
		}
		return err == nil
	})
	page, err := survivor.Client.ChannelPage(ctx, "c", 0, 100, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].Seq != res.Seq {
		t.Fatalf("after retries the channel holds %d messages, want exactly the one at %d", len(page.Messages), res.Seq)
	}
}

// Join, status, transfer, snapshot and remove through the API of any node.
func TestClusterOperations(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	f := c.Follower()
	st, err := f.Client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Leader()
	if st.State != "follower" || st.LeaderID != l.ID() || st.LeaderAPIAddr != l.Addr || len(st.Voters) != 3 {
		t.Fatalf("follower status = %+v", st)
	}
	// The last join's registration may still be on its way to f.
	clustertest.WaitFor(t, 10*time.Second, "every voter's addresses in the follower's status", func() bool {
		st, err = f.Client.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range st.Voters {
			if v.APIAddr == "" || v.RaftAddr == "" || v.Suffrage != "voter" {
				return false
			}
		}
		return true
	})
	// Re-joining a member is harmless.
	if err := f.Client.Join(ctx, api.JoinRequest{NodeID: f.ID(), RaftAddr: f.RaftAddr(), APIAddr: f.Addr}); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	if l.Voters() != 3 {
		t.Fatalf("voters after rejoin = %d", l.Voters())
	}

	tr, err := f.Client.TransferLeadership(ctx, f.ID())
	if err != nil {
		t.Fatalf("transfer via follower: %v", err)
	}
	if tr.LeaderID != f.ID() {
		t.Fatalf("transfer went to %s, want %s", tr.LeaderID, f.ID())
	}
	// Transferring to the node that already leads changes nothing.
	if again, err := f.Client.TransferLeadership(ctx, tr.LeaderID); err != nil || again.LeaderID != tr.LeaderID {
		t.Fatalf("transfer to the current leader = %+v, %v", again, err)
	}
	if _, err := f.Client.TransferLeadership(ctx, "nobody"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("transfer to unknown node: got %v", err)
	}

	if _, err := l.Client.Send(ctx, clustertest.Msg("a", "c", "x")); err != nil {
		t.Fatal(err)
	}
	snap, err := l.Client.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Index == 0 || snap.ID == "" || snap.NodeID != l.ID() {
		t.Fatalf("snapshot = %+v", snap)
	}

	var victim *clustertest.Node
	for _, n := range c.Nodes {
		if n.ID() != c.Leader().ID() {
			victim = n
			break
		}
	}
	if err := l.Client.Remove(ctx, victim.ID()); err != nil {
		t.Fatalf("remove %s: %v", victim.ID(), err)
	}
	clustertest.WaitFor(t, 10*time.Second, "two voters", func() bool { return c.Leader().Voters() == 2 })
	if err := l.Client.Remove(ctx, "ghost"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("remove unknown: got %v", err)
	}
	// A fresh node joins through a follower.
	nn := clustertest.Start(t, "n9", filepath.Join(t.TempDir(), "n9"), "", []string{c.Follower().Addr})
	clustertest.WaitFor(t, 20*time.Second, "n9 ready as a voter", func() bool {
		return nn.Ready(ctx) == nil && c.Leader().Voters() == 3
	})
}

// A generic command applied through one follower is read back strongly
// through the other: Apply forwards, Linearize waits for the read index.
func TestApplyThroughFollowerAndStrongReadElsewhere(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	l := c.Leader()
	var fs []*clustertest.Node
	for _, n := range c.Nodes {
		if n != l {
			fs = append(fs, n)
		}
	}
	got, err := fs[0].Client.SetConfig(ctx, "strict_senders", true)
	if err != nil || !got.StrictSenders {
		t.Fatalf("set config through a follower = %+v, %v", got, err)
	}
	cfg, err := fs[1].Client.Config(ctx, api.Strong)
	if err != nil || !cfg.StrictSenders {
		t.Fatalf("strong read of config on the other follower = %+v, %v", cfg, err)
	}
	if _, err := fs[1].Client.SetConfig(ctx, "nonsense", 1); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("unknown setting: got %v, want invalid", err)
	}
	// A command the state machine refuses at apply (not caught by a
	// handler) comes back as its error, through the leader and through a
	// follower's forward alike.
	for _, n := range c.Nodes {
		bad := api.SetConfigCommand{Key: "strict_senders", Value: []byte(`"yes"`)}
		if _, err := n.Apply(ctx, api.OpSetConfig, bad); !errors.Is(err, api.ErrInvalid) {
			t.Fatalf("%s: apply-time refusal: got %v, want invalid", n.ID(), err)
		}
	}
	page, err := fs[1].State().Audit(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The joins of n2 and n3 are audited too (AuditNode); of the rest,
	// one CONFIG line.
	var rest []api.AuditEvent
	for _, ev := range page.Events {
		if ev.Kind != fsm.AuditNode {
			rest = append(rest, ev)
		}
	}
	if len(rest) != 1 || rest[0].Label != "CONFIG" {
		t.Fatalf("audit = %+v, want one CONFIG event besides the node events", page.Events)
	}
}

// A stream opened on one node carries a message sent through another as
// soon as its own node applies it.
func TestStreamOnAnotherNode(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	a, b := c.Nodes[0], c.Nodes[2]
	sent := make(chan *api.SendResponse, 1)
	errDone := errors.New("done")
	err := b.Client.Stream(ctx, api.StreamQuery{Channel: "live"}, func(ev api.StreamEvent) error {
		if ev.Ready {
			res, err := a.Client.Send(ctx, clustertest.Msg("codex", "live", "pushed"))
			if err != nil {
				return err
			}
			sent <- res
			return nil
		}
		res := <-sent
		if ev.Seq != res.Seq || ev.Message.ID != res.ID {
			t.Errorf("stream on %s got %d %s, want %d %s", b.ID(), ev.Seq, ev.Message.ID, res.Seq, res.ID)
		}
		return errDone
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream: %v", err)
	}
}

// A message near the body limit is forwarded by a follower as one encoded
// entry larger than the control-body ceiling: the leader's ceiling for
// forwarded writes must take it.
func TestLargeSendThroughFollower(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	m := clustertest.Msg("a", "c", strings.Repeat("x", api.DefaultMaxBytes-1024))
	res, err := c.Follower().Client.Send(ctx, m)
	if err != nil {
		t.Fatalf("send of %d bytes through a follower: %v", len(m.Content.Text), err)
	}
	got, err := c.Leader().Client.Message(ctx, res.ID, api.Strong)
	if err != nil || got.Content.Text != m.Content.Text {
		t.Fatalf("stored message: %v (text equal: %v)", err, err == nil && got.Content.Text == m.Content.Text)
	}
}

// The clean-close marker exists only while the node is stopped after a
// clean Close: a crash while it runs leaves none, so the next start reads
// every page.
func TestCleanMarkerLifecycle(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, cluster.CleanMarkerFile)
	exists := func() bool {
		_, err := os.Stat(marker)
		return err == nil
	}
	n := clustertest.Start(t, "n1", dir, "", nil)
	if exists() {
		t.Fatal("a fresh node wrote the clean marker while running")
	}
	n.Stop()
	if !exists() {
		t.Fatal("Close left no clean marker")
	}
	n = clustertest.Start(t, "n1", dir, "", nil, clustertest.SameRaftAddr(n))
	if exists() {
		t.Fatal("the clean marker survived the restart: a crash now would skip the full check")
	}
	n.Stop()
	if !exists() {
		t.Fatal("the second Close left no clean marker")
	}
}

// A cluster whose nodes each bind Raft on their own loopback IP forms,
// replicates, and reports the bound address.
func TestClusterOnDistinctLoopbackIPs(t *testing.T) {
	ips := []string{"127.0.0.31", "127.0.0.32", "127.0.0.33"}
	cluster.NeedLoopbackIPs(t, ips...)
	c := clustertest.New(t, len(ips), clustertest.WithConfig(func(cfg *cluster.Config) {
		cfg.RaftAddr = ips[cfg.NodeID[1]-'1'] + ":0" // n1, n2, n3
	}))
	for i, n := range c.Nodes {
		if host, port, _ := net.SplitHostPort(n.RaftAddr()); host != ips[i] || port == "0" || n.RaftBindAddr() != n.RaftAddr() {
			t.Fatalf("%s: raft addr %s bind %s, want %s with a real port", n.ID(), n.RaftAddr(), n.RaftBindAddr(), ips[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Follower().Client.Send(ctx, clustertest.Msg("codex", "ips", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, "the send applied on every node", func() bool {
		for _, n := range c.Nodes {
			if n.FSM().AppliedIndex() < res.Seq {
				return false
			}
		}
		return true
	})
}

// Replication never takes raft's pipelined path: its two unbuffered
// channels can deadlock after a follower's Success=false, leaving a
// follower that gets heartbeats but no entries and a Shutdown that never
// returns (see the comment where node.go builds the transport).
func TestRaftTransportDoesNotPipeline(t *testing.T) {
	c := clustertest.New(t, 1)
	n := c.Nodes[0]
	_, err := n.RaftTransport().AppendEntriesPipeline("peer", "127.0.0.1:1")
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline = %v, want raft.ErrPipelineReplicationNotSupported", err)
	}
}
