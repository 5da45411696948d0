package maosctl

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// The acting agent: the agent a command acts as (send --from, approval
// approve --approver, inbox --agent, ...). Its flag wins, then
// $MAOS_AGENT_ID (the flag's env var), then the agent of the token
// (GET /v1/whoami, asked at most once per run). The client refuses no
// agent: the node answers 403 to a token that may not act for the one
// named, and maosctl shows it.

// actingUsage ends the Usage of every acting-agent flag.
const actingUsage = " (default: $" + envAgent + ", else the token's agent)"

// actingFlags holds the flags agentFlag made: the ones require resolves
// through actingAgent instead of refusing when empty.
var actingFlags sync.Map // *cli.StringFlag → struct{}

// agentFlag is the flag name naming the agent the command acts as; what
// says what the agent is ("sender agent `ID`").
func agentFlag(name, what string) *cli.StringFlag {
	f := &cli.StringFlag{Name: name, Usage: what + actingUsage, EnvVars: []string{envAgent}}
	actingFlags.Store(f, struct{}{})
	return f
}

// isActingFlag reports whether c's command's flag name was made by
// agentFlag.
func isActingFlag(c *cli.Context, name string) bool {
	f, ok := commandFlag(c, name).(*cli.StringFlag)
	if !ok {
		return false
	}
	_, ok = actingFlags.Load(f)
	return ok
}

// actingAgent is the agent the command acts as under flag: the flag's
// value (given, or from its env var), else the agent of the configured
// token, else a usage error naming the flag and how to give it. An admin
// token (no agent) and a node without auth give no default.
func actingAgent(c *cli.Context, flag string) (string, error) {
	if v := strings.TrimSpace(c.String(flag)); v != "" {
		return v, nil
	}
	if bearerToken(c) != "" {
		me, err := whoAmI(c)
		if err != nil {
			return "", apiError(c, err)
		}
		if me.Agent != "" {
			return me.Agent, nil
		}
	}
	return "", usagef(c, "--%s is required: give it, set $%s, or use an agent's token", flag, envAgent)
}

// resolveActing sets flag to actingAgent's answer, so every later read of
// the flag sees the acting agent.
func resolveActing(c *cli.Context, flag string) error {
	if strings.TrimSpace(c.String(flag)) != "" {
		return nil
	}
	agent, err := actingAgent(c, flag)
	if err != nil {
		return err
	}
	if err := c.Set(flag, agent); err != nil {
		return fmt.Errorf("--%s: %w", flag, err)
	}
	return nil
}

// whoAmIKey keeps a run's answer to GET /v1/whoami in its App.Metadata.
const whoAmIKey = "maosctl.whoami"

// whoAmI is who the configured token speaks for, asked of the node once
// per run (the app's Metadata keeps the answer). A command with its own
// --max-time (hook, status-line: they must not hold up the agent's turn)
// bounds the question by it too.
func whoAmI(c *cli.Context) (api.WhoAmI, error) {
	if me, ok := c.App.Metadata[whoAmIKey].(api.WhoAmI); ok {
		return me, nil
	}
	ctx, cancel := call(c)
	defer cancel()
	if commandFlag(c, "max-time") != nil {
		var cancelMax context.CancelFunc
		ctx, cancelMax = within(ctx, c.Duration("max-time"))
		defer cancelMax()
	}
	me, err := apiClient(c).WhoAmI(ctx)
	if err != nil {
		return api.WhoAmI{}, err
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[whoAmIKey] = me
	return me, nil
}

// defaultActing sets an optional acting-agent flag to the token's agent
// when it is empty and the token has one; without either it stays empty.
func defaultActing(c *cli.Context, flag string) error {
	if strings.TrimSpace(c.String(flag)) != "" || bearerToken(c) == "" {
		return nil
	}
	me, err := whoAmI(c)
	if err != nil {
		return apiError(c, err)
	}
	if me.Agent == "" {
		return nil
	}
	return c.Set(flag, me.Agent)
}
