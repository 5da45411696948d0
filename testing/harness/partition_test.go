package harness

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// unstartedCluster is a partitionable cluster of k nodes that never run:
// enough to check which sources each proxy blocks.
func unstartedCluster(t *testing.T, k int) *Cluster {
	t.Helper()
	c := &Cluster{Dir: t.TempDir(), opts: Options{Partitionable: true}}
	for i := 1; i <= k; i++ {
		p, err := NewProxy("127.0.0.1:0")
		NoErr(t, err)
		t.Cleanup(func() { p.Close() })
		id := fmt.Sprintf("n%d", i)
		n, err := NewNode(NodeConfig{ID: id, Dir: filepath.Join(c.Dir, id), Maosd: "maosd", RaftIP: raftIP(i), RaftProxy: p})
		NoErr(t, err)
		c.nodes = append(c.nodes, n)
	}
	return c
}

// blockedFrom lists, for node x, the nodes whose source IP its proxy
// refuses.
func blockedFrom(c *Cluster, x *Node) []string {
	var out []string
	x.Proxy().mu.Lock()
	rule := x.Proxy().blocked
	x.Proxy().mu.Unlock()
	for _, y := range c.nodes {
		if rule != nil && rule(net.ParseIP(y.RaftIP())) {
			out = append(out, y.ID)
		}
	}
	return out
}

func TestPartitionRules(t *testing.T) {
	c := unstartedCluster(t, 5)
	n := c.nodes
	NoErr(t, c.Partition([]*Node{n[0], n[1]}, []*Node{n[2]}))
	want := map[string][]string{
		"n1": {"n3", "n4", "n5"}, "n2": {"n3", "n4", "n5"},
		"n3": {"n1", "n2", "n4", "n5"},
		"n4": {"n1", "n2", "n3"}, "n5": {"n1", "n2", "n3"},
	}
	for _, x := range n {
		if got := blockedFrom(c, x); !slices.Equal(got, want[x.ID]) {
			t.Errorf("%s's proxy blocks %v, want %v", x.ID, got, want[x.ID])
		}
	}
	if got := fmt.Sprint(c.Partitions()); got != "[[n1 n2] [n3] [n4 n5]]" {
		t.Errorf("Partitions() = %s", got)
	}
	if !c.Cut(n[0], n[2]) || !c.Cut(n[3], n[2]) || c.Cut(n[0], n[1]) || c.Cut(n[3], n[4]) {
		t.Error("Cut disagrees with the partition")
	}
	if s := c.describe(); !strings.Contains(s, "raft partitioned: [n1 n2] | [n3] | [n4 n5]") {
		t.Errorf("describe() = %s", s)
	}

	// A new partition replaces the old one.
	NoErr(t, c.Partition([]*Node{n[4]}))
	if got := fmt.Sprint(c.Partitions()); got != "[[n5] [n1 n2 n3 n4]]" {
		t.Errorf("Partitions() = %s", got)
	}
	if got := blockedFrom(c, n[0]); !slices.Equal(got, []string{"n5"}) {
		t.Errorf("n1's proxy blocks %v, want [n5]", got)
	}

	NoErr(t, c.Heal())
	for _, x := range n {
		if got := blockedFrom(c, x); len(got) != 0 {
			t.Errorf("after Heal %s's proxy blocks %v", x.ID, got)
		}
	}
	if c.Partitions() != nil || c.Cut(n[0], n[4]) {
		t.Errorf("after Heal: Partitions() = %v", c.Partitions())
	}

	if err := c.Partition([]*Node{n[0]}, []*Node{n[0], n[1]}); err == nil {
		t.Error("a node on two sides was accepted")
	}
	other := unstartedCluster(t, 1)
	if err := c.Partition([]*Node{other.nodes[0]}); err == nil {
		t.Error("a node of another cluster was accepted")
	}
	plain := &Cluster{}
	if plain.Partition([]*Node{n[0]}) == nil || plain.Heal() == nil {
		t.Error("Partition or Heal of a cluster that is not partitionable succeeded")
	}
}
