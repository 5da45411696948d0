package maosctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/urfave/cli/v2"
)

// presenceCommands: who is awake, and the gossip members.
func presenceCommands() []*cli.Command {
	return []*cli.Command{whoCommand(), membersCommand()}
}

func whoCommand() *cli.Command {
	return &cli.Command{
		Name:      "who",
		Usage:     "show which agents are awake, what they do, and on which node",
		ArgsUsage: "[AGENT]",
		UsageText: `maosctl who [--health] [AGENT]

   maosctl who
   maosctl who codex
   maosctl who --health
   maosctl --json who | jq -r '.agents[] | select(.state == "AWAKE") | .agent_id'
   maosctl --json who --health reviewer-1 | jq .status`,
		Description: `Prints one line per agent the node knows of: agent, state, substate (IDLE,
WORKING, BLOCKED), where the substate came from (source: hook, the agent's
coding-agent hooks; pane, its watcher reading its tmux pane; watcher, its
watcher's own runs; - when the heartbeat did not say), node, channel, last
seen (time since its last heartbeat) and task. An agent whose
heartbeat lapsed (maosd --presence-ttl) or whose node died or left shows
OFFLINE with the reason in parentheses. An agent configured on watchers of
several nodes is served by one of them, which holds the agent's lease; when
any agent has a lease, two more columns show the node serving it (SERVED BY,
- while the lease lapsed) and the nodes standing by to take over (STANDBY).
GET /v1/leases lists the leases themselves, with their fences.

Presence travels by gossip, not through the Raft log: any node answers, and a
heartbeat reaches every node within a fraction of a second. Agents and their
watchers send heartbeats with PUT /v1/presence/AGENT.

With AGENT, only that agent (an error if the node has no record of it). With
--json, the object of GET /v1/presence ({"agents":[...]}) or, with AGENT, of
GET /v1/presence/AGENT.

--health prints the agents' health instead (seed 004's agent_health_check):
status, the tasks their watchers report running, succeeded and failed, the
share that failed, the mean run time and the last error. Status is "error"
for an OFFLINE agent, "degraded" for one BLOCKED or with more failed tasks
than succeeded ones, else "healthy". With --json, the health reports
({"agents":[...]}) or, with AGENT, GET /v1/agents/AGENT/health.`,
		Flags: []cli.Flag{jsonFlag(),
			&cli.BoolFlag{Name: "health", Usage: "print each agent's task health (status, counts, mean run time, last error)"}},
		Action: who,
	}
}

func who(c *cli.Context) error {
	pos, err := trailingFlags(c)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef(c, "unexpected argument %q (who takes at most one AGENT)", pos[1])
	}
	ctx, cancel := call(c)
	defer cancel()
	if c.Bool("health") {
		return whoHealth(ctx, c, pos)
	}
	var list []api.Presence
	if len(pos) == 1 {
		p, err := apiClient(c).AgentPresence(ctx, pos[0])
		if err != nil {
			return apiError(c, err)
		}
		if wantJSON(c) {
			return printJSON(c.App.Writer, p)
		}
		list = []api.Presence{p}
	} else {
		if list, err = apiClient(c).Presence(ctx); err != nil {
			return apiError(c, err)
		}
		if list == nil {
			list = []api.Presence{}
		}
		if wantJSON(c) {
			return printJSON(c.App.Writer, api.PresenceResponse{Agents: list})
		}
	}
	if len(list) == 0 {
		fmt.Fprintln(c.App.Writer, "no agent has sent a heartbeat")
		return nil
	}
	return printWho(c.App.Writer, list, time.Now())
}

// printWho writes the who table; now is the time last seen is measured
// from.
// When any agent's watchers take its lease (an agent configured on
// several nodes), two more columns say which node serves it and which
// stand by.
func printWho(w io.Writer, list []api.Presence, now time.Time) error {
	leased := slices.ContainsFunc(list, func(p api.Presence) bool { return p.ServedBy != "" || p.Standby != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "AGENT\tSTATE\tSUBSTATE\tSOURCE\tNODE\tCHANNEL\tLAST SEEN\tTASK"
	if leased {
		header += "\tSERVED BY\tSTANDBY"
	}
	fmt.Fprintln(tw, header)
	for _, p := range list {
		state := p.State
		if p.Reason != "" {
			state += " (" + p.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", p.AgentID, state, or(p.Substate, "-"), or(p.Source, "-"), or(p.Node, "-"),
			or(p.Channel, "-"), ago(now, p.Timestamp), or(p.Task, "-"))
		if leased {
			fmt.Fprintf(tw, "\t%s\t%s", or(p.ServedBy, "-"), or(string(p.Standby), "-"))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// whoHealth is 'who --health': the health report of AGENT (pos[0]) or of
// every agent the node knows of.
func whoHealth(ctx context.Context, c *cli.Context, pos []string) error {
	var reports []api.HealthReport
	if len(pos) == 1 {
		h, err := apiClient(c).AgentHealth(ctx, pos[0])
		if err != nil {
			return apiError(c, err)
		}
		if wantJSON(c) {
			return printJSON(c.App.Writer, h)
		}
		reports = append(reports, h)
	} else {
		list, err := apiClient(c).Presence(ctx)
		if err != nil {
			return apiError(c, err)
		}
		reports = []api.HealthReport{}
		for i := range list {
			reports = append(reports, list[i].Health())
		}
		if wantJSON(c) {
			return printJSON(c.App.Writer, struct {
				Agents []api.HealthReport `json:"agents"`
			}{reports})
		}
	}
	if len(reports) == 0 {
		fmt.Fprintln(c.App.Writer, "no agent has sent a heartbeat")
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATUS\tRUNNING\tSUCCEEDED\tFAILED\tERROR RATE\tMEAN\tLAST ERROR")
	for _, h := range reports {
		status := h.Status
		if h.Reason != "" {
			status += " (" + h.Reason + ")"
		}
		mean := "-"
		if h.MeanDurationMS > 0 {
			mean = (time.Duration(h.MeanDurationMS) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f%%\t%s\t%s\n", h.AgentID, status, h.TasksRunning, h.TasksSucceeded,
			h.TasksFailed, h.ErrorRatePercentage, mean, or(h.LastError, "-"))
	}
	return tw.Flush()
}

// ago is how long before now t was, for people: "4s ago", "3m ago",
// "2h5m ago", "3d ago"; "just now" for a time in the future (clock skew).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	}
}

func membersCommand() *cli.Command {
	return &cli.Command{
		Name:  "members",
		Usage: "list the gossip members with their status and addresses",
		UsageText: `maosctl members

   maosctl members
   maosctl --json members | jq -r '.members[] | select(.status != "alive") | .node_id'`,
		Description: `Prints the answering node's view of gossip membership: each node with its
status (alive; dead: declared dead by gossip failure detection, about five
seconds after it stopped answering; left: shut down cleanly), its gossip,
API and Raft addresses and its maosd version. '*' marks the node
that answered. Raft membership is 'maosctl cluster status'.

With --json, the object of GET /v1/cluster/members.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: members,
	}
}

func members(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).Members(ctx)
	if err != nil {
		return apiError(c, err)
	}
	if res.Members == nil {
		res.Members = []api.Member{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	w := c.App.Writer
	enc := "no (start every maosd with the same --gossip-key to encrypt it)"
	if res.Encrypted {
		enc = "yes"
	}
	fmt.Fprintf(w, "gossip seen from %s; encrypted: %s\n\n", or(res.NodeID, "-"), enc)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tSTATUS\tGOSSIP ADDR\tAPI ADDR\tRAFT ADDR\tVERSION")
	for _, m := range res.Members {
		mark := " "
		if m.NodeID == res.NodeID {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\n", mark, m.NodeID, or(m.Status, "-"), or(m.GossipAddr, "-"),
			or(m.APIAddr, "-"), or(m.RaftAddr, "-"), or(m.Version, "-"))
	}
	return tw.Flush()
}
