package maosctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Hook limits.
const (
	// hookDefaultMaxTime bounds all of a hook's requests: the coding
	// agent waits for the hook before it goes on.
	hookDefaultMaxTime = 2 * time.Second
	// hookMaxInput bounds the hook JSON read from stdin.
	hookMaxInput = 4 << 20
)

// How much unread mail a digest reads: hookMaxPages pages of
// hookPageLimit, newest first; the rest is counted as left out.
// Variables so a test can make them small.
var (
	hookMaxPages  = 5
	hookPageLimit = api.MaxPageLimit
)

// hookInput is the part of the hook's stdin JSON maosctl reads. Claude
// Code, Codex and Gemini CLI all send hook_event_name, session_id and cwd
// (the event names differ: hookDialects);
// stop_hook_active on Stop (true when the agent is already continuing
// because a Stop hook blocked); source on SessionStart (startup, resume,
// clear; Claude Code also compact); the tool call (tool_name,
// tool_input; tool_use_id but on Gemini CLI) on PreToolUse/BeforeTool; and
// Claude Code notification_type on Notification (idle_prompt when it has
// waited for input a while, permission_prompt, …).
type hookInput struct {
	HookEventName    string          `json:"hook_event_name"`
	StopHookActive   bool            `json:"stop_hook_active"`
	Source           string          `json:"source"`
	NotificationType string          `json:"notification_type"`
	SessionID        string          `json:"session_id"`
	Cwd              string          `json:"cwd"`
	ToolName         string          `json:"tool_name"`
	ToolInput        json.RawMessage `json:"tool_input"`
	ToolUseID        string          `json:"tool_use_id"`
}

// hookContextOutput is the answer to SessionStart and UserPromptSubmit:
// text added to the model's context.
type hookContextOutput struct {
	HookSpecificOutput struct {
		HookEventName     string `json:"hookEventName"`
		AdditionalContext string `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// hookStopOutput is the answer to Stop that keeps the agent working:
// reason is shown to the model (Claude Code) or becomes its continuation
// prompt (Codex).
type hookStopOutput struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

func hookCommand() *cli.Command {
	var subs []*cli.Command
	for _, name := range hookDialectNames() {
		subs = append(subs, hookDialectCommand(hookDialects[name]))
	}
	return &cli.Command{
		Name:  "hook",
		Usage: "coding-agent hooks: tell Claude Code, Codex or Gemini CLI about unread mail, gate risky tool calls on approvals",
		UsageText: `maosctl hook claude-code|codex|gemini [--agent A] [--gate FILE]

   echo '{"hook_event_name":"SessionStart"}' | maosctl hook claude-code --agent claude
   maosctl setup claude-code --agent claude   # registers these hooks in the CLI's settings`,
		Description: `Run by the coding agent's hooks with the hook's JSON on stdin.
'maosctl setup CLI --agent A' writes the hooks into the CLI's settings.`,
		Subcommands: subs,
		Action:      noCommand,
	}
}

func hookDialectCommand(d hookDialect) *cli.Command {
	return &cli.Command{
		Name:  d.name,
		Usage: "answer a " + d.product + " hook (JSON on stdin): the agent's unread mail, or the gate on a tool call",
		UsageText: fmt.Sprintf(`maosctl hook %s [--agent A] [--max-time 2s] [--gate FILE]

   echo '{"hook_event_name":"%s"}' | maosctl hook %s --agent %s
   maosctl setup %s --agent %s [--gate FILE]   # registers it`,
			d.name, d.eventNamed(eventPrompt), d.name, d.name, d.name, d.name),
		Description: `Reads the hook's JSON on stdin and answers on stdout:

` + d.answers + `
Tool calls report nothing. A report is one more request, bounded by
--max-time, and only when the node answered the ones before it; a
watcher's own heartbeats do not overwrite it (docs/AGENTS.md, "Busy or
idle").

The digest lists unread messages urgent first, then newest first, one line
each (id, from, priority, title), one line per thread with a count, at most
10,000 characters, and ends with how many were left out and the commands
to read them. Every command printed runs as printed: it carries this
command line's --addr, --ca, --cert, --key and --token-file (not ones from
the environment, which the agent's shell has too; never --token).

The hook never fails the agent's turn: stdin that is not the hook's JSON,
no --agent, a malformed --addr, or no node answering within --max-time is
one line on stderr and exit 0. With no node answering, SessionStart still
gives the agent's identity and says the mailbox did not answer; the other
events print nothing. Only a command line that does not parse (an unknown
flag or dialect) exits 1. The tool-call event fails closed instead: a gate
policy that cannot be read denies every call the hook sees, and a matching
call is denied when there is no --agent, the address is malformed, or no
node answers or it refuses the request; the reason says why. The policy's
format: docs/TASKS.md, "The gate".

Register it with 'maosctl setup ` + d.name + ` --agent A' (see its --help for the
settings it writes), or by hand: ` + d.register,
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` the coding agent works as"),
			&cli.DurationFlag{Name: "max-time", Usage: "give up on each request to the mailbox after `DURATION`", Value: hookDefaultMaxTime},
			&cli.StringFlag{Name: "gate", Usage: "gate policy `FILE` (YAML): which tool calls wait for an approval", EnvVars: []string{envGateFile}},
		},
		Action: hook,
	}
}

func hook(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	// A hook never fails the agent's turn: from here on every problem is
	// one line on stderr, nothing on stdout, and exit 0.
	note := func(event string, err error) error {
		fmt.Fprintf(c.App.ErrWriter, "%s: %s: %s\n", c.App.Name, strings.TrimSpace("hook "+event),
			strings.ReplaceAll(err.Error(), "\n", " "))
		return nil
	}
	in, err := readHookInput(c.App.Reader)
	if err != nil {
		return note("", err)
	}
	d := hookDialects[c.Command.Name]
	if d.events[in.HookEventName] == eventToolCall {
		return hookToolCall(c, d, in, note)
	}
	if err := require(c, "agent"); err != nil {
		return note("", err)
	}
	if err := checkAddr("--addr (or $"+envAddr+")", nodeAddr(c)); err != nil {
		return note("", err)
	}
	agent := strings.TrimSpace(c.String("agent"))
	ctx, cancel := within(commandContext(c), c.Duration("max-time"))
	defer cancel()
	client := apiClient(c)
	ctl := ctlCommand(c)
	out, err := hookAnswer(ctx, client, ctl, agent, d, in)
	if err != nil {
		note(in.HookEventName, apiError(c, err))
		if d.events[in.HookEventName] != eventSessionStart {
			return nil
		}
		// The identity is still worth giving at session start.
		out = hookContext(in.HookEventName, hookIdentity(ctl, agent, client.Addr())+
			fmt.Sprintf("The maos mailbox did not answer (%v); check mail later with: %s inbox --agent %s --unread\n", err, ctl, agent))
	} else if sub := hookSubstate(d, in, out); sub != "" {
		// One more request, bounded on its own, and only when the node
		// answered the first ones: a node that is down costs the turn one
		// --max-time, not two.
		pctx, cancel := within(commandContext(c), c.Duration("max-time"))
		defer cancel()
		if _, err := client.PutPresence(pctx, agent, api.PresenceUpdate{
			State: api.PresenceAwake, Substate: sub, Source: api.SourceHook}); err != nil {
			note(in.HookEventName, fmt.Errorf("report %s %s: %w", agent, sub, apiError(c, err)))
		}
	}
	return writeHookAnswer(c, in.HookEventName, out, note)
}

// hookSubstate is what event in of dialect d says of its agent,
// reported as a presence heartbeat with source hook ("" for nothing):
// WORKING when a prompt is submitted; IDLE when the turn stops (unless
// out, the hook's own answer, blocks the stop to have urgent mail read:
// the agent goes on working), when the CLI notifies that it waits for
// input (Claude Code's idle_prompt), and when a session starts, resumes
// or is cleared (not when it compacts, which may happen mid-turn). Tool
// calls say nothing: the turn is WORKING from its prompt to its stop
// anyway, and a request per call would slow every tool.
func hookSubstate(d hookDialect, in hookInput, out any) string {
	switch d.events[in.HookEventName] {
	case eventPrompt:
		return api.SubstateWorking
	case eventStop:
		if _, blocked := out.(hookStopOutput); blocked {
			return api.SubstateWorking
		}
		return api.SubstateIdle
	case eventNotification:
		if d.idleNotification != "" && in.NotificationType == d.idleNotification {
			return api.SubstateIdle
		}
	case eventSessionStart:
		if in.Source != "compact" {
			return api.SubstateIdle
		}
	}
	return ""
}

// writeHookAnswer prints out, the hook's answer (nil: nothing), as one
// line of JSON.
func writeHookAnswer(c *cli.Context, event string, out any, note func(string, error) error) error {
	if out == nil {
		return nil
	}
	enc := json.NewEncoder(c.App.Writer)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return note(event, fmt.Errorf("write the answer: %w", err))
	}
	return nil
}

// readHookInput reads the hook's JSON from r: at most hookMaxInput bytes,
// one object with a hook_event_name.
func readHookInput(r io.Reader) (hookInput, error) {
	var in hookInput
	raw, err := io.ReadAll(io.LimitReader(r, hookMaxInput+1))
	if err != nil {
		return in, fmt.Errorf("read stdin: %w", err)
	}
	if len(raw) > hookMaxInput {
		return in, fmt.Errorf("stdin is over %d bytes", hookMaxInput)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, fmt.Errorf("stdin is not the hook's JSON object: %w", err)
	}
	if in.HookEventName == "" {
		return in, errors.New("stdin JSON has no hook_event_name")
	}
	return in, nil
}

// hookAnswer is the JSON value to print for in, an event of dialect d,
// or nil for none. ctl starts every command it names (ctlCommand).
func hookAnswer(ctx context.Context, client *client.Client, ctl, agent string, d hookDialect, in hookInput) (any, error) {
	switch kind := d.events[in.HookEventName]; kind {
	case eventSessionStart, eventPrompt:
		dig, err := fetchUnread(ctx, client, agent, "")
		if err != nil {
			return nil, err
		}
		if dig.ToApprove, err = fetchToApprove(ctx, client, agent); err != nil {
			return nil, err
		}
		id := hookIdentity(ctl, agent, client.Addr())
		if len(dig.Messages) == 0 && dig.TotalUnread == 0 && dig.ToApprove == 0 {
			if kind == eventPrompt {
				return nil, nil
			}
			return hookContext(in.HookEventName, id+"No unread mail.\n"), nil
		}
		dig.Ctl = ctl
		return hookContext(in.HookEventName, id+digest(dig, DigestMaxChars-len(id))), nil
	case eventStop:
		if in.StopHookActive || !d.stopBlocks {
			return nil, nil
		}
		dig, err := fetchUnread(ctx, client, agent, api.PriorityUrgent)
		if err != nil {
			return nil, err
		}
		if len(dig.Messages) == 0 && dig.TotalUnread == 0 {
			return nil, nil
		}
		head := fmt.Sprintf("Urgent unread mail waits for maos agent %s: read it (%s show ID), act or answer "+
			"(%s reply ID --from %s --text T), mark it read (%s read-mark --agent %s ID), then stop.\n",
			agent, ctl, ctl, agent, ctl, agent)
		dig.Ctl = ctl
		return hookStopOutput{Decision: "block", Reason: head + digest(dig, DigestMaxChars-len(head))}, nil
	}
	return nil, nil
}

func hookContext(event, text string) hookContextOutput {
	var out hookContextOutput
	out.HookSpecificOutput.HookEventName = event
	out.HookSpecificOutput.AdditionalContext = text
	return out
}

// hookIdentity tells the model who it is on the mailbox and how to use it.
func hookIdentity(ctl, agent, addr string) string {
	return fmt.Sprintf("You are maos agent %s (mailbox at %s). Send: %s send --from %s --to B --text T; "+
		"reply: %s reply ID --from %s --text T.\n", agent, addr, ctl, agent, ctl, agent)
}

// ctlCommand is how every command a hook prints starts, so that it runs
// as printed: "maosctl", then the global flags of the hook's own command
// line that reach the same node (--addr, --ca, --cert, --key,
// --token-file), shell-quoted. A value that came from the environment is
// left out (the agent's shell has it too), and so is a --token: a secret
// never goes into the model's context.
func ctlCommand(c *cli.Context) string {
	parts := []string{"maosctl"}
	for _, f := range []struct{ name, env string }{
		{"addr", envAddr}, {"ca", envCA}, {"cert", envCert}, {"key", envKey}, {"token-file", envTokenFile},
	} {
		v := strings.TrimSpace(c.String(f.name))
		if v == "" || !c.IsSet(f.name) || v == os.Getenv(f.env) {
			continue
		}
		parts = append(parts, "--"+f.name, shellQuote(v))
	}
	return strings.Join(parts, " ")
}

// shellQuote is s as one word of a POSIX shell: as it is when it holds
// only letters, digits and -_./:@%+=, and single-quoted otherwise.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fetchToApprove counts the pending approvals agent may decide and has
// not decided (GET /v1/agents/{id}/summary).
func fetchToApprove(ctx context.Context, client *client.Client, agent string) (int, error) {
	sum, err := client.AgentSummary(ctx, agent, api.Local)
	if err != nil {
		return 0, fmt.Errorf("approvals of %s: %w", agent, err)
	}
	return sum.PendingApprovals, nil
}

// fetchUnread reads agent's unread messages (of priority, if given),
// newest first, up to hookMaxPages pages, and the total from the
// counters when more remain. An agent without an inbox has no mail.
func fetchUnread(ctx context.Context, client *client.Client, agent string, priority api.Priority) (digestInput, error) {
	in := digestInput{Agent: agent}
	// Newest first, so that past the pages read it is the oldest mail
	// that is left out of the digest, not the newest.
	q := api.InboxQuery{Unread: true, Priority: priority, Limit: hookPageLimit, Newest: true}
	for range hookMaxPages {
		page, err := client.Inbox(ctx, agent, q, api.Local)
		if isNotFound(err) {
			return in, nil
		}
		if err != nil {
			return in, fmt.Errorf("read inbox of %s: %w", agent, err)
		}
		for _, e := range page.Messages {
			in.Messages = append(in.Messages, e.Message)
		}
		if !page.HasMore {
			in.TotalUnread = len(in.Messages)
			return in, nil
		}
		q.Before = page.NextBefore
	}
	counts, err := client.InboxCounts(ctx, agent, api.Local)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return in, err
		}
		return in, fmt.Errorf("inbox counts of %s: %w", agent, err)
	}
	in.TotalUnread = int(counts.Unread)
	if priority != "" {
		in.TotalUnread = int(counts.UnreadByPriority[priority])
	}
	return in, nil
}
