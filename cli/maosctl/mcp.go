package maosctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/internal/version"
	"github.com/maos-project/maos/mcpserver"
)

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "run a Model Context Protocol server on stdio for one agent",
		UsageText: `maosctl [--addr HOST:PORT] mcp [--agent A] [--channel CH]

   maosctl --addr 127.0.0.1:7070 mcp --agent claude --channel review
   claude mcp add maos -- maosctl --addr 127.0.0.1:7070 mcp --agent claude`,
		Description: `Speaks MCP (JSON-RPC, one message a line) on stdin/stdout, so a coding
agent's CLI can start it as a tool server. Every tool acts as agent A
(--agent, else $MAOS_AGENT_ID, else the token's agent) and talks to the
node at --addr (any node; writes are forwarded to the leader):

   send_message    send to ids, all, role:NAME (channel: --channel unless
                   given); with reply_to and no to, reply to the sender in
                   the same channel and thread
   list_messages   A's inbox: ids and titles, no bodies (unread, from,
                   priority, channel, thread filters)
   read            a message in full, marked read in A's inbox; or an
                   artifact (sha256: id): text inline, else saved to a file
   who             presence of every agent
   lock            acquire, renew, release or check a file lock lease
   create_task     a task for an agent, role:NAME or capability:NAME
   list_tasks      tasks by state, to, from, claimed_by
   complete_task   finish a task (claiming it first if it is ready)
   share_artifact  upload a file or text; its id goes in send_message's
                   artifacts

A refused call comes back to the model as a tool error carrying the API's
message. The global --timeout bounds each API call. Diagnostics go to
stderr; stdout carries only the protocol.`,
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` every tool acts as"),
			&cli.StringFlag{Name: "channel", Usage: "default `CHANNEL` of send_message", Value: api.DefaultChannel, EnvVars: []string{envChannel}},
		},
		Action: runMCP,
	}
}

func runMCP(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	hc := &http.Client{Transport: httpTransport(c), Timeout: rootContext(c).Duration("timeout")}
	agent := strings.TrimSpace(c.String("agent"))
	client := newAPIClient(c, nodeAddr(c), hc).WithToken(bearerToken(c))
	srv, err := mcpserver.New(mcpserver.Config{
		Agent:   agent,
		Client:  client,
		Channel: strings.TrimSpace(c.String("channel")),
		Version: version.Get().Version,
	})
	if err != nil {
		return usagef(c, "--agent: %v", err)
	}
	if err := checkSpeaksFor(c, agent); err != nil {
		return apiError(c, err)
	}
	ctx := commandContext(c)
	var tr mcp.Transport = &mcp.StdioTransport{}
	if out := rawWriter(c.App.Writer); c.App.Reader != os.Stdin || out != os.Stdout {
		// Embedded (tests): speak over the app's own streams.
		tr = &mcp.IOTransport{Reader: io.NopCloser(c.App.Reader), Writer: nopWriteCloser{out}}
	}
	err = srv.Run(ctx, tr)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "EOF") {
		// The client closing stdin is the normal end of a session.
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// checkSpeaksFor fails fast when the token cannot act as agent (a
// token of another agent), instead of every tool call answering 403. An
// unreachable node is not an error here: the tools report it when used.
// It asks whoAmI, so a run that defaulted --agent to the token's asks once.
func checkSpeaksFor(c *cli.Context, agent string) error {
	me, err := whoAmI(c)
	var apiErr *api.APIError
	switch {
	case err != nil && !errors.As(err, &apiErr):
		return nil
	case err != nil:
		return err
	case !me.MaySpeakFor(agent):
		return fmt.Errorf("--agent %s: the token (MAOS_TOKEN) is agent %s's (role %s), so every tool would be refused; use %s's token", agent, me.Agent, me.Role, agent)
	}
	return nil
}
