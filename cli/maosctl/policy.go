package maosctl

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// The run-time delivery policy of an agent (fsm/policy_set.go): set, shown
// and cleared here, followed by every watcher of the agent.

func policyCommand() *cli.Command {
	agent := func() cli.Flag {
		return agentFlag("agent", "agent `ID` whose policy it is")
	}
	from := func(usage string) cli.Flag { return &cli.StringFlag{Name: "from", Usage: usage} }
	return &cli.Command{
		Name:  "policy",
		Usage: "change how an agent takes its mail at run time: queue, interrupt, fork or quiet",
		UsageText: `maosctl policy set|get|clear [--agent A] ...

   maosctl policy set --agent claude --mode quiet --for 1h
   maosctl policy get --agent claude`,
		Description: `A run-time policy overrides, for one agent, the delivery mode its watchers
read from their YAML (policy.mode and policy.overrides): every watcher of the
agent follows it within a second, with no restart, and stops when it is
cleared or its --for ends. A per-sender policy (--from S) applies to S's mail
only and wins over the agent-wide one.

Modes: queue (one message at a time), interrupt (the agent is interrupted
first), fork (each message handled at once by a temporary agent A-fork-N,
which answers the sender and leaves A a note; needs a command), quiet (everything but urgent mail is
held until the policy ends, then delivered in order: nothing is lost).

Setting or clearing needs the agent's own token or an admin's.`,
		Subcommands: []*cli.Command{
			{
				Name:  "set",
				Usage: "set an agent's policy, for all its mail or one sender's",
				UsageText: `maosctl policy set [--agent A] --mode queue|interrupt|fork|quiet [--from S] [--for D]

   maosctl policy set --agent claude --mode quiet --for 1h
   maosctl policy set --agent claude --from lead --mode interrupt`,
				Description: `Sets agent A's run-time policy: for all its mail, or with --from S for S's
mail only, replacing the one set before for the same mail. --for ends it
that long after it is stored (by the watcher's clock as it decides each
message); without it, it lasts until 'policy clear'. Prints the policy; with
--json, the stored policy {"agent","mode","from","until","set_by","set_at"}.`,
				Flags: []cli.Flag{
					agent(),
					&cli.StringFlag{Name: "mode", Usage: "`MODE`: " + strings.Join(api.PolicyModes, ", ") + " (required)"},
					from("apply to mail from agent `ID` only"),
					&cli.DurationFlag{Name: "for", Usage: "end it after `D` (whole seconds, at most 720h); default: until cleared"},
					jsonFlag(),
				},
				Action: policySet,
			},
			{
				Name:  "get",
				Usage: "show the run-time policies in force for an agent",
				UsageText: `maosctl policy get [--agent A] [--strong]

   maosctl policy get --agent claude`,
				Description: `Shows the run-time layer: the agent-wide policy and the per-sender ones in
force now. Mail they do not cover follows the watcher's YAML policy, which
lives on the watcher's host and is not visible from here. With --json, the
GET /v1/agents/A/policy answer {"agent","policies":[...]}.`,
				Flags:  []cli.Flag{agent(), strongFlag(), jsonFlag()},
				Action: policyGet,
			},
			{
				Name:  "clear",
				Usage: "clear an agent's run-time policy: its watchers' YAML applies again",
				UsageText: `maosctl policy clear [--agent A] [--from S]

   maosctl policy clear --agent claude
   maosctl policy clear --agent claude --from lead`,
				Description: `Clears agent A's agent-wide run-time policy, or with --from S the one for
S's mail; the watchers' YAML policy applies to that mail again. Clearing
what is not set succeeds and says so; with --json {"cleared": false}.`,
				Flags:  []cli.Flag{agent(), from("clear the policy for mail from agent `ID` instead of the agent-wide one"), jsonFlag()},
				Action: policyClear,
			},
		},
	}
}

func policySet(c *cli.Context) error {
	if err := noArgs(c, "agent", "mode"); err != nil {
		return err
	}
	d := c.Duration("for")
	if d < 0 || d%time.Second != 0 || d > api.MaxPolicyFor*time.Second {
		return usagef(c, "--for %s: must be whole seconds, at most 720h (30 days)", d)
	}
	req := api.PolicyRequest{Mode: strings.TrimSpace(c.String("mode")), From: strings.TrimSpace(c.String("from")), ForSeconds: int64(d / time.Second)}
	agent := strings.TrimSpace(c.String("agent"))
	ctx, cancel := call(c)
	defer cancel()
	p, err := apiClient(c).SetPolicy(ctx, agent, req)
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, p, "%s: %s %s, %s\n", agent, policyScope(p), p.Mode, policyEnd(p, time.Now()))
}

func policyGet(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	agent := strings.TrimSpace(c.String("agent"))
	ctx, cancel := call(c)
	defer cancel()
	set, err := apiClient(c).Policy(ctx, agent, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, set)
	}
	w := c.App.Writer
	if len(set.Policies) == 0 {
		_, err := fmt.Fprintf(w, "%s: no run-time policy; its watchers' YAML policy applies\n", agent)
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MAIL\tMODE\tENDS\tSET BY\tSOURCE")
	wide := false
	for _, p := range set.Policies {
		wide = wide || p.From == ""
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s at %s\trun time\n", policyScope(p), p.Mode, policyEnd(p, now), p.SetBy, p.SetAt.Local().Format(time.DateTime))
	}
	if !wide {
		fmt.Fprintf(tw, "other mail\t(YAML)\t\t\twatcher config\n")
	}
	return tw.Flush()
}

func policyClear(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	agent := strings.TrimSpace(c.String("agent"))
	ctx, cancel := call(c)
	defer cancel()
	p, err := apiClient(c).ClearPolicy(ctx, agent, strings.TrimSpace(c.String("from")))
	if err != nil {
		return apiError(c, err)
	}
	what := "cleared"
	if !p.Cleared {
		what = "none was set"
	}
	return printResult(c, p, "%s: %s policy %s; its watchers' YAML applies\n", agent, policyScope(p), what)
}

// policyScope is the mail a policy covers, as the verbs print it.
func policyScope(p api.Policy) string {
	if p.From == "" {
		return "all mail"
	}
	return "from " + p.From
}

// policyEnd says when p ends, relative to now.
func policyEnd(p api.Policy, now time.Time) string {
	if p.Until.IsZero() {
		return "until cleared"
	}
	return fmt.Sprintf("until %s (in %s)", p.Until.Local().Format(time.DateTime), p.Until.Sub(now).Round(time.Second))
}
