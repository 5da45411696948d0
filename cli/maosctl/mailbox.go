package maosctl

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/maos-project/maos/fsm"
	"github.com/urfave/cli/v2"
)

// ctlMailboxCommands are the maosctl commands of the mailbox group: the
// agent registry (here), inboxes and read marks (maosctl_inbox.go), replies,
// threads and receipts (maosctl_reply.go).
func ctlMailboxCommands() []*cli.Command {
	return []*cli.Command{
		ctlAgentsCommand(),
		ctlInboxCommand(),
		ctlShowCommand(),
		ctlReadMarkCommand(),
		ctlReplyCommand(),
		ctlThreadCommand(),
		ctlReceiptsCommand(),
		ctlChannelCommand(),
		ctlTailCommand(),
		ctlWatchCommand(),
		ctlBenchCommand(),
		ctlImportCommand(),
		ctlMirrorCommand(),
		ctlMCPCommand(),
		ctlStatusLineCommand(), ctlHookCommand(),
	}
}

func ctlAgentsCommand() *cli.Command {
	return &cli.Command{
		Name:  "agents",
		Usage: "the agent registry: list, register, unregister, find, roles",
		UsageText: `maosctl agents COMMAND [flags] [args]

   maosctl agents register reviewer_1 --role reviewer --capability go,review
   maosctl agents find --role reviewer`,
		Description: `Agents are registered with an id, a role, capabilities, a description and
the node their watcher runs next to. Messages can then be addressed by role
("role:reviewer"), to everyone ("all") or by glob ("engineer_*"), resolved
against this registry when the message is stored.

A sender that is not registered is registered on the spot with role "agent",
unless the cluster setting strict_senders is on
(maosctl cluster config set strict_senders true): then its sends are refused.`,
		Subcommands: []*cli.Command{
			ctlAgentsListCommand("list", false),
			ctlAgentsRegisterCommand(),
			ctlAgentsUnregisterCommand(),
			ctlAgentsListCommand("find", true),
			ctlAgentsRolesCommand(),
		},
		Action: ctlNoCommand,
	}
}

func ctlAgentsListCommand(name string, find bool) *cli.Command {
	cmd := &cli.Command{
		Name:  name,
		Usage: "list registered agents, optionally of a role or with a capability",
		UsageText: `maosctl agents list [--role R] [--capability C] [--strong]

   maosctl agents list
   maosctl --json agents list --role reviewer | jq -r '.[].id'`,
		Description: `Prints one line per agent: id, role, capabilities, node and description,
in id order. --role and --capability narrow the list (both: agents with
both). With --json, an array of agent objects.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "role", Usage: "only agents of role `R`"},
			&cli.StringFlag{Name: "capability", Usage: "only agents with capability `C`"},
			ctlStrongFlag(),
			ctlJSONFlag(),
		},
		Action: func(c *cli.Context) error { return ctlAgentsList(c, find) },
	}
	if find {
		cmd.Usage = "find agents by role or capability"
		cmd.UsageText = `maosctl agents find --role R | --capability C

   maosctl agents find --role reviewer
   maosctl agents find --capability go --json`
		cmd.Description = `Lists the agents of role R, or with capability C (both: agents with
both), as 'agents list' does. One of --role and --capability is required.`
	}
	return cmd
}

func ctlAgentsList(c *cli.Context, find bool) error {
	if err := ctlNoArgs(c); err != nil {
		return err
	}
	q := fsm.AgentQuery{Role: strings.TrimSpace(c.String("role")), Capability: strings.TrimSpace(c.String("capability")), Limit: fsm.MaxPageLimit}
	if find && q.Role == "" && q.Capability == "" {
		return ctlUsagef(c, "give --role or --capability")
	}
	client := ctlClient(c)
	var agents []fsm.Agent
	for {
		ctx, cancel := ctlCall(c)
		page, err := client.Agents(ctx, q, ctlConsistency(c))
		cancel()
		if err != nil {
			return ctlAPIError(c, err)
		}
		agents = append(agents, page.Agents...)
		if !page.HasMore || len(page.Agents) == 0 {
			break
		}
		q.After = page.Agents[len(page.Agents)-1].ID
	}
	if agents == nil {
		agents = []fsm.Agent{}
	}
	if ctlJSON(c) {
		return ctlPrintJSON(c.App.Writer, agents)
	}
	if len(agents) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tCAPABILITIES\tNODE\tDESCRIPTION")
	for _, a := range agents {
		role := a.Role
		if a.Auto {
			role += " (auto)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, role, ctlOr(strings.Join(a.Capabilities, ","), "-"),
			ctlOr(a.Node, "-"), ctlOr(ctlFirstLine(a.Description, 60), "-"))
	}
	return tw.Flush()
}

// ctlFirstLine is the first line of s, cut to n runes with "…".
func ctlFirstLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

func ctlAgentsRegisterCommand() *cli.Command {
	return &cli.Command{
		Name:      "register",
		Usage:     "register an agent (again: replace its role, capabilities, description, node)",
		ArgsUsage: "ID",
		UsageText: `maosctl agents register ID [--role R] [--capability C[,D]] [--description D] [--node N]

   maosctl agents register reviewer_1 --role reviewer --capability go,review --node n2
   maosctl agents register orchestrator --role orchestrator --description "assigns the work"`,
		Description: `Registers agent ID (^[a-z0-9][a-z0-9._-]{0,63}$) with role R (default
"agent"), capabilities (comma-separated), a description and the node its
watcher runs next to. Registering an id again replaces those fields. The
registration goes into the audit trail. Prints the agent; with --json, the
stored agent object.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "role", Usage: "role `R` (default agent)"},
			&cli.StringFlag{Name: "capability", Usage: "capabilities `C[,D]`, comma-separated"},
			&cli.StringFlag{Name: "description", Usage: "free `TEXT` about the agent"},
			&cli.StringFlag{Name: "node", Usage: "`NODE` id the agent's watcher runs next to"},
			ctlJSONFlag(),
		},
		Action: ctlAgentsRegister,
	}
}

func ctlAgentsRegister(c *cli.Context) error {
	args, err := ctlArgs(c, "id")
	if err != nil {
		return err
	}
	cmd := fsm.RegisterAgentCommand{
		ID:           args[0],
		Role:         strings.TrimSpace(c.String("role")),
		Capabilities: ctlSplitList([]string{c.String("capability")}),
		Description:  c.String("description"),
		Node:         strings.TrimSpace(c.String("node")),
	}
	ctx, cancel := ctlCall(c)
	defer cancel()
	a, err := ctlClient(c).RegisterAgent(ctx, cmd)
	if err != nil {
		return ctlAPIError(c, err)
	}
	if ctlJSON(c) {
		return ctlPrintJSON(c.App.Writer, a)
	}
	line := fmt.Sprintf("registered %s (role %s", a.ID, a.Role)
	if len(a.Capabilities) > 0 {
		line += ", capabilities " + strings.Join(a.Capabilities, ",")
	}
	if a.Node != "" {
		line += ", node " + a.Node
	}
	_, err = fmt.Fprintln(c.App.Writer, line+")")
	return err
}

func ctlAgentsUnregisterCommand() *cli.Command {
	return &cli.Command{
		Name:      "unregister",
		Usage:     "remove an agent from the registry (its inbox stays)",
		ArgsUsage: "ID",
		UsageText: `maosctl agents unregister ID

   maosctl agents unregister reviewer_1`,
		Description: `Removes agent ID from the registry: it no longer matches "all", its role or
globs. Its inbox and read marks stay (messages sent to its id still arrive),
and registering it again brings it back. The unregistration goes into the
audit trail.`,
		Flags:  []cli.Flag{ctlJSONFlag()},
		Action: ctlAgentsUnregister,
	}
}

func ctlAgentsUnregister(c *cli.Context) error {
	args, err := ctlArgs(c, "id")
	if err != nil {
		return err
	}
	ctx, cancel := ctlCall(c)
	defer cancel()
	a, err := ctlClient(c).UnregisterAgent(ctx, args[0])
	if err != nil {
		return ctlAPIError(c, err)
	}
	if ctlJSON(c) {
		return ctlPrintJSON(c.App.Writer, a)
	}
	_, err = fmt.Fprintf(c.App.Writer, "unregistered %s (role %s)\n", a.ID, a.Role)
	return err
}

func ctlAgentsRolesCommand() *cli.Command {
	return &cli.Command{
		Name:  "roles",
		Usage: "role summary: each role and how many agents have it",
		UsageText: `maosctl agents roles [--strong]

   maosctl agents roles
   maosctl --json agents roles | jq .reviewer`,
		Description: `Prints each role with its number of registered agents, by role name. With
--json, an object role → count.`,
		Flags:  []cli.Flag{ctlStrongFlag(), ctlJSONFlag()},
		Action: ctlAgentsRoles,
	}
}

func ctlAgentsRoles(c *cli.Context) error {
	if err := ctlNoArgs(c); err != nil {
		return err
	}
	ctx, cancel := ctlCall(c)
	defer cancel()
	roles, err := ctlClient(c).Roles(ctx, ctlConsistency(c))
	if err != nil {
		return ctlAPIError(c, err)
	}
	if roles == nil {
		roles = map[string]uint64{}
	}
	if ctlJSON(c) {
		return ctlPrintJSON(c.App.Writer, roles)
	}
	if len(roles) == 0 {
		return nil
	}
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tAGENTS")
	for _, r := range names {
		fmt.Fprintf(tw, "%s\t%d\n", r, roles[r])
	}
	return tw.Flush()
}
