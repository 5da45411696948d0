package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/maos-project/maos/testing/harness"
)

// A Nemesis injects one fault into a running cluster and returns the nodes
// it hit and a heal function that undoes it. Faults are bounded: the runner
// always calls heal after the hold time, and heal restarts, resumes or
// reconnects everything the fault touched.
type Nemesis struct {
	Name string
	// Doc is one line for reports and --help.
	Doc string
	// Available: a majority stays up throughout, so no send may be refused
	// for longer than an election (ElectionBound) from the fault's start
	// to the next fault (Fault.Refusal).
	Available bool
	// NetnsOnly marks a nemesis that needs a namespace-mode cluster
	// (Config.Netns): its fault means nothing, or cannot be made, when
	// only Raft is cut.
	NetnsOnly bool
	inject    func(ctx context.Context, c *harness.Cluster, r *rand.Rand) (nodes []*harness.Node, heal func() error, err error)
}

// Nemeses lists every fault the chaos runner knows, in the order a full run
// injects them (the network splits of nemesis_netns.go are appended at
// init; NemesesFor picks those a mode can run). Clock skew is not among them: apply never reads the clock
// (entry timestamps come from the proposer and are made monotonic), so a
// skewed clock can only skew message timestamps, never the log.
var Nemeses = []Nemesis{
	{Name: "kill-leader", Doc: "SIGKILL the leader, restart it after the hold", inject: killLeader},
	{Name: "kill-follower", Doc: "SIGKILL a random follower, restart it after the hold", inject: killFollower},
	{Name: "kill-majority", Doc: "SIGKILL a majority (leader included), restart them after the hold", inject: killMajority},
	{Name: "pause-leader", Doc: "SIGSTOP the leader, SIGCONT it after the hold", inject: pauseLeader},
	{Name: "kill-all", Doc: "SIGKILL every node at once (power loss), restart them all", inject: killAll},
	{Name: "partition-leader", Doc: "cut the leader off from the others (Raft only on loopback, every plane with --netns), heal after the hold", inject: partitionLeader},
	{Name: "power-loss", Doc: "copy every state file, SIGKILL every node seconds later, put the copies back, restart them all in a new boot", inject: powerLoss},
	{Name: "replace-node", Doc: "SIGKILL the leader; after the hold remove it, add a fresh node on new addresses, wait until it caught up",
		Available: true, inject: replaceNode},
	{Name: "rolling-restart", Doc: "restart every node in turn (SIGTERM, start, caught up and healthy before the next), leader last",
		Available: true, inject: rollingRestart},
}

// NemesisByName finds a nemesis; the error lists the known names.
func NemesisByName(name string) (Nemesis, error) {
	for _, n := range Nemeses {
		if n.Name == name {
			return n, nil
		}
	}
	return Nemesis{}, fmt.Errorf("unknown nemesis %q; known: %s", name, strings.Join(NemesisNames(), ", "))
}

// NemesisNames lists the known nemesis names.
func NemesisNames() []string {
	var names []string
	for _, n := range Nemeses {
		names = append(names, n.Name)
	}
	return names
}

func ids(nodes []*harness.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	sort.Strings(out)
	return out
}

func killLeader(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	if err := l.Kill(); err != nil {
		return nil, nil, err
	}
	return []*harness.Node{l}, l.Restart, nil
}

func killFollower(_ context.Context, c *harness.Cluster, r *rand.Rand) ([]*harness.Node, func() error, error) {
	fs, err := c.Followers()
	if err != nil {
		return nil, nil, err
	}
	f := fs[r.IntN(len(fs))]
	if err := f.Kill(); err != nil {
		return nil, nil, err
	}
	return []*harness.Node{f}, f.Restart, nil
}

func killMajority(_ context.Context, c *harness.Cluster, r *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	others := c.Others(l)
	r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	victims := append([]*harness.Node{l}, others[:len(c.Nodes())/2]...)
	return killThenRestart(victims)
}

func killAll(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	return killThenRestart(c.Nodes())
}

// killThenRestart SIGKILLs every victim (as close to at once as signals
// allow) and returns a heal that restarts them all.
func killThenRestart(victims []*harness.Node) ([]*harness.Node, func() error, error) {
	errs := make(chan error, len(victims))
	for _, v := range victims {
		go func() { errs <- v.Kill() }()
	}
	for range victims {
		if err := <-errs; err != nil {
			return nil, nil, err
		}
	}
	heal := func() error {
		for _, v := range victims {
			if err := v.Restart(); err != nil {
				return err
			}
		}
		return nil
	}
	return victims, heal, nil
}

// powerLossLag is how much older than the kill the state files put back
// by power-loss are.
const powerLossLag = 2 * time.Second

// powerLoss simulates a power loss on every node: the state file commits
// without fsync, so after one it may be seconds behind what the node
// acknowledged (or torn: the copies are raw copies of live files). It
// copies each node's state.db, keeps the load on for powerLossLag, SIGKILLs
// every node, puts the copies back and restarts the nodes with a new boot
// id (maosd's test hook MAOS_TEST_BOOT_ID), so each must rebuild its state
// from its snapshots and Raft log. The raft logs are untouched: their
// appends are fsynced, so a power loss keeps them.
func powerLoss(ctx context.Context, c *harness.Cluster, r *rand.Rand) ([]*harness.Node, func() error, error) {
	victims := c.Nodes()
	for _, v := range victims {
		if err := copyFile(filepath.Join(v.DataDir, "state.db"), filepath.Join(v.Dir, "state.db.before-power-loss")); err != nil {
			return nil, nil, fmt.Errorf("power-loss: copy %s's state file: %w", v.ID, err)
		}
	}
	if err := sleepCtx(ctx, powerLossLag); err != nil {
		return nil, nil, err
	}
	victims, heal, err := killThenRestart(victims)
	if err != nil {
		return nil, nil, err
	}
	boot := fmt.Sprintf("chaos-boot-%016x", r.Uint64())
	rebuilt := map[*harness.Node]int{}
	for _, v := range victims {
		rebuilt[v] = countRebuilds(v)
		if err := os.Rename(filepath.Join(v.Dir, "state.db.before-power-loss"), filepath.Join(v.DataDir, "state.db")); err != nil {
			return nil, nil, fmt.Errorf("power-loss: roll back %s's state file: %w", v.ID, err)
		}
		v.SetEnv("MAOS_TEST_BOOT_ID", boot)
	}
	// A node that trusted its rolled-back file would pass by luck (raft
	// replays from the latest snapshot): each must have rebuilt.
	checked := func() error {
		if err := heal(); err != nil {
			return err
		}
		for _, v := range victims {
			if countRebuilds(v) <= rebuilt[v] {
				return fmt.Errorf("power-loss: %s restarted in a new boot without rebuilding its state file", v.ID)
			}
		}
		return nil
	}
	return victims, checked, nil
}

// countRebuilds is how many state files the node moved aside as untrusted.
func countRebuilds(n *harness.Node) int {
	m, _ := filepath.Glob(filepath.Join(n.DataDir, "state.db.untrusted-*"))
	return len(m)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func pauseLeader(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	if err := l.Pause(); err != nil {
		return nil, nil, err
	}
	return []*harness.Node{l}, l.Resume, nil
}

func partitionLeader(_ context.Context, c *harness.Cluster, _ *rand.Rand) ([]*harness.Node, func() error, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, nil, err
	}
	if err := c.Partition([]*harness.Node{l}, c.Others(l)); err != nil {
		return nil, nil, err
	}
	return []*harness.Node{l}, c.Heal, nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
