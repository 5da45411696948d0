package maosctl

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/maos-project/maos/watcher"
	"github.com/urfave/cli/v2"
)

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:  "watch",
		Usage: "run watcher agents: hand each agent's mail to its model CLI and post the answers",
		UsageText: `maosctl watch --config FILE [--dry-run] [--json]

   maosctl --addr 127.0.0.1:7070 watch --config agents.yaml
   maosctl watch --config agents.yaml --dry-run`,
		Description: `Runs one watcher per agent of the YAML file (a top-level "agents:" list; the
same file maosd --agents takes) against --addr (any node) until Ctrl-C. Each
watcher registers its agent, keeps its presence (AWAKE/IDLE, WORKING while the
CLI runs, OFFLINE on exit), streams the agent's inbox after its replicated
cursor, runs the command with the rendered prompt on stdin and posts the
answer as a reply (type response, or task_result for a task_assign); after
the retries fail it posts an incident reply. The reply id is derived from
(agent, message id), so a restart never answers twice.

It also does tasks (maosctl task): those addressed to the agent and those of
the queues its claim: entries name (role:NAME, its own role; capability:NAME).
It claims one when idle, runs the command with the task as the prompt,
renews the lease while it runs and reports the completion: plain text is a
success, seed 002 JSON lines on stdout ({"type":"status"|"artifact"|
"dependency"|"complete",...}) report progress, outputs, a task to wait for
and the completion.

   agents:
     - id: worker_1
       role: worker
       command: ["claude", "--print"]
       timeout: 5m
       retries: 3
       claim: ["role:worker", "capability:go"]
       policy: {mode: fork, max_forks: 2, overrides: [{priority: urgent, mode: interrupt}]}
     - id: claude
       delivery: tmux               # type the mail into an interactive session
       tmux_target: "farm:0.0"
       idle_prompt: '(?m)^> '       # optional: the pane shows the agent waits for input
       working_prompt: 'esc to interrupt'   # optional, checked first: it works

With policy mode fork, each message is answered by a temporary agent
worker_1-fork-N (N up to max_forks) with its own presence and an emptied
working directory under fork_dir (default $TMPDIR/maos-forks/ID), given the
message's thread; it answers the sender and leaves worker_1 a private note
(a command agent's watcher does not answer it; a tmux agent's session gets it
typed). A tmux agent forks only with a command; forks never type into its
pane.

A tmux agent's watcher reads its pane every second and reports IDLE or
WORKING (source pane; 'maosctl who'); the defaults of idle_prompt and
working_prompt fit Claude Code and Codex (docs/AGENTS.md, "Busy or idle").

--dry-run runs nothing, posts nothing and leaves the cursors alone: it prints,
for each incoming message, which local agent would take it and with which
policy (or why it is skipped); with --json one object per line
{"seq","id","from","agent","take","policy","reason"}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "watcher config `FILE` (YAML; required)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "only print which agent would take each message, with which policy"},
			jsonFlag(),
		},
		Action: watch,
	}
}

func watch(c *cli.Context) error {
	if err := noArgs(c, "config"); err != nil {
		return err
	}
	f, err := watcher.LoadFile(c.String("config"))
	if err != nil {
		return fmt.Errorf("--config %s: %w", c.String("config"), err)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out := c.App.Writer
	// Agents' shared-context folders default to <config's folder>/<agent>/context.
	opts := watcher.Options{Client: apiClient(c), Logger: slog.New(slog.NewTextHandler(c.App.ErrWriter, nil)),
		Dir: filepath.Dir(c.String("config"))}
	if c.Bool("dry-run") {
		asJSON := wantJSON(c)
		opts.DryRun = func(d watcher.Decision) {
			if asJSON {
				b, _ := json.Marshal(d)
				fmt.Fprintln(out, string(b))
				return
			}
			fmt.Fprintln(out, d.String())
		}
	}
	return watcher.Run(ctx, f, opts)
}
