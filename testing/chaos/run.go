package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// Config describes one chaos run: a fresh cluster, a workload that runs
// throughout, the nemeses injected one after another, then the checks.
type Config struct {
	// Maosd is the maosd binary to run; required.
	Maosd string
	// Nodes is the cluster size (default 3).
	Nodes int
	// Nemeses are injected in turn, each held for Hold then healed.
	Nemeses []Nemesis
	// Workload shape; zero values take the workload's defaults.
	Clients, Readers, Channels int
	// Warmup is the load before the first fault (default 2 s); Hold how
	// long each fault lasts (default 3 s); Recover bounds the wait for a
	// leader after each heal (default 30 s); Gap is the load between a
	// recovery and the next fault (default 1 s); Quiet the pause after the
	// load stopped and the nodes converged, before the checks (default 1 s).
	Warmup, Hold, Recover, Gap, Quiet time.Duration
	// Watchers, if positive, is the number of watcher agents each node
	// runs (maosd --agents) with StubModel as their model CLI; one more
	// client then sends them requests throughout, and after the faults
	// every request must get exactly one reply (Report.Watchers).
	Watchers int
	// Secure runs the cluster with --auth, TLS and a gossip key
	// (harness.Options.Secure); the workload then speaks https with the
	// admin token.
	Secure bool
	// Netns runs every node as a host of its own, in a network namespace
	// on a private bridge (harness.Options.Netns: root and iproute2; it
	// implies Secure), so a partition cuts Raft, forwarding and gossip
	// alike; the NetnsOnly nemeses need it.
	Netns bool
	// StubModel is the stub model binary (testing/stubmodel); required
	// when Watchers > 0.
	StubModel string
	// WatcherWait bounds the wait after the faults until every watcher
	// request has its reply (default 60 s).
	WatcherWait time.Duration
	// Tasks, if positive, is the number of task workers: one more client
	// creates tasks for their role queue throughout, the workers claim,
	// report and complete them (some claims abandoned or stalled past
	// their lease on purpose), and after the faults every task must be
	// stored once, end or be legitimately open, and be completed once by
	// the claim it records (Report.Tasks).
	Tasks int
	// TaskWait bounds the wait after the faults until every task has
	// ended (default 60 s).
	TaskWait time.Duration
	// Seed drives every random choice (0: from the clock, reported).
	Seed int64
	// OutDir receives report.json, report.txt and, when the history is not
	// linearizable, porcupine's HTML. Required.
	OutDir string
	// Logf receives progress lines; nil is silent.
	Logf func(format string, args ...any)
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Nodes <= 0 {
		c.Nodes = 3
	}
	if c.Channels <= 0 {
		c.Channels = 4
	}
	def(&c.Warmup, 2*time.Second)
	def(&c.Hold, 3*time.Second)
	def(&c.Recover, 30*time.Second)
	def(&c.Gap, time.Second)
	def(&c.Quiet, time.Second)
	def(&c.WatcherWait, DefaultWatcherWait)
	def(&c.TaskWait, DefaultTaskWait)
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Run performs one chaos run and writes its report into cfg.OutDir. The
// returned report says whether every promise held (Report.Pass); the error
// is for a run that could not be carried out (no cluster, a fault that
// could not be injected or healed), in which case the report, if any, is
// partial.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if cfg.Maosd == "" || cfg.OutDir == "" {
		return nil, errors.New("chaos: Config.Maosd and Config.OutDir are required")
	}
	if len(cfg.Nemeses) == 0 {
		return nil, errors.New("chaos: no nemesis to inject")
	}
	for _, n := range cfg.Nemeses {
		if n.NetnsOnly && !cfg.Netns {
			return nil, fmt.Errorf("chaos: nemesis %s needs a namespace-mode cluster (Config.Netns, --netns): only Raft is cut on loopback", n.Name)
		}
	}
	if cfg.Watchers > 0 && cfg.StubModel == "" {
		return nil, errors.New("chaos: Config.StubModel is required with Watchers")
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: out dir: %w", err)
	}
	var names []string
	for _, n := range cfg.Nemeses {
		names = append(names, n.Name)
	}
	rep := &Report{Scenario: strings.Join(names, ", "),
		Nodes: cfg.Nodes, Netns: cfg.Netns, Started: time.Now(), Seed: cfg.Seed}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6d616f73))

	hopts := harness.Options{Maosd: cfg.Maosd, Nodes: cfg.Nodes, Partitionable: true, Netns: cfg.Netns, Secure: cfg.Secure, Logf: cfg.Logf}
	var agents []string
	if cfg.Watchers > 0 {
		var err error
		if hopts.NodeArgs, agents, err = writeAgentFiles(filepath.Join(cfg.OutDir, "agents"), cfg.StubModel, cfg.Nodes, cfg.Watchers); err != nil {
			return nil, err
		}
	}
	c, err := harness.StartCluster(hopts)
	if err != nil {
		return nil, fmt.Errorf("chaos: start cluster: %w", err)
	}
	defer c.Close()
	cfg.Logf("cluster of %d up in %s (secure: %v, network namespaces: %v)", cfg.Nodes, c.Dir, cfg.Secure || cfg.Netns, cfg.Netns)

	h := NewHistory()
	wctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan error, 2)
	wcfg := WorkloadConfig{
		Clients: cfg.Clients, Readers: cfg.Readers, Channels: cfg.Channels,
		Nodes: c.Live, Seed: cfg.Seed,
	}
	loads := 1
	var hw *History // the watcher client's sends
	if cfg.Watchers > 0 {
		loads++
		wcfg.To = watcherSink
		hw = NewHistory()
		ww := &workload{cfg: WorkloadConfig{Nodes: c.Live, Seed: cfg.Seed}.withDefaults(), h: hw}
		// Sends may name only agents someone answers to: the sink and the
		// watcher agents (which their watchers register too, later) are
		// registered before the load starts.
		for _, id := range append([]string{watcherSink}, agents...) {
			role := watcherRole
			if id == watcherSink {
				role = api.DefaultRole
			}
			if err := ww.register(ctx, rand.New(rand.NewPCG(uint64(cfg.Seed), 0x72656773)), api.RegisterAgentCommand{ID: id, Role: role}); err != nil {
				return nil, fmt.Errorf("chaos: register %s: %w", id, err)
			}
		}
		go func() {
			ww.watcherClient(wctx, agents)
			loadDone <- nil
		}()
	}
	go func() { loadDone <- RunWorkload(wctx, wcfg, h) }()
	var tw *taskWorkload
	var ht *History // the task workload's ops
	if cfg.Tasks > 0 {
		ht = NewHistory()
		if tw, err = startTasks(ctx, c.Live, c.Nodes, cfg.Seed, cfg.Tasks, ht); err != nil {
			stopLoad()
			for range loads {
				<-loadDone
			}
			return finish(cfg, rep, err)
		}
		defer tw.stopWorkers()
		defer tw.stopCreating()
	}

	runErr := inject(ctx, cfg, c, h, rng, rep)
	stopLoad()
	if tw != nil {
		tw.stopCreating()
	}
	for range loads {
		if err := <-loadDone; err != nil && runErr == nil {
			runErr = fmt.Errorf("chaos: workload: %w", err)
		}
	}
	rep.Duration = h.Since()
	if runErr != nil {
		return finish(cfg, rep, runErr)
	}

	// Everything healed: wait until every node applied the same entries,
	// let the cluster sit, then check. The watchers first answer what they
	// still owe (a paused node's watcher is late), so the writes stop.
	if _, err := c.Leader(); err != nil {
		return finish(cfg, rep, fmt.Errorf("chaos: no leader after the faults: %w", err))
	}
	var waited time.Duration
	var waitErr error
	if hw != nil {
		waited, waitErr = waitReplies(ctx, c, hw, cfg.WatcherWait)
		cfg.Logf("watcher replies complete after %v (%v)", waited.Round(time.Millisecond), waitErr)
	}
	var tasksWaited time.Duration
	var tasksErr error
	if tw != nil {
		tasksWaited, tasksErr = waitTasks(ctx, c, cfg.TaskWait)
		cfg.Logf("tasks ended after %v (%v)", tasksWaited.Round(time.Millisecond), tasksErr)
		tw.stopWorkers()
	}
	if _, err := c.WaitConverged(); err != nil {
		return finish(cfg, rep, fmt.Errorf("chaos: nodes did not converge: %w", err))
	}
	if err := sleepCtx(ctx, cfg.Quiet); err != nil {
		return finish(cfg, rep, err)
	}
	channels := wcfg.ChannelNames()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	check, err := Check(cctx, c.Nodes(), h, channels, cfg.OutDir)
	if err != nil {
		return finish(cfg, rep, fmt.Errorf("chaos: check: %w", err))
	}
	rep.Check = check
	for _, n := range c.Nodes() {
		for _, e := range n.UnexpectedExits() {
			rep.Check.Notes = append(rep.Check.Notes, fmt.Sprintf("%s exited unexpectedly: %s", n.ID, e))
			rep.Crashes++
		}
	}
	rep.Ops = CountOps(h.Ops())
	rep.Pass = check.OK() && rep.Crashes == 0 && rep.AvailabilityOK()
	if hw != nil {
		wc, err := CheckWatchers(cctx, c.Nodes(), hw, agents)
		if err != nil {
			return finish(cfg, rep, fmt.Errorf("chaos: check watchers: %w", err))
		}
		wc.WaitedFor = waited
		if waitErr != nil {
			wc.Notes = append(wc.Notes, "the wait for the replies ended: "+waitErr.Error())
		}
		rep.Watchers = wc
		rep.Pass = rep.Pass && wc.OK()
	}
	if tw != nil {
		tc, err := CheckTasks(cctx, c.Nodes(), ht, cfg.Tasks)
		if err != nil {
			return finish(cfg, rep, fmt.Errorf("chaos: check tasks: %w", err))
		}
		tc.WaitedFor, tc.Abandoned = tasksWaited, int(tw.abandoned.Load())
		if tasksErr != nil {
			tc.Notes = append(tc.Notes, "the wait for the tasks to end ended: "+tasksErr.Error())
		}
		rep.Tasks = tc
		rep.Pass = rep.Pass && tc.OK()
	}
	if !rep.Pass {
		rep.ClusterDir = c.Dir
		c.Keep()
	}
	return finish(cfg, rep, nil)
}

// inject runs the nemeses in turn under load.
func inject(ctx context.Context, cfg Config, c *harness.Cluster, h *History, rng *rand.Rand, rep *Report) error {
	if err := sleepCtx(ctx, cfg.Warmup); err != nil {
		return err
	}
	for _, nem := range cfg.Nemeses {
		f := Fault{Name: nem.Name, Start: h.Since(), RecoveredAfter: -1}
		nodes, heal, err := nem.inject(ctx, c, rng)
		if err != nil {
			return fmt.Errorf("chaos: inject %s: %w", nem.Name, err)
		}
		f.InForce = h.Since()
		f.Nodes = ids(nodes)
		if nem.Available {
			f.RefusalBound = ElectionBound()
		}
		cfg.Logf("fault %s on %v at %v", nem.Name, f.Nodes, f.Start.Round(time.Millisecond))
		holdErr := sleepCtx(ctx, cfg.Hold)
		if err := heal(); err != nil {
			return fmt.Errorf("chaos: heal %s: %w", nem.Name, err)
		}
		f.End = h.Since()
		rep.Faults = append(rep.Faults, f)
		if holdErr != nil {
			return holdErr
		}
		if _, err := c.WaitLeader(cfg.Recover); err != nil {
			return fmt.Errorf("chaos: no leader within %v after healing %s: %w", cfg.Recover, nem.Name, err)
		}
		cfg.Logf("healed %s at %v", nem.Name, f.End.Round(time.Millisecond))
		if err := sleepCtx(ctx, cfg.Gap); err != nil {
			return err
		}
	}
	ops := h.Ops()
	for i := range rep.Faults {
		f := &rep.Faults[i]
		f.RecoveredAfter = RecoveryTime(h, f.InForce)
		if f.RefusalBound > 0 {
			to := h.Since()
			if i+1 < len(rep.Faults) {
				to = rep.Faults[i+1].Start
			}
			r := LongestRefusal(ops, f.Start, to)
			f.Refusal = &r
		}
	}
	return nil
}

// finish writes the report files and returns the report with runErr.
func finish(cfg Config, rep *Report, runErr error) (*Report, error) {
	if runErr != nil {
		rep.Error = runErr.Error()
		rep.Pass = false
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(cfg.OutDir, "report.json"), append(data, '\n'), 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(cfg.OutDir, "report.txt"), []byte(rep.Text()), 0o644)
	}
	if err != nil && runErr == nil {
		runErr = fmt.Errorf("chaos: write report: %w", err)
	}
	return rep, runErr
}
