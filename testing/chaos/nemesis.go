package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	Doc    string
	inject func(ctx context.Context, c *harness.Cluster, r *rand.Rand) (nodes []*harness.Node, heal func() error, err error)
}

// Nemeses lists every fault the chaos runner knows, in the order a full run
// injects them. Clock skew is not among them: apply never reads the clock
// (entry timestamps come from the proposer and are made monotonic), so a
// skewed clock can only skew message timestamps, never the log.
var Nemeses = []Nemesis{
	{Name: "kill-leader", Doc: "SIGKILL the leader, restart it after the hold", inject: killLeader},
	{Name: "kill-follower", Doc: "SIGKILL a random follower, restart it after the hold", inject: killFollower},
	{Name: "kill-majority", Doc: "SIGKILL a majority (leader included), restart them after the hold", inject: killMajority},
	{Name: "pause-leader", Doc: "SIGSTOP the leader, SIGCONT it after the hold", inject: pauseLeader},
	{Name: "kill-all", Doc: "SIGKILL every node at once (power loss), restart them all", inject: killAll},
	{Name: "partition-leader", Doc: "cut the leader's Raft traffic from the others, heal after the hold", inject: partitionLeader},
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
