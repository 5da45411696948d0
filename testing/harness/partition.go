package harness

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Partition cuts Raft traffic between nodes on different sides: the proxy
// in front of node X refuses, and closes if open, every connection from
// the loopback IP of a node on another side than X. Nodes named on no side
// form one more side together, so Partition([]*Node{leader}) isolates the
// leader from the rest. A partition replaces the one in force (they do not
// add up); Heal removes it. Only Raft is cut: the HTTP API, and with it the
// harness's requests and the nodes' forwarding of requests to a leader they
// know, still go through. The cluster must be Partitionable.
func (c *Cluster) Partition(sides ...[]*Node) error {
	if !c.opts.Partitionable {
		return errors.New("harness: Partition needs a cluster started with Options.Partitionable")
	}
	nodes := c.Nodes()
	side := map[*Node]int{}
	for i, s := range sides {
		for _, n := range s {
			if !slices.Contains(nodes, n) {
				return fmt.Errorf("harness: partition: %v is not a node of this cluster", nodeName(n))
			}
			if j, dup := side[n]; dup {
				return fmt.Errorf("harness: partition: %s is on side %d and side %d", n.ID, j+1, i+1)
			}
			side[n] = i
		}
	}
	var all [][]*Node
	for _, s := range sides {
		if len(s) > 0 {
			all = append(all, s)
		}
	}
	var rest []*Node
	for _, n := range nodes {
		if _, ok := side[n]; !ok {
			rest = append(rest, n)
		}
	}
	if len(rest) > 0 {
		all = append(all, rest)
	}
	// Renumber: empty sides dropped, the rest last.
	ids := make([][]string, len(all))
	for i, s := range all {
		for _, n := range s {
			side[n] = i
			ids[i] = append(ids[i], n.ID)
		}
	}
	for _, x := range nodes {
		blocked := map[string]bool{}
		for _, y := range nodes {
			if side[y] != side[x] {
				blocked[net.ParseIP(y.RaftIP()).String()] = true
			}
		}
		x.Proxy().SetBlocked(func(src net.IP) bool { return blocked[src.String()] })
	}
	c.mu.Lock()
	c.sides = nil
	if len(ids) > 1 {
		c.sides = ids
	}
	c.mu.Unlock()
	return nil
}

// Heal removes every cut Partition made: every node's proxy accepts
// connections from every node again.
func (c *Cluster) Heal() error {
	if !c.opts.Partitionable {
		return errors.New("harness: Heal needs a cluster started with Options.Partitionable")
	}
	for _, n := range c.Nodes() {
		n.Proxy().SetBlocked(nil)
	}
	c.mu.Lock()
	c.sides = nil
	c.mu.Unlock()
	return nil
}

// Partitions returns the sides of the partition in force, as node ids
// (the sides given to Partition, then the nodes named on none), or nil
// when the cluster's Raft traffic is not cut.
func (c *Cluster) Partitions() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]string, 0, len(c.sides))
	for _, s := range c.sides {
		out = append(out, append([]string(nil), s...))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Cut reports whether Raft traffic between a and b is cut by the
// partition in force.
func (c *Cluster) Cut(a, b *Node) bool {
	for _, s := range c.Partitions() {
		hasA, hasB := slices.Contains(s, a.ID), slices.Contains(s, b.ID)
		if hasA || hasB {
			return hasA != hasB
		}
	}
	return false
}

// partitionString describes the partition in force ("raft partitioned:
// [n1] | [n2 n3]"), "" if none.
func (c *Cluster) partitionString() string {
	sides := c.Partitions()
	if sides == nil {
		return ""
	}
	parts := make([]string, len(sides))
	for i, s := range sides {
		parts[i] = "[" + strings.Join(s, " ") + "]"
	}
	return "raft partitioned: " + strings.Join(parts, " | ")
}

func nodeName(n *Node) string {
	if n == nil {
		return "a nil node"
	}
	return n.ID
}
