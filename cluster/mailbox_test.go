package cluster_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
)

// A send through a follower to role:reviewer lands in every reviewer's
// inbox, and each reviewer reads its inbox from another node; read marks
// and receipts made on one node are seen on the others.
func TestRoleSendThroughFollowerReadFromOtherNodes(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	sender := c.Follower()
	var others []*clustertest.Node
	for _, n := range c.Nodes {
		if n != sender {
			others = append(others, n)
		}
	}
	// Register through different nodes: every write reaches the leader.
	for i, a := range []api.RegisterAgentCommand{
		{ID: "reviewer_1", Role: "reviewer", Capabilities: []string{"go"}},
		{ID: "reviewer_2", Role: "reviewer"},
		{ID: "engineer_1", Role: "engineer"},
	} {
		if _, err := c.Nodes[i%3].Client.RegisterAgent(ctx, a); err != nil {
			t.Fatalf("register %s through %s: %v", a.ID, c.Nodes[i%3].ID(), err)
		}
	}

	m := clustertest.Msg("codex", "review", "please review the retry logic")
	m.To = api.Recipients{"role:reviewer"}
	res, err := sender.Client.Send(ctx, m)
	if err != nil {
		t.Fatalf("send through follower %s: %v", sender.ID(), err)
	}

	for i, reviewer := range []string{"reviewer_1", "reviewer_2"} {
		node := others[i]
		page, err := node.Client.Inbox(ctx, reviewer, api.InboxQuery{Unread: true}, api.Strong)
		if err != nil {
			t.Fatalf("%s's inbox on %s: %v", reviewer, node.ID(), err)
		}
		if len(page.Messages) != 1 || page.Messages[0].ID != res.ID || page.Messages[0].Seq != res.Seq || page.Messages[0].Read {
			t.Fatalf("%s's inbox on %s = %+v, want message %s unread", reviewer, node.ID(), page.Messages, res.ID)
		}
		if got := page.Messages[0].Recipients; !slices.Equal(got, []string{"reviewer_1", "reviewer_2"}) {
			t.Errorf("recipients on %s = %q", node.ID(), got)
		}
		counts, err := node.Client.InboxCounts(ctx, reviewer, api.Strong)
		if err != nil || counts.Total != 1 || counts.Unread != 1 {
			t.Errorf("%s's counts on %s = %+v, %v", reviewer, node.ID(), counts, err)
		}
	}
	if counts, err := others[0].Client.InboxCounts(ctx, "engineer_1", api.Strong); err != nil || counts.Total != 0 {
		t.Errorf("engineer_1 got the reviewers' message: %+v, %v", counts, err)
	}

	// reviewer_1 marks it read through one node; the sender sees the read
	// receipt through another.
	if _, err := others[0].Client.MarkRead(ctx, "reviewer_1", res.ID, 0); err != nil {
		t.Fatalf("mark read: %v", err)
	}
	rc, err := others[1].Client.Receipts(ctx, res.ID, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, r := range rc.Receipts {
		states[r.Agent] = r.State
	}
	if states["reviewer_1"] != api.ReceiptRead || states["reviewer_2"] != api.ReceiptDelivered || len(states) != 2 {
		t.Errorf("receipts = %v, want reviewer_1 read and reviewer_2 delivered", states)
	}

	// Every node converges on the same inboxes with local reads.
	clustertest.WaitFor(t, 10*time.Second, "reviewer_1's read mark on every node", func() bool {
		for _, n := range c.Nodes {
			counts, err := n.Client.InboxCounts(ctx, "reviewer_1", api.Local)
			if err != nil || counts.Unread != 0 || counts.Total != 1 {
				return false
			}
		}
		return true
	})

	// A role nobody has is refused with 404 through the follower too (the
	// leader's apply decides it, naming the role), and nothing is stored.
	bad := clustertest.Msg("codex", "review", "anyone?")
	bad.To = api.Recipients{"role:nobody"}
	if _, err := sender.Client.Send(ctx, bad); !isAPI(err, api.CodeNotFound) || !strings.Contains(err.Error(), `role "nobody" (no agent has it)`) {
		t.Errorf("send to role:nobody = %v, want 404 not_found naming the role", err)
	}
	if _, err := c.Leader().Client.Message(ctx, bad.ID, api.Strong); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("refused message is stored: %v", err)
	}
}

// The leader trims channels with a retention policy on its own, and every
// node removes the same messages.
func TestLeaderTrimsRetention(t *testing.T) {
	cluster.SetTrimInterval(t, 50*time.Millisecond)
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	f := c.Follower()
	for i := range 5 {
		if _, err := f.Client.Send(ctx, clustertest.Msg("codex", "ops", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// The policy is set with max_messages 5, so the immediate trim keeps
	// all; two more sends push the channel over, and only the leader's
	// periodic trim can bring it back to 5.
	if _, err := f.Client.SetRetention(ctx, "ops", "", 5); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := f.Client.Send(ctx, clustertest.Msg("codex", "ops", fmt.Sprint("late", i))); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.WaitFor(t, 20*time.Second, "every node trimmed ops to 5 messages", func() bool {
		for _, n := range c.Nodes {
			chans, err := n.FSM().Channels()
			if err != nil || len(chans) != 1 || chans[0].Count != 5 {
				return false
			}
		}
		return true
	})
	r, err := c.Nodes[0].Client.Retention(ctx, "ops", api.Strong)
	if err != nil || r.Trimmed != 2 {
		t.Fatalf("retention = %+v, %v; want 2 trimmed", r, err)
	}
}

func isAPI(err error, code string) bool {
	var apiErr *api.APIError
	return errors.As(err, &apiErr) && apiErr.Code == code
}
