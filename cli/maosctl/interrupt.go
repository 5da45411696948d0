package maosctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/watcher"
)

func interruptCommand() *cli.Command {
	return &cli.Command{
		Name:  "interrupt",
		Usage: "stop an agent: an urgent [INTERRUPT] message, and ESC to its tmux pane",
		UsageText: `maosctl interrupt AGENT --reason R [--from A] [--channel CH] [--tmux-target SESSION:WINDOW.PANE [--tmux-socket PATH]]

   maosctl interrupt claude --from master --reason "stop: the spec changed, re-read #plan"
   maosctl interrupt claude --reason "wrong branch" --tmux-target agents:0.1`,
		Description: `Interrupts AGENT in one request (POST /v1/agents/AGENT/interrupt):
the node posts an urgent message (type alert, priority urgent) from --from (or
$MAOS_AGENT_ID) to AGENT whose text is "[INTERRUPT] R", on --channel (or
$MAOS_CHANNEL, or else the channel of the agent's presence), and only once it
is stored sends ESC to the agent's terminal pane, through the node that hosts
the agent (found through presence), whose watcher (maosd --agents, delivery
tmux) knows the pane. An agent without a pane gets the urgent message only.
(A watcher whose delivery policy is interrupt preempts the agent's running
invocation on an urgent message.)

Interrupting is its own right, apart from messaging: by default only agents
of the roles master, orchestrator and supervisor, and moderators' tokens, may;
a rules document's interrupt: list replaces the roles (docs/CONFIG.md, Communication
rules; 'maosctl rules check --interrupt --from A' asks). A refusal stores
nothing but a BLOCKED line in the audit trail, sends no ESC and exits 1 with
the rule's words.

With --tmux-target, maosctl sends ESC to that tmux pane on this host instead,
after the node stored the message; --tmux-socket names the tmux server's
socket (tmux -S) when it is not the default one. The message's id is fixed
before the request, so a retried interrupt is stored once.

Prints the message's id and seq, the agent's node and whether ESC was sent;
with --json {"agent","node","message","escape","tmux_target"}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "reason", Usage: "why the agent must stop: the message says \"[INTERRUPT] `REASON`\" (required)"},
			agentFlag("from", "sender agent `ID`"),
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` of the message (default: the agent's presence channel)", EnvVars: []string{envChannel}},
			&cli.StringFlag{Name: "tmux-target", Usage: "also send ESC to the agent's tmux pane `SESSION:WINDOW.PANE` on this host"},
			&cli.StringFlag{Name: "tmux-socket", Usage: "`PATH` of the tmux server's socket (tmux -S); default: the user's server"},
			jsonFlag(),
		},
		Action: interrupt,
	}
}

// interruptResult is what 'maosctl interrupt --json' prints.
type interruptResult struct {
	Agent      string            `json:"agent"`
	Node       string            `json:"node,omitempty"` // from the agent's presence; "" if none
	Message    *api.SendResponse `json:"message"`
	Escape     bool              `json:"escape"` // ESC was sent to TmuxTarget
	TmuxTarget string            `json:"tmux_target,omitempty"`
}

func interrupt(c *cli.Context) error {
	args, err := positionalArgs(c, "agent")
	if err != nil {
		return err
	}
	if err := require(c, "reason", "from"); err != nil {
		return err
	}
	agent := strings.TrimSpace(args[0])
	from := strings.TrimSpace(c.String("from"))
	target := strings.TrimSpace(c.String("tmux-target"))
	root := rootContext(c)

	ctx, cancel := call(root)
	defer cancel()
	ir, err := apiClient(c).InterruptAgent(ctx, agent, api.InterruptRequest{
		From:      from,
		Reason:    c.String("reason"),
		Channel:   strings.TrimSpace(c.String("channel")),
		ID:        api.NewID(from, time.Now()),
		LocalPane: target != "",
	})
	if err != nil {
		return apiError(root, err)
	}
	res := interruptResult{Agent: agent, Node: ir.Node, TmuxTarget: target, Escape: ir.Escape,
		Message: &api.SendResponse{ID: ir.ID, Seq: ir.Seq, Timestamp: ir.Timestamp}}
	noESC := ir.NoEscape
	if target != "" {
		// The message is stored: now ESC in the pane on this host.
		if err := (watcher.Tmux{Socket: strings.TrimSpace(c.String("tmux-socket"))}).Interrupt(ctx, target); err != nil {
			return fmt.Errorf("message %s seq=%d sent, but no ESC: %w", ir.ID, ir.Seq, err)
		}
		res.Escape = true
	} else if ir.Escape {
		target = "on node " + ir.Node
	}

	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "interrupt %s: %s seq=%d\n", agent, ir.ID, ir.Seq)
	if res.Node != "" {
		fmt.Fprintf(w, "agent %s is on node %s\n", agent, res.Node)
	}
	if res.Escape {
		_, err = fmt.Fprintf(w, "ESC sent to tmux pane %s\n", target)
	} else {
		_, err = fmt.Fprintf(w, "no ESC sent: %s\n", noESC)
	}
	return err
}
