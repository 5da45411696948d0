package maosctl

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/watcher"
	"github.com/urfave/cli/v2"
)

// Shape of the message 'maosctl interrupt' posts.
const (
	interruptType     = "alert"
	interruptPriority = fsm.PriorityUrgent
	interruptPrefix   = "[INTERRUPT] "
)

func interruptCommand() *cli.Command {
	return &cli.Command{
		Name:  "interrupt",
		Usage: "stop an agent: an urgent [INTERRUPT] message, and ESC to its tmux pane",
		UsageText: `maosctl interrupt AGENT --reason R [--from A] [--channel CH] [--tmux-target SESSION:WINDOW.PANE [--tmux-socket PATH]]

   maosctl interrupt claude --from master --reason "stop: the spec changed, re-read #plan"
   maosctl interrupt claude --reason "wrong branch" --tmux-target agents:0.1`,
		Description: `Checks with the communication rules (POST /v1/rules/check) that the sender
may message AGENT, and refuses (exit 1, nothing sent) if not: by default only
the roles the rules let message an agent (a master or orchestrator) can
interrupt it.

It then posts an urgent message (type alert, priority urgent) from --from (or
$MAOS_AGENT_ID) to AGENT whose text is "[INTERRUPT] R", on --channel (or
$MAOS_CHANNEL, or else the channel of the agent's presence). That message is
the interrupt's record in the audit trail: it is posted before any ESC is
sent, so no interrupt goes unrecorded. (A watcher whose delivery policy is
interrupt preempts the agent's running invocation on an urgent message.)

Then it sends ESC to the agent's terminal pane: through the node that hosts
the agent (found through presence), whose watcher (maosd --agents, delivery
tmux) knows the pane; an agent without a pane gets the urgent message only.
With --tmux-target, maosctl sends ESC to that tmux pane on this host instead;
--tmux-socket names the tmux server's socket (tmux -S) when it is not the
default one.

Prints the message's id and seq, the agent's node and whether ESC was sent;
with --json {"agent","node","message","escape","tmux_target"}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "reason", Usage: "why the agent must stop: the message says \"[INTERRUPT] `REASON`\" (required)"},
			&cli.StringFlag{Name: "from", Usage: "sender agent `ID` (required)", EnvVars: []string{envAgent}},
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
	Agent      string                  `json:"agent"`
	Node       string                  `json:"node,omitempty"` // from the agent's presence; "" if none
	Message    *transport.SendResponse `json:"message"`
	Escape     bool                    `json:"escape"` // ESC was sent to TmuxTarget
	TmuxTarget string                  `json:"tmux_target,omitempty"`
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
	if !fsm.ValidName(agent) {
		return usagef(c, "AGENT %q is not an agent id", agent)
	}
	if !fsm.ValidName(from) {
		return usagef(c, "--from %q is not an agent id", from)
	}
	if from == agent {
		return usagef(c, "--from %s: an agent cannot interrupt itself", from)
	}
	reason := strings.TrimSpace(c.String("reason"))
	target := strings.TrimSpace(c.String("tmux-target"))
	root := rootContext(c)
	cl := apiClient(c)

	ctx, cancel := call(root)
	defer cancel()
	check, err := cl.CheckRules(ctx, transport.RulesCheckRequest{From: from, To: agent}, transport.Local)
	if err != nil {
		return apiError(root, err)
	}
	if !check.Allowed {
		why := check.Reason
		if why == "" {
			why = "the communication rules do not allow it"
		}
		return fmt.Errorf("%s may not interrupt %s: %s (nothing was sent)", from, agent, why)
	}

	res := interruptResult{Agent: agent, TmuxTarget: target}
	channel := strings.TrimSpace(c.String("channel"))
	p, err := cl.AgentPresence(ctx, agent)
	switch {
	case err == nil:
		res.Node = p.Node
		if channel == "" {
			channel = p.Channel
		}
	case !errors.Is(err, fsm.ErrNotFound):
		return apiError(root, err)
	}
	if channel == "" {
		return usagef(c, "missing required flag --channel (or set $%s): the agent's presence names no channel", envChannel)
	}

	m := &fsm.Message{
		ID:       fsm.NewID(from, time.Now()),
		Channel:  channel,
		From:     from,
		To:       fsm.Recipients{agent},
		Type:     interruptType,
		Priority: interruptPriority,
		Title:    interruptTitle(reason),
		Content:  fsm.Content{Text: interruptPrefix + reason},
	}
	sent, err := cl.Send(ctx, m)
	if err != nil {
		return apiError(root, err)
	}
	// One recipient: if the rules changed since the check and block it, the
	// send itself fails (403) and no ESC is sent.
	res.Message = sent

	// After the message, so that every ESC has its record in the log.
	noESC := ""
	switch {
	case target != "":
		if err := (watcher.Tmux{Socket: strings.TrimSpace(c.String("tmux-socket"))}).Interrupt(ctx, target); err != nil {
			return fmt.Errorf("message %s seq=%d sent, but no ESC: %w", sent.ID, sent.Seq, err)
		}
		res.Escape = true
	default:
		// Through the node that hosts the agent: its watcher knows the pane.
		_, err := cl.InterruptAgent(ctx, agent, transport.InterruptRequest{From: from, Reason: reason})
		switch {
		case err == nil:
			res.Escape = true
			target = "on node " + res.Node
		case errors.Is(err, fsm.ErrNotFound):
			// No pane to press ESC in (a command watcher, or no watcher):
			// the urgent message is the whole interrupt.
			noESC = err.Error()
		default:
			return fmt.Errorf("message %s seq=%d sent, but no ESC: %w", sent.ID, sent.Seq, err)
		}
	}

	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "interrupt %s: %s seq=%d\n", agent, sent.ID, sent.Seq)
	if res.Node != "" {
		fmt.Fprintf(w, "agent %s is on node %s\n", agent, res.Node)
	}
	var err2 error
	if res.Escape {
		_, err2 = fmt.Fprintf(w, "ESC sent to tmux pane %s\n", target)
	} else {
		_, err2 = fmt.Fprintf(w, "no ESC sent: %s\n", noESC)
	}
	return err2
}

// interruptTitle is "[INTERRUPT] reason" cut to fsm.MaxTitleLen bytes
// on a rune boundary: the audit trail shows titles, so it shows why.
func interruptTitle(reason string) string {
	t := interruptPrefix + strings.Join(strings.Fields(reason), " ")
	for len(t) > fsm.MaxTitleLen {
		_, size := utf8.DecodeLastRuneInString(t)
		t = t[:len(t)-size]
	}
	return t
}
