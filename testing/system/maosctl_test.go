package system

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// runCtl runs the built maosctl with args (bounded to 30 s) and returns its
// stdout; it fails the test if maosctl does not exit 0.
func runCtl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, maosctlBin, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("maosctl %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestMaosctlAgainstCluster runs the maosctl binary against a 3-node
// cluster: a send through a follower, a strong read through another node,
// and the cluster status.
func TestMaosctlAgainstCluster(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	leader, err := c.Leader()
	harness.NoErr(t, err)
	followers := c.Others(leader)
	if len(followers) != 2 {
		t.Fatalf("want 2 followers, have %d", len(followers))
	}
	follower, other := followers[0], followers[1]

	// A typo is refused, naming the name and what to do; once b is
	// registered the send is stored.
	if out, err := exec.Command(maosctlBin, "--addr", follower.APIAddr(), "send", "--from", "a", "--to", "b", "--channel", "c", "--text", "hi").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `agent "b" (not registered, never sent)`) || !strings.Contains(string(out), "404") {
		t.Errorf("send to b before it exists: %v, %s; want a 404 naming b", err, out)
	}
	runCtl(t, "--addr", follower.APIAddr(), "agents", "register", "b")
	out := runCtl(t, "--addr", follower.APIAddr(), "send", "--from", "a", "--to", "b", "--channel", "c", "--text", "hi")
	match := regexp.MustCompile(`^(msg-[0-9]{8}-[0-9]{6}-a-[0-9a-f]{8,}) seq=([0-9]+)\n$`).FindStringSubmatch(out)
	if match == nil {
		t.Fatalf("maosctl send printed %q, want \"ID seq=N\"", out)
	}
	id := match[1]
	seq, err := strconv.ParseUint(match[2], 10, 64)
	if err != nil || seq == 0 {
		t.Fatalf("maosctl send printed seq %q", match[2])
	}

	out = runCtl(t, "--addr", other.APIAddr(), "--json", "read", "--channel", "c", "--strong")
	var msgs []api.Message
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		t.Fatalf("maosctl --json read printed no JSON array: %v\n%s", err, out)
	}
	found := 0
	for _, m := range msgs {
		if m.ID != id {
			continue
		}
		found++
		if m.Seq != seq || m.Channel != "c" || m.From != "a" || !slices.Equal([]string(m.To), []string{"b"}) || m.Content.Text != "hi" {
			t.Errorf("read back %+v, sent id %s seq %d from a to b text hi", m, id, seq)
		}
	}
	if found != 1 || len(msgs) != 1 {
		t.Errorf("maosctl read through %s: %d messages, %d with id %s; want exactly that one:\n%s", other.ID, len(msgs), found, id, out)
	}

	for _, n := range c.Nodes() {
		out = runCtl(t, "--addr", n.APIAddr(), "cluster", "status", "--json")
		var st api.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("maosctl cluster status --json via %s printed no status object: %v\n%s", n.ID, err, out)
		}
		if st.NodeID != n.ID || st.APIAddr != n.APIAddr() || st.RaftAddr != n.RaftAddr() {
			t.Errorf("status via %s describes node %s api %s raft %s", n.ID, st.NodeID, st.APIAddr, st.RaftAddr)
		}
		if c.Node(st.LeaderID) == nil {
			t.Errorf("status via %s: leader %q is none of the nodes", n.ID, st.LeaderID)
		}
		voters := map[string]api.Voter{}
		for _, v := range st.Voters {
			if v.Suffrage == "voter" {
				voters[v.ID] = v
			}
		}
		if len(st.Voters) != 3 || len(voters) != 3 {
			t.Errorf("status via %s: want 3 voters, got %+v", n.ID, st.Voters)
		}
		for _, want := range c.Nodes() {
			v, ok := voters[want.ID]
			if !ok || v.RaftAddr != want.RaftAddr() || v.APIAddr != want.APIAddr() {
				t.Errorf("status via %s: voter %s is %+v, want raft %s api %s", n.ID, want.ID, v, want.RaftAddr(), want.APIAddr())
			}
		}
	}
	t.Logf("maosctl sent %s (seq %d) via follower %s, read it strongly via %s; 3 voters, leader %s",
		id, seq, follower.ID, other.ID, leader.ID)
}
