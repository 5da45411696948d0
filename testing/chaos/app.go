package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

// App is the maos-chaos command: it runs chaos scenarios against real maosd
// processes on loopback and exits non-zero when any promise was broken.
func App() *cli.App {
	return &cli.App{
		Name:  "maos-chaos",
		Usage: "kill, pause and partition maosd nodes under load, and check nothing was lost",
		UsageText: `maos-chaos [--maosd bin/maosd] [--nodes 3] [--nemesis all|NAME[,NAME]] [--out DIR]

   maos-chaos --maosd bin/maosd --nodes 5 --nemesis kill-leader,partition-leader
   maos-chaos --together --hold 5s --seed 42
   maos-chaos --netns --nemesis isolate-node,bridge,one-way-leader`,
		Description: `Each scenario starts a fresh cluster of --nodes maosd processes on 127.0.0.1
(with --netns: each in a network namespace of its own on a private bridge),
runs --clients senders (each message retried with its id until acknowledged)
and --readers strong readers against random nodes, injects its nemesis for
--hold, heals it, and then checks: every acknowledged send is on every node,
no id is stored twice, every node holds the same seq -> id sequence, and the
history of sends and strong reads is linearizable (porcupine). With
--watchers N every node also runs N watcher agents whose model CLI is the
stub model, one more client sends them requests, and after healing every
request must have exactly one reply. With --tasks N one more client creates
tasks for a role queue and N task workers claim, report and complete them
(some claims abandoned, some completed after their lease on purpose); every
task must be stored once and completed once, by the claim it records, and a
late completion must be refused. The membership nemeses (replace-node,
rolling-restart) must also refuse no send for longer than an election.

By default each nemesis runs as its own scenario; --together injects them
one after another in a single run. Reports go to --out as report.txt and
report.json (plus porcupine's HTML when a history is not linearizable).

Nemeses: ` + nemesisDocs(),
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "maosd", Usage: "maosd binary `PATH` (default: maosd beside this program, then bin/maosd)"},
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "cluster size"},
			&cli.StringFlag{Name: "nemesis", Value: "all", Usage: "`LIST` of nemeses, comma-separated, or all"},
			&cli.BoolFlag{Name: "together", Usage: "inject every nemesis in one run instead of one scenario each"},
			&cli.DurationFlag{Name: "hold", Value: 3 * time.Second, Usage: "how long each fault lasts"},
			&cli.DurationFlag{Name: "warmup", Value: 2 * time.Second, Usage: "load before the first fault"},
			&cli.DurationFlag{Name: "gap", Value: time.Second, Usage: "load between a recovery and the next fault"},
			&cli.IntFlag{Name: "clients", Value: 8, Usage: "concurrent senders"},
			&cli.IntFlag{Name: "readers", Value: 2, Usage: "concurrent strong readers"},
			&cli.IntFlag{Name: "channels", Value: 4, Usage: "channels the load spreads over"},
			&cli.Int64Flag{Name: "seed", Usage: "random seed (default: from the clock; printed in the report)"},
			&cli.IntFlag{Name: "watchers", Usage: "watcher agents per node (maosd --agents, the stub model as CLI); every request to them must get exactly one reply (0: none)"},
			&cli.IntFlag{Name: "tasks", Usage: "task workers: one more client creates tasks for their role queue, they claim, report and complete them; every task must be stored once and completed once (0: none)"},
			&cli.StringFlag{Name: "stubmodel", Usage: "stub model binary `PATH` for --watchers (default: stubmodel beside this program, then bin/stubmodel)"},
			&cli.BoolFlag{Name: "secure", Usage: "run every node with --auth, TLS (API and Raft) and a gossip key"},
			&cli.BoolFlag{Name: "netns", Usage: "run every node in a network namespace of its own on a private bridge (root, iproute2; implies --secure): partitions cut Raft, forwarding and gossip, and the nemeses marked --netns run too"},
			&cli.StringFlag{Name: "out", Value: "chaos-out", Usage: "`DIR` for the reports (one subdirectory per scenario)"},
			&cli.BoolFlag{Name: "json", Usage: "print the reports as JSON lines instead of text"},
		},
		Action: runApp,
	}
}

func nemesisDocs() string {
	var b strings.Builder
	for _, n := range Nemeses {
		fmt.Fprintf(&b, "\n   %-17s %s", n.Name, n.Doc)
	}
	return b.String()
}

// findMaosd returns an absolute path: the nodes run in their own
// directories.
func findMaosd(flag string) (string, error) { return findBinary(flag, "maosd", "--maosd") }

// findBinary returns flag as an absolute path, else name beside this
// program, else bin/name.
func findBinary(flag, name, flagName string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if _, err := os.Stat(filepath.Join("bin", name)); err == nil {
		return filepath.Abs(filepath.Join("bin", name))
	}
	return "", fmt.Errorf("no %s binary found beside maos-chaos or in bin/; run make build or pass %s", name, flagName)
}

func runApp(c *cli.Context) error {
	maosd, err := findMaosd(c.String("maosd"))
	if err != nil {
		return cli.Exit("maos-chaos: "+err.Error(), 2)
	}
	var stub string
	switch n := c.Int("watchers"); {
	case n < 0 || n > 8:
		return cli.Exit(fmt.Sprintf("maos-chaos: --watchers %d: 0..8 agents per node", n), 2)
	case n > 0:
		if stub, err = findBinary(c.String("stubmodel"), "stubmodel", "--stubmodel"); err != nil {
			return cli.Exit("maos-chaos: "+err.Error(), 2)
		}
	}
	if n := c.Int("tasks"); n < 0 || n > 32 {
		return cli.Exit(fmt.Sprintf("maos-chaos: --tasks %d: 0..32 task workers", n), 2)
	}
	var nemeses []Nemesis
	if c.String("nemesis") == "all" {
		nemeses = NemesesFor(c.Bool("netns"))
	} else {
		for _, name := range strings.Split(c.String("nemesis"), ",") {
			n, err := NemesisByName(strings.TrimSpace(name))
			if err != nil {
				return cli.Exit("maos-chaos: --nemesis: "+err.Error(), 2)
			}
			if n.NetnsOnly && !c.Bool("netns") {
				return cli.Exit("maos-chaos: --nemesis "+n.Name+": needs --netns (on loopback only Raft is cut)", 2)
			}
			nemeses = append(nemeses, n)
		}
	}
	if n := c.Int("nodes"); n < 3 {
		return cli.Exit(fmt.Sprintf("maos-chaos: --nodes %d: at least 3, so a majority survives a single fault", n), 2)
	}
	scenarios := [][]Nemesis{nemeses}
	if !c.Bool("together") {
		scenarios = nil
		for _, n := range nemeses {
			scenarios = append(scenarios, []Nemesis{n})
		}
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(c.App.ErrWriter, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	failed := 0
	for i, sc := range scenarios {
		mode := ""
		if c.Bool("netns") {
			mode = "netns-"
		}
		out := filepath.Join(c.String("out"), fmt.Sprintf("%s%dn-%02d-%s", mode, c.Int("nodes"), i+1, sc[0].Name))
		if len(sc) > 1 {
			out = filepath.Join(c.String("out"), fmt.Sprintf("%s%dn-together", mode, c.Int("nodes")))
		}
		rep, err := Run(ctx, Config{
			Maosd: maosd, Nodes: c.Int("nodes"), Nemeses: sc,
			Clients: c.Int("clients"), Readers: c.Int("readers"), Channels: c.Int("channels"),
			Warmup: c.Duration("warmup"), Hold: c.Duration("hold"), Gap: c.Duration("gap"),
			Watchers: c.Int("watchers"), StubModel: stub, Secure: c.Bool("secure"), Netns: c.Bool("netns"),
			Tasks: c.Int("tasks"),
			Seed:  c.Int64("seed"), OutDir: out, Logf: logf,
		})
		if rep != nil {
			if c.Bool("json") {
				data, _ := json.Marshal(rep)
				fmt.Fprintln(c.App.Writer, string(data))
			} else {
				fmt.Fprintln(c.App.Writer, rep.Text())
			}
		}
		if err != nil {
			logf("scenario %s: %v", out, err)
		}
		if err != nil || rep == nil || !rep.Pass {
			failed++
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("maos-chaos: %d of %d scenarios FAILED; reports in %s", failed, len(scenarios), c.String("out")), 1)
	}
	fmt.Fprintf(c.App.ErrWriter, "maos-chaos: all %d scenarios passed; reports in %s\n", len(scenarios), c.String("out"))
	return nil
}
