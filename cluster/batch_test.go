package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/fsm"
)

// Many concurrent writes through the followers (forwarded in batches),
// each message sent twice at once through different followers: every
// send is acknowledged, both sends of a message answer the same seq, each
// message is stored once with a seq of its own, and every node holds the
// same state.
func TestConcurrentForwardedSendsAreStoredOnce(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	var followers []*clustertest.Node
	for _, n := range c.Nodes {
		if !n.IsLeader() {
			followers = append(followers, n)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("%d followers, want 2", len(followers))
	}
	const msgs = 48
	seqs := make([][2]uint64, msgs)
	var wg sync.WaitGroup
	errs := make(chan error, 2*msgs)
	for i := range msgs {
		m := clustertest.Msg("codex", "batch", fmt.Sprintf("message %d", i))
		for k, f := range followers {
			wg.Go(func() {
				res, err := f.Client.Send(ctx, m)
				if err != nil {
					errs <- fmt.Errorf("send %d through %s: %w", i, f.ID(), err)
					return
				}
				seqs[i][k] = res.Seq
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	seen := map[uint64]int{}
	for i, s := range seqs {
		if s[0] != s[1] {
			t.Errorf("message %d answered seq %d and %d; want one seq for both sends", i, s[0], s[1])
		}
		if j, dup := seen[s[0]]; dup {
			t.Errorf("messages %d and %d share seq %d", j, i, s[0])
		}
		seen[s[0]] = i
	}
	page, err := c.Leader().Client.ChannelPage(ctx, "batch", 0, 1000, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != msgs {
		t.Errorf("the channel holds %d messages, want %d", len(page.Messages), msgs)
	}
	clustertest.WaitFor(t, 10*time.Second, "identical state on every node", func() bool {
		var dumps []string
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

// A leader that loses its quorum with a batch in flight fails every entry
// of it with an error a follower retries (5xx: not final), and a retry of
// the same entries once a quorum is back stores each message once.
func TestBatchOnALeaderLosingQuorum(t *testing.T) {
	// A long lease keeps the leader leading for a while after its
	// followers stop, so the batch meets a leader that cannot commit.
	slow := clustertest.WithConfig(func(c *cluster.Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
		c.ApplyTimeout = 10 * time.Second
	})
	c := clustertest.New(t, 3, slow)
	ctx := clustertest.Context(t)
	l := c.Leader()
	var entries [][]byte
	for i := range 5 {
		e, err := fsm.Encode(api.OpSend, time.Now().UnixNano(), api.SendCommand{Message: *clustertest.Msg("codex", "lost", fmt.Sprintf("m%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	var stopped []*clustertest.Node
	for _, n := range c.Nodes {
		if n != l {
			n.Stop()
			stopped = append(stopped, n)
		}
	}
	outs, err := l.Client.ApplyEntries(ctx, entries)
	switch {
	case err != nil:
		// The leader stepped down before the batch came: refused whole.
		if !errors.Is(err, api.ErrNotLeader) {
			t.Fatalf("whole batch: %v; want not_leader", err)
		}
	default:
		t.Logf("entries' errors: %v", outs[0].Err)
		for i, o := range outs {
			var apiErr *api.APIError
			if !errors.As(o.Err, &apiErr) || apiErr.Status < 500 {
				t.Errorf("entry %d: result %s, error %v; want a 5xx error (outcome unknown, retried)", i, o.Result, o.Err)
			}
		}
	}
	n := stopped[0]
	back := clustertest.Start(t, n.ID(), n.Dir, n.Addr, nil, clustertest.SameRaftAddr(n), slow)
	var leader *clustertest.Node
	clustertest.WaitFor(t, 30*time.Second, "a leader again", func() bool {
		for _, n := range []*clustertest.Node{l, back} {
			if n.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	outs, err = leader.Client.ApplyEntries(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if o.Err != nil {
			t.Errorf("retried entry %d: %v", i, o.Err)
		}
	}
	page, err := leader.Client.ChannelPage(ctx, "lost", 0, 100, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Messages {
		got = append(got, m.Content.Text)
	}
	if strings.Join(got, ",") != "m0,m1,m2,m3,m4" {
		t.Errorf("channel holds %q, want each of m0..m4 once, in order", got)
	}
}
