package harness

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeCluster is a cluster of n fake maosd processes (see fakeMaosd),
// added one by one as NewCluster would, without waiting for a leader
// (the fakes serve no API).
func fakeCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	exe, err := os.Executable()
	NoErr(t, err)
	c, err := newCluster(Options{Maosd: exe, Nodes: n, Env: []string{fakeEnv + "=run"}, Name: t.Name(),
		WaitTimeout: 300 * time.Millisecond, StartTimeout: 20 * time.Second,
		NodeArgs: func(id string) []string { return []string{"--agents", "agents-" + id + ".yaml"} }})
	NoErr(t, err)
	c.t = t
	t.Cleanup(c.Close)
	for range n {
		_, err := c.AddNode()
		NoErr(t, err)
	}
	return c
}

// startHeader is the command line of node n's last start, from its log.
func startHeader(t *testing.T, n *Node) string {
	t.Helper()
	starts := strings.Split(n.LogTail(1000), "=== harness: start #")
	head, _, _ := strings.Cut(starts[len(starts)-1], "\n")
	return head
}

// A removed node is no member any more, but Close still stops it; the
// next node gets a new id, joins through a member that runs, and a
// replacement gets the NodeArgs of the node it replaces.
func TestRemovedNodesAndNewIDs(t *testing.T) {
	c := fakeCluster(t, 3)
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	if !strings.Contains(startHeader(t, n2), "--join "+n1.APIAddr()) {
		t.Fatalf("n2 did not join through n1: %s", startHeader(t, n2))
	}
	NoErr(t, n1.Kill())
	// What RemoveNode does once the leader dropped n3 (the fakes serve no
	// API to ask), with n3 still running.
	c.mu.Lock()
	c.nodes = slices.DeleteFunc(c.nodes, func(n *Node) bool { return n == n3 })
	c.removed = append(c.removed, n3)
	c.mu.Unlock()
	if got := nodeIDs(c.Nodes()); got != "[n1 n2]" {
		t.Errorf("members after removing n3: %s", got)
	}
	if got := nodeIDs(c.Removed()); got != "[n3]" {
		t.Errorf("Removed() = %s", got)
	}
	if slices.Contains(c.Live(), n3) {
		t.Error("a removed node is still live for the clients")
	}

	n4, err := c.addNode("n1")
	NoErr(t, err)
	head := startHeader(t, n4)
	if n4.ID != "n4" || !strings.Contains(head, "--join "+n2.APIAddr()) || !strings.Contains(head, "--agents agents-n1.yaml") {
		t.Fatalf("the node added after a removal: %s, started with %s; want n4 joining through n2 (n1 is down) with n1's agents", n4.ID, head)
	}
	n5, err := c.AddNode()
	NoErr(t, err)
	if !strings.Contains(startHeader(t, n5), "--agents agents-n5.yaml") {
		t.Errorf("AddNode gave n5 other args: %s", startHeader(t, n5))
	}
	if c.argsID(n4) != "n1" || c.argsID(n5) != "n5" {
		t.Errorf("the args of n4 and n5 come from %s and %s, want n1 (whom n4 replaced) and n5", c.argsID(n4), c.argsID(n5))
	}

	c.Close()
	if n3.Running() {
		t.Error("Close left the removed n3 running")
	}
}

// RemoveNode, ReplaceNode and WaitHealthy fail, saying why, when they
// cannot do their work.
func TestMembershipRefusals(t *testing.T) {
	c := fakeCluster(t, 2)
	n1, n2 := c.Node("n1"), c.Node("n2")

	stranger, err := NewNode(NodeConfig{ID: "n9", Dir: t.TempDir(), Maosd: "maosd"})
	NoErr(t, err)
	if err := c.RemoveNode(stranger); err == nil || !strings.Contains(err.Error(), "n9: not a member") {
		t.Errorf("RemoveNode of a stranger: %v", err)
	}
	if _, err := c.ReplaceNode(n1); err == nil || !strings.Contains(err.Error(), "n1: it still runs") {
		t.Errorf("ReplaceNode of a running node: %v", err)
	}

	NoErr(t, n2.Kill())
	if err := c.WaitHealthy(time.Second); err == nil || !strings.Contains(err.Error(), "n2 is down") {
		t.Errorf("WaitHealthy with n2 down: %v", err)
	}
	NoErr(t, n1.Kill())
	err = c.RemoveNode(n2)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "no live member to ask") {
		t.Errorf("RemoveNode with no live member: %v", err)
	}
	if len(c.Nodes()) != 2 || len(c.Removed()) != 0 {
		t.Errorf("a failed removal changed the members: %s, removed %s", nodeIDs(c.Nodes()), nodeIDs(c.Removed()))
	}
	if _, err := c.WaitCaughtUp(n1, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no live node") {
		t.Errorf("WaitCaughtUp with no leader: %v", err)
	}
}
