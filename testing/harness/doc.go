// Package harness runs real maosd processes on loopback (or each in a
// network namespace of its own) for multi-process tests: system tests,
// chaos tests (nemesis + checker) and benchmarks.
//
// A test builds the binaries once (BuildBinaries, usually in TestMain),
// then starts a Cluster of N nodes with NewCluster. Every node is a separate
// maosd process with its own data dir under the cluster's directory; its
// stdout and stderr go to a log file in its own directory (Node.LogPath), and
// the addresses it listens on are learned from its "maosd ready to serve"
// JSON log line, so nothing is hard-wired to a port.
//
//	maosd, maosctl, err := harness.BuildBinaries(dir)
//	...
//	c := harness.NewCluster(t, harness.Options{Maosd: maosd, Nodes: 3})
//	leader, err := c.Leader()                // polls every live node until they agree
//	harness.NoErr(t, err)
//	harness.NoErr(t, leader.Kill())          // SIGKILL by PID, waits for the exit
//	next, err := c.Leader()                  // a new leader among the survivors
//	harness.NoErr(t, err)
//	harness.NoErr(t, leader.Restart())       // same id, data dir and addresses; no --join
//
// A command that is not a test (the chaos runner) starts a cluster with
// StartCluster, which needs no testing.TB, and closes it itself.
//
// Network partitions need no root: with Options.Partitionable every node
// binds Raft on its own loopback IP (n<k> on 127.0.0.(10+k)) and dials its
// peers from it, and advertises a Proxy on 127.0.0.1 that forwards to its
// real Raft port. Cluster.Partition sets each proxy to refuse and cut
// connections from the nodes on other sides, by source IP; Cluster.Heal
// lifts every cut; Cluster.Partitions reports what is cut.
//
//	c := harness.NewCluster(t, harness.Options{Maosd: maosd, Nodes: 3, Partitionable: true})
//	leader, _ := c.Leader()
//	harness.NoErr(t, c.Partition([]*harness.Node{leader}, c.Others(leader)))
//	next, err := c.LeaderAmong(30*time.Second, c.Others(leader)...)
//	...
//	harness.NoErr(t, c.Heal())
//
// Options.Netns makes every node a host of its own (Linux, root,
// iproute2): n<k> runs in a network namespace with the address
// 10.A.B.(10+k) on a private bridge, the test process holding .1, and
// the cluster is Secure. There Partition, CutBetween (a bridge node that
// sees both sides) and CutOneWay cut every plane -- Raft, forwarding
// between nodes, gossip -- with blackhole routes inside the namespaces,
// while the test still reaches every node's API.
//
//	c := harness.NewCluster(t, harness.Options{Maosd: maosd, Nodes: 3, Netns: true})
//	harness.NoErr(t, c.CutBetween([]*harness.Node{n1}, []*harness.Node{n3})) // n2 bridges them
//	harness.NoErr(t, c.CutOneWay([]*harness.Node{leader}, c.Others(leader)))
//	harness.NoErr(t, c.Heal())
//
// Options.Secure runs a cluster as a multi-host deployment should: the
// harness writes a CA, a certificate per node (SANs 127.0.0.1 and the
// node's Raft IP), an admin token file and a gossip key (Cluster.Security)
// and starts every maosd with --auth, TLS and --gossip-key; its own
// clients speak https verified against the CA with the admin token, and a
// test sends as an agent with SendOptions.Token or Client().WithToken.
//
//	c := harness.NewCluster(t, harness.Options{Maosd: maosd, Nodes: 3, Secure: true})
//	tok, err := c.Nodes()[0].Client().CreateToken(ctx, "alice", "")
//	...
//	res, err := c.SendWithRetry(ctx, m, harness.SendOptions{Token: tok.Token})
//
// Membership changes go through the API, as an operator makes them:
// Cluster.RemoveNode drops a (dead) node from the Raft configuration and
// from the members; Cluster.ReplaceNode removes a dead node and adds a
// fresh one (the next id, a new data dir and new addresses, the dead
// node's NodeArgs) that joins through a live member; Cluster.WaitCaughtUp
// waits until a node applied the leader's commit index, Cluster.WaitHealthy
// until every member runs, agrees on a leader and is ready.
//
//	harness.NoErr(t, dead.Kill())
//	fresh, err := c.ReplaceNode(dead) // n4 on new addresses, caught up
//
// Rules the harness keeps, so tests built on it stay reliable on a loaded
// CI machine:
//
//   - loopback only (127.0.0.1, and 127.0.0.(10+k) for the Raft port of a
//     partitionable node), or in namespace mode the cluster's own
//     test-only subnet, and ephemeral ports: the first start of a node
//     binds port 0 and a restart passes the addresses it got then;
//   - every wait is a poll (every PollInterval) bounded by a timeout and
//     fails with a message saying what it waited for and what it last saw;
//     nothing synchronises by sleeping;
//   - only processes the harness started are signalled, by their PID
//     (os.Process, which uses a pidfd where the kernel has one), and
//     Cluster.Close, registered with t.Cleanup, kills whichever are still
//     running, whether the test passed or failed;
//   - when the test failed, the tail of every node's log is written with
//     t.Logf and the cluster's directory is kept for inspection; a node
//     that exited without being told to is reported as a test error.
//
// Methods of Node and Cluster return errors and are safe for concurrent use,
// so a nemesis goroutine may call them; the few functions that take a
// testing.TB and fail the test (NewCluster, NoErr) must be called
// from the test's goroutine.
package harness
