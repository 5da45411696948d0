package maosctl

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/internal/secretfile"
)

// mailboxCommands are the maosctl commands of the mailbox group: the
// agent registry (here), inboxes and read marks (maosctl_inbox.go), replies,
// threads and receipts (maosctl_reply.go).
func mailboxCommands() []*cli.Command {
	return []*cli.Command{
		agentsCommand(),
		inboxCommand(),
		showCommand(),
		readMarkCommand(),
		replyCommand(),
		threadCommand(),
		receiptsCommand(),
		channelCommand(),
		tailCommand(),
		watchCommand(),
		benchCommand(),
		importCommand(),
		mirrorCommand(),
		mcpCommand(),
		statusLineCommand(), hookCommand(),
	}
}

func agentsCommand() *cli.Command {
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
			agentsListCommand("list", false),
			agentsRegisterCommand(),
			agentsUnregisterCommand(),
			agentsListCommand("find", true),
			agentsRolesCommand(),
		},
		Action: noCommand,
	}
}

func agentsListCommand(name string, find bool) *cli.Command {
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
			strongFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error { return agentsList(c, find) },
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

func agentsList(c *cli.Context, find bool) error {
	if err := noArgs(c); err != nil {
		return err
	}
	q := api.AgentQuery{Role: strings.TrimSpace(c.String("role")), Capability: strings.TrimSpace(c.String("capability")), Limit: api.MaxPageLimit}
	if find && q.Role == "" && q.Capability == "" {
		return usagef(c, "give --role or --capability")
	}
	client := apiClient(c)
	var agents []api.Agent
	for {
		ctx, cancel := call(c)
		page, err := client.Agents(ctx, q, consistency(c))
		cancel()
		if err != nil {
			return apiError(c, err)
		}
		agents = append(agents, page.Agents...)
		if !page.HasMore || len(page.Agents) == 0 {
			break
		}
		q.After = page.Agents[len(page.Agents)-1].ID
	}
	if agents == nil {
		agents = []api.Agent{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, agents)
	}
	if len(agents) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tCAPABILITIES\tNODE\tA2A\tDESCRIPTION")
	for _, a := range agents {
		role := a.Role
		if a.Auto {
			role += " (auto)"
		}
		remote := "-"
		if a.A2A != nil {
			remote = a.A2A.URL
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, role, or(strings.Join(a.Capabilities, ","), "-"),
			or(a.Node, "-"), remote, or(firstLine(a.Description, 60), "-"))
	}
	return tw.Flush()
}

// firstLine is the first line of s, cut to n runes with "…".
func firstLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

func agentsRegisterCommand() *cli.Command {
	return &cli.Command{
		Name:      "register",
		Usage:     "register an agent (again: replace its role, capabilities, description, node)",
		ArgsUsage: "ID",
		UsageText: `maosctl agents register ID [--role R] [--capability C[,D]] [--description D] [--node N]
                                [--a2a URL [--a2a-token-file FILE]]

   maosctl agents register reviewer_1 --role reviewer --capability go,review --node n2
   maosctl agents register orchestrator --role orchestrator --description "assigns the work"
   maosctl agents register reviewer-ext --role reviewer --a2a https://agents.example.com/reviewer --a2a-token-file ~/.maos/reviewer-ext.token`,
		Description: `Registers agent ID (` + api.NamePattern + `) with role R (default
"agent"), capabilities (comma-separated), a description and the node its
watcher runs next to. Registering an id again replaces those fields. The
registration goes into the audit trail. Prints the agent; with --json, the
stored agent object.

With --a2a, the agent is a remote A2A agent (an admin token's act; the
cluster must run state version 3): URL is its base URL (its Agent Card at
URL/.well-known/agent-card.json) or its card's URL. A task or message to
ID is relayed to it by one maosd of the cluster (docs/A2A.md,
"Outbound"): its progress, completion, artifacts and questions come back
as maos's. --a2a-token-file names a file holding the bearer token the
relay sends it (one line); the token is stored in the cluster's
replicated state, shown to no read but the relay's admin-only one.
Registering ID again without --a2a makes it a plain agent.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "role", Usage: "role `R` (default agent)"},
			&cli.StringFlag{Name: "capability", Usage: "capabilities `C[,D]`, comma-separated"},
			&cli.StringFlag{Name: "description", Usage: "free `TEXT` about the agent"},
			&cli.StringFlag{Name: "node", Usage: "`NODE` id the agent's watcher runs next to"},
			&cli.StringFlag{Name: "a2a", Usage: "the remote A2A agent's base or card `URL` (http or https): the agent is that remote agent"},
			&cli.StringFlag{Name: "a2a-token-file", Usage: "`FILE` holding the bearer token to send the --a2a agent (one line)"},
			jsonFlag(),
		},
		Action: agentsRegister,
	}
}

func agentsRegister(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	cmd := api.RegisterAgentCommand{
		ID:           args[0],
		Role:         strings.TrimSpace(c.String("role")),
		Capabilities: splitList([]string{c.String("capability")}),
		Description:  c.String("description"),
		Node:         strings.TrimSpace(c.String("node")),
	}
	if cmd.A2A, err = a2aRemote(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	a, err := apiClient(c).RegisterAgent(ctx, cmd)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, a)
	}
	line := fmt.Sprintf("registered %s (role %s", a.ID, a.Role)
	if len(a.Capabilities) > 0 {
		line += ", capabilities " + strings.Join(a.Capabilities, ",")
	}
	if a.Node != "" {
		line += ", node " + a.Node
	}
	if a.A2A != nil {
		line += ", a2a " + a.A2A.URL
		if a.A2A.Credential {
			line += " with a token"
		}
	}
	_, err = fmt.Fprintln(c.App.Writer, line+")")
	return err
}

// a2aRemote is what --a2a and --a2a-token-file ask for: nil without
// --a2a; the token file read and trimmed (a missing or empty file is an
// error naming the flag).
func a2aRemote(c *cli.Context) (*api.A2ARemote, error) {
	u, file := strings.TrimSpace(c.String("a2a")), strings.TrimSpace(c.String("a2a-token-file"))
	switch {
	case u == "" && file != "":
		return nil, usagef(c, "--a2a-token-file needs --a2a URL")
	case c.IsSet("a2a") && u == "":
		return nil, usagef(c, "--a2a: give the remote A2A agent's URL")
	case u == "":
		return nil, nil
	}
	r := &api.A2ARemote{URL: u}
	if file != "" {
		tok, _, err := secretfile.Read(file)
		if err != nil {
			return nil, usagef(c, "--a2a-token-file: %v", err)
		}
		r.Credential = tok
	}
	return r, nil
}

func agentsUnregisterCommand() *cli.Command {
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
		Flags:  []cli.Flag{jsonFlag()},
		Action: agentsUnregister,
	}
}

func agentsUnregister(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	a, err := apiClient(c).UnregisterAgent(ctx, args[0])
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, a, "unregistered %s (role %s)\n", a.ID, a.Role)
}

func agentsRolesCommand() *cli.Command {
	return &cli.Command{
		Name:  "roles",
		Usage: "role summary: each role and how many agents have it",
		UsageText: `maosctl agents roles [--strong]

   maosctl agents roles
   maosctl --json agents roles | jq .reviewer`,
		Description: `Prints each role with its number of registered agents, by role name. With
--json, an object role → count.`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: agentsRoles,
	}
}

func agentsRoles(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	roles, err := apiClient(c).Roles(ctx, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if roles == nil {
		roles = map[string]uint64{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, roles)
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
