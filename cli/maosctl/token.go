package maosctl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/internal/secretfile"
)

// tokenRoles are the roles 'token create --role' accepts.
var tokenRoles = []string{string(api.RoleAgent), string(api.RoleModerator), string(api.RoleAdmin)}

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "create, list and revoke the bearer tokens of a cluster running with --auth",
		UsageText: `maosctl token COMMAND [flags] [args]

   export MAOS_TOKEN_FILE=admin.token          # the admin bootstrap token
   maosctl token create --agent codex > codex.token
   maosctl token list
   maosctl token revoke tok-3f9a0c1e5b7d2468`,
		Description: `A cluster whose nodes run with maosd --auth wants "Authorization: Bearer
TOKEN" on every API call; maosctl sends --token, $MAOS_TOKEN or the content
of --token-file/$MAOS_TOKEN_FILE. Every token belongs to an agent and has a
role:

   agent       acts only as its agent -- sends with "from" set to it, marks
               its mail read, holds its locks -- and reads only its own
               inbox (acting as anyone else is refused, 403); channels,
               threads and the other shared reads are open to any token
   moderator   an agent that also reads every inbox and every private
               message, may interrupt anyone and force-release any lock
               (an operator's supervisor; --role supervisor is taken as
               moderator)
   admin       everything, including cluster operations: join, remove,
               snapshot, rules and tokens. The admin bootstrap token of
               maosd --admin-token-file is an admin token.

A registry role (lead, orchestrator, …) and capabilities are granted, not
taken: an agent's token registers it only with the role and capabilities
given at 'token create --agent-role R --capability C' (none: role agent);
an admin token registers any (docs/TRUST.md).

Managing tokens needs an admin token. Only a hash of each token is stored
and replicated, so a token's secret is shown once, by 'token create', and
never again: keep it in a file only its agent can read. A revoked token is
refused by each node as soon as it applies the revoke, well within a second
of the revoke committing. Missing, wrong or revoked tokens get 401; a token
used beyond its role gets 403; both are audited.`,
		Subcommands: []*cli.Command{
			tokenCreateCommand(),
			tokenListCommand(),
			tokenRevokeCommand(),
			tokenWhoamiCommand(),
		},
		Action: noCommand,
	}
}

func tokenCreateCommand() *cli.Command {
	return &cli.Command{
		Name:  "create",
		Usage: "make a new token for an agent and print its secret, once",
		UsageText: `maosctl token create --agent ID [--role agent|moderator|admin] [--agent-role ROLE] [--capability C[,D]] [--json]

   (umask 077; maosctl token create --agent codex > codex.token)
   maosctl token create --agent lead --agent-role lead > lead.token
   maosctl token create --agent supervisor --role moderator`,
		Description: `Creates a token for --agent with --role (default agent; see 'maosctl token
--help' for what the roles may do) and prints its secret alone on one line
on stdout, so it can go straight into a file for --token-file, and on stderr
its id and a reminder that it cannot be shown again: only a hash of it is
stored. With --json, {"id","agent","role","created_at","token"}. Needs an
admin token.

--agent-role and --capability are the token's grant: the registry role and
the capabilities its agent (and the agent's forks) may register itself with
('maosctl agents register', a watcher's role and claim: capability:NAME).
Without them the agent registers itself with the default role and no
capability; only an admin registers an agent with more (docs/TRUST.md).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "agent `ID` the token speaks for (required)"},
			&cli.StringFlag{Name: "role", Value: string(api.RoleAgent),
				Usage: "`ROLE` of the token: " + strings.Join(tokenRoles, ", ")},
			&cli.StringFlag{Name: "agent-role", Usage: "registry `ROLE` the agent may register itself with (lead, orchestrator, …)"},
			&cli.StringFlag{Name: "capability", Usage: "capabilities `C[,D]` the agent may register itself with, comma-separated"},
			jsonFlag(),
		},
		Action: tokenCreate,
	}
}

func tokenCreate(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	role := strings.TrimSpace(c.String("role"))
	if role == "supervisor" {
		// The and the seed systems' name for a moderator.
		role = string(api.RoleModerator)
	}
	if !slices.Contains(tokenRoles, role) {
		return usagef(c, "--role %q is not one of %s", role, strings.Join(tokenRoles, ", "))
	}
	ctx, cancel := call(c)
	defer cancel()
	req := api.TokenRequest{Agent: strings.TrimSpace(c.String("agent")), Role: role,
		AgentRole: strings.TrimSpace(c.String("agent-role")), Capabilities: splitList([]string{c.String("capability")})}
	tok, err := apiClient(c).CreateTokenFor(ctx, req)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, tok)
	}
	if _, err := fmt.Fprintln(c.App.Writer, tok.Token); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.ErrWriter, "created token %s for agent %s (role %s); its secret, printed on stdout, cannot be shown "+
		"again (only its hash is stored): save it now, e.g. in a file for MAOS_TOKEN_FILE\n", tok.ID, tok.Agent, tok.Role)
	return err
}

func tokenListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the tokens: id, agent, role, created, revoked",
		UsageText: `maosctl token list [--json]

   maosctl --json token list | jq -r '.[] | select(.revoked_at == null) | .id'`,
		Description: `Prints every token the cluster knows, revoked ones too, with its agent,
role and the times it was created and revoked ("-" while it is valid). The
secrets are not stored, so they cannot be listed. With --json, the API's
array of token objects. Needs an admin token.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: tokenList,
	}
}

func tokenList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	list, err := apiClient(c).Tokens(ctx)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		if list == nil {
			return printJSON(c.App.Writer, []any{})
		}
		return printJSON(c.App.Writer, list)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tROLE\tCREATED\tREVOKED")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, or(t.Agent, "-"), t.Role, formatTime(t.CreatedAt, false), formatTime(t.RevokedAt, false))
	}
	return tw.Flush()
}

func tokenRevokeCommand() *cli.Command {
	return &cli.Command{
		Name:  "revoke",
		Usage: "revoke a token: every node refuses it once the revoke is committed",
		UsageText: `maosctl token revoke ID

   maosctl token revoke tok-3f9a0c1e5b7d2468`,
		Description: `Revokes the token ID (from 'token create' or 'token list'). The command
returns once the revoke is committed; every node then refuses the token
(401) within about a second. Revoking a revoked token is not an error.
Needs an admin token.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: tokenRevoke,
	}
}

func tokenRevoke(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	id := strings.TrimSpace(args[0])
	ctx, cancel := call(c)
	defer cancel()
	if err := apiClient(c).RevokeToken(ctx, id); err != nil {
		return apiError(c, err)
	}
	return printResult(c, map[string]string{"revoked": id}, "revoked %s\n", id)
}

func tokenWhoamiCommand() *cli.Command {
	return &cli.Command{
		Name:  "whoami",
		Usage: "show the agent and role the token maosctl sends speaks for",
		UsageText: `maosctl token whoami [--json]

   maosctl --token-file codex.token token whoami`,
		Description: `Asks the node who the token maosctl sends (--token, $MAOS_TOKEN or
--token-file) is: its agent, role and id. Prints "auth off" for a node
without --auth. A missing, wrong or revoked token gets 401.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: tokenWhoami,
	}
}

func tokenWhoami(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	me, err := apiClient(c).WhoAmI(ctx)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, me)
	}
	switch {
	case !me.Auth:
		_, err = fmt.Fprintln(c.App.Writer, "auth off: the node takes every request as unrestricted")
	case me.Agent == "":
		_, err = fmt.Fprintf(c.App.Writer, "admin bootstrap token (role %s, id %s)\n", me.Role, me.TokenID)
	default:
		_, err = fmt.Fprintf(c.App.Writer, "agent %s, role %s, token %s\n", me.Agent, me.Role, me.TokenID)
	}
	return err
}

// bearerToken is the bearer token of the global --token (or $MAOS_TOKEN, or
// the content of --token-file, loaded by loadToken); "" for none.
func bearerToken(c *cli.Context) string {
	return strings.TrimSpace(rootContext(c).String("token"))
}

// loadToken reads --token-file into --token when no --token is given,
// so every client built by apiClient carries it. It is the app's Before.
func loadToken(c *cli.Context) error {
	file := strings.TrimSpace(c.String("token-file"))
	if strings.TrimSpace(c.String("token")) != "" || file == "" {
		return nil
	}
	secret, _, err := secretfile.Read(file)
	if errors.Is(err, secretfile.ErrEmpty) {
		// An agent's token is made by the cluster, not at random.
		return fmt.Errorf("--token-file (or $%s): %w; an admin makes an agent's token with: maosctl token create --agent ID > %s",
			envTokenFile, err, file)
	}
	if err != nil {
		return fmt.Errorf("--token-file (or $%s): %w", envTokenFile, err)
	}
	return c.Set("token", secret)
}

// unauthorizedHint tells the user what to do about a 401: give a token,
// or a valid one.
func unauthorizedHint(c *cli.Context) string {
	if bearerToken(c) == "" {
		return fmt.Sprintf("the node runs with --auth: set %s (or --token, or --token-file/$%s) to a token from 'maosctl token create'",
			envToken, envTokenFile)
	}
	return fmt.Sprintf("the token given (--token, $%s or --token-file) was refused: it may be revoked, mistyped or from "+
		"another cluster; set %s to a valid one ('maosctl token create' by an admin)", envToken, envToken)
}
