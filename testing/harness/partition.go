package harness

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
)

// Partition cuts traffic between nodes on different sides. Nodes named on
// no side form one more side together, so Partition([]*Node{leader})
// isolates the leader from the rest. A partition replaces the fault in
// force (they do not add up); Heal removes it.
//
// What is cut depends on the mode. With Options.Partitionable only Raft is
// cut: the proxy in front of node X refuses, and closes if open, every
// connection from the loopback IP of a node on another side than X; the
// HTTP API, and with it the harness's requests and the nodes' forwarding
// of requests to a leader they know, and gossip still go through. With
// Options.Netns every plane is cut (Raft, forwarding, gossip: see CutLinks)
// while the test process, a client on another host, still reaches every
// node. A cluster with neither cannot be partitioned.
func (c *Cluster) Partition(sides ...[]*Node) error {
	if err := c.checkGroups(sides...); err != nil {
		return fmt.Errorf("harness: partition: %w", err)
	}
	nodes := c.Nodes()
	side := map[*Node]int{}
	for i, s := range sides {
		for _, n := range s {
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
	drops := map[link]bool{}
	for _, x := range nodes {
		for _, y := range nodes {
			if side[y] != side[x] {
				drops[link{x.ID, y.ID}] = true
			}
		}
	}
	if len(ids) < 2 {
		ids = nil
	}
	return c.cut(drops, ids)
}

// CutBetween cuts traffic both ways between every node of a and every
// node of b, and nothing else: a node in neither still reaches both, so
// CutBetween(left, right) with one node left out makes that node a bridge
// between two sides that do not see each other (a non-transitive
// network). It replaces the fault in force; Heal removes it. What is cut
// depends on the mode, as for Partition.
func (c *Cluster) CutBetween(a, b []*Node) error {
	if err := c.checkGroups(a, b); err != nil {
		return fmt.Errorf("harness: cut between: %w", err)
	}
	drops := map[link]bool{}
	for _, x := range a {
		for _, y := range b {
			drops[link{x.ID, y.ID}], drops[link{y.ID, x.ID}] = true, true
		}
	}
	return c.cut(drops, nil)
}

// CutOneWay drops every packet a node of from sends to a node of to, and
// nothing else; it replaces the fault in force, Heal removes it. Only a
// namespace-mode cluster (Options.Netns) can: a route in each from node's
// namespace blackholes the addresses of the to nodes, so what to sends
// still arrives. TCP needs both directions (a handshake, acks), so a
// one-way cut stops TCP both ways -- from's connects fail at once, to's
// hang unanswered -- while UDP gossip flows from to to from only.
func (c *Cluster) CutOneWay(from, to []*Node) error {
	if err := c.checkGroups(from, to); err != nil {
		return fmt.Errorf("harness: cut one way: %w", err)
	}
	if c.net == nil {
		return errors.New("harness: cut one way: needs a cluster started with Options.Netns (a Raft proxy cuts a connection both ways)")
	}
	drops := map[link]bool{}
	for _, x := range from {
		for _, y := range to {
			drops[link{x.ID, y.ID}] = true
		}
	}
	return c.cut(drops, nil)
}

// Heal removes every cut Partition, CutBetween or CutOneWay made.
func (c *Cluster) Heal() error {
	return c.cut(nil, nil)
}

// checkGroups fails unless the cluster can be cut and every node of
// groups is one of the cluster's, named once across them all.
func (c *Cluster) checkGroups(groups ...[]*Node) error {
	if !c.opts.Partitionable && c.net == nil {
		return errors.New("needs a cluster started with Options.Partitionable or Options.Netns")
	}
	nodes := c.Nodes()
	seen := map[*Node]int{}
	for i, g := range groups {
		for _, n := range g {
			if !slices.Contains(nodes, n) {
				return fmt.Errorf("%v is not a node of this cluster", nodeName(n))
			}
			if j, dup := seen[n]; dup {
				return fmt.Errorf("%s is on side %d and side %d", n.ID, j+1, i+1)
			}
			seen[n] = i
		}
	}
	return nil
}

// cut replaces the fault in force with drops (what each node may not
// send to which; nil: none) and records sides, the partition's sides if
// it is one.
func (c *Cluster) cut(drops map[link]bool, sides [][]string) error {
	if !c.opts.Partitionable && c.net == nil {
		return errors.New("harness: cutting links needs a cluster started with Options.Partitionable or Options.Netns")
	}
	c.cutMu.Lock()
	defer c.cutMu.Unlock()
	var err error
	if c.net != nil {
		err = c.cutRoutes(drops)
		// After a failure some routes may be in place: Cut and
		// describe say what the network does, which the namespaces'
		// routes tell.
		drops = c.net.cuts()
	} else {
		err = c.cutProxies(drops)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sides = sides
	if err != nil {
		c.sides = nil
	}
	c.drops = drops
	return err
}

// cutProxies sets every node's Raft proxy to refuse the nodes it may not
// reach or that may not reach it: a TCP connection is cut both ways.
func (c *Cluster) cutProxies(drops map[link]bool) error {
	for l := range drops {
		if !drops[link{l.to, l.from}] {
			return fmt.Errorf("harness: %s -> %s is cut one way only; a Raft proxy cuts both ways (use Options.Netns)", l.from, l.to)
		}
	}
	nodes := c.Nodes()
	for _, x := range nodes {
		blocked := map[string]bool{}
		for _, y := range nodes {
			if drops[link{x.ID, y.ID}] {
				blocked[net.ParseIP(y.RaftIP()).String()] = true
			}
		}
		if len(blocked) == 0 {
			x.Proxy().SetBlocked(nil)
			continue
		}
		x.Proxy().SetBlocked(func(src net.IP) bool { return blocked[src.String()] })
	}
	return nil
}

// Partitions returns the sides of the partition in force, as node ids
// (the sides given to Partition, then the nodes named on none), or nil
// when no Partition is in force (CutBetween and CutOneWay are not
// partitions into sides: see Cut).
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

// Cut reports whether traffic between a and b is cut, in either
// direction, by the fault in force: either way, no TCP connection between
// them works.
func (c *Cluster) Cut(a, b *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drops[link{a.ID, b.ID}] || c.drops[link{b.ID, a.ID}]
}

// partitionString describes the fault in force ("raft partitioned: [n1]
// | [n2 n3]", "every plane cut: n1->n3 n3->n1"), "" if none.
func (c *Cluster) partitionString() string {
	what := "raft"
	if c.net != nil {
		what = "every plane"
	}
	if sides := c.Partitions(); sides != nil {
		parts := make([]string, len(sides))
		for i, s := range sides {
			parts[i] = "[" + strings.Join(s, " ") + "]"
		}
		return what + " partitioned: " + strings.Join(parts, " | ")
	}
	c.mu.Lock()
	var links []string
	for l := range c.drops {
		links = append(links, l.from+"->"+l.to)
	}
	c.mu.Unlock()
	if len(links) == 0 {
		return ""
	}
	sort.Strings(links)
	return what + " cut: " + strings.Join(links, " ")
}

func nodeName(n *Node) string {
	if n == nil {
		return "a nil node"
	}
	return n.ID
}
