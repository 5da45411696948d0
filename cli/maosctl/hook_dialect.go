package maosctl

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The coding agents' hook dialects: what each CLI calls its events, what
// it reads back on stdout, and how its settings register a hook. hook.go
// answers every dialect through this table (one code path); setup.go
// wires the events listed here into each CLI's settings.

// hookEvent is what one of a dialect's events means to the hook.
type hookEvent int

const (
	eventOther        hookEvent = iota // answered with nothing
	eventSessionStart                  // a session starts, resumes, is cleared (Claude Code: or compacts)
	eventPrompt                        // a prompt was submitted: the turn begins
	eventStop                          // the turn ends
	eventToolCall                      // a tool is about to run: the gate's event
	eventNotification                  // the CLI notifies (Claude Code: idle_prompt)
)

// hookWire is one event setup registers, with its matcher ("" for none).
type hookWire struct {
	Event   string
	Matcher string
}

// hookDialect is one coding agent's hook protocol.
type hookDialect struct {
	name    string // the hook subcommand and setup's argument
	product string
	events  map[string]hookEvent
	// stopBlocks: the dialect's turn end takes {"decision":"block",
	// "reason"} to keep the agent working on urgent mail (Claude Code's
	// and Codex's Stop). Gemini CLI's AfterAgent "deny" rejects the answer
	// the agent just gave and retries the turn, so the hook does not
	// block there.
	stopBlocks bool
	// idleNotification is the notification_type saying the agent has
	// waited for input a while ("" when the dialect has none).
	idleNotification string
	// gate is the answer to a tool call the gate decided (nil: print
	// nothing); input is the call's own tool input.
	gate func(v gateVerdict, input json.RawMessage) any
	// wire is what setup registers without a gate; the gate adds toolEvent.
	wire []hookWire
	// timeoutUnit is the unit of a hook's "timeout" in the settings.
	timeoutUnit time.Duration
	// answers is the hook's help: the events it answers and how.
	answers string
	// register is the help's hand-written settings entry.
	register string
}

// eventNamed is the name dialect d gives kind (the first, in name order).
func (d hookDialect) eventNamed(kind hookEvent) string {
	for _, name := range slices.Sorted(maps.Keys(d.events)) {
		if d.events[name] == kind {
			return name
		}
	}
	return ""
}

// hookDialects are the dialects, by name.
var hookDialects = map[string]hookDialect{
	"claude-code": {
		name: "claude-code", product: "Claude Code",
		events: map[string]hookEvent{"SessionStart": eventSessionStart, "UserPromptSubmit": eventPrompt,
			"Stop": eventStop, "PreToolUse": eventToolCall, "Notification": eventNotification},
		stopBlocks: true, idleNotification: "idle_prompt",
		gate:        permissionAnswer(false),
		wire:        []hookWire{{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"Stop", ""}, {"Notification", "idle_prompt"}},
		timeoutUnit: time.Second,
		answers:     claudeCodexAnswers,
		register: `~/.claude/settings.json (or .claude/settings.json):

   {"hooks": {
      "SessionStart":     [{"hooks": [{"type": "command", "command": "maosctl hook claude-code --agent claude"}]}],
      "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "maosctl hook claude-code --agent claude"}]}],
      "Stop":             [{"hooks": [{"type": "command", "command": "maosctl hook claude-code --agent claude"}]}],
      "Notification":     [{"matcher": "idle_prompt", "hooks": [{"type": "command", "command": "maosctl hook claude-code --agent claude"}]}],
      "PreToolUse":       [{"matcher": "Bash", "hooks": [{"type": "command", "timeout": 660,
                            "command": "maosctl hook claude-code --agent claude --gate ~/.config/maos/gates.yaml"}]}]}}

The PreToolUse hook's timeout (seconds) must be above the longest gate
timeout, or Claude Code stops the hook before it answers.`,
	},
	"codex": {
		name: "codex", product: "Codex",
		// Codex sends no Notification today; one in Claude Code's shape
		// is read as Claude Code's.
		events: map[string]hookEvent{"SessionStart": eventSessionStart, "UserPromptSubmit": eventPrompt,
			"Stop": eventStop, "PreToolUse": eventToolCall, "Notification": eventNotification},
		stopBlocks: true, idleNotification: "idle_prompt",
		// Codex refuses an allow that does not change the input.
		gate:        permissionAnswer(true),
		wire:        []hookWire{{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"Stop", ""}},
		timeoutUnit: time.Second,
		answers:     claudeCodexAnswers,
		register: `~/.codex/hooks.json (hooks on in config.toml: [features] hooks = true, or
codex_hooks = true on older versions):

   {"hooks": {
      "SessionStart":     [{"hooks": [{"type": "command", "command": "maosctl hook codex --agent codex"}]}],
      "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "maosctl hook codex --agent codex"}]}],
      "Stop":             [{"hooks": [{"type": "command", "command": "maosctl hook codex --agent codex"}]}],
      "PreToolUse":       [{"matcher": "Bash", "hooks": [{"type": "command", "timeout": 660,
                            "command": "maosctl hook codex --agent codex --gate ~/.config/maos/gates.yaml"}]}]}}

Codex takes a PreToolUse deny, and an allow only when it changes the
input: an approved call prints nothing and goes on under Codex's own
approval policy. Codex's older 'notify' program (config.toml notify = [...]) gets a JSON
argument after each turn and its output is ignored, so it cannot add
context; use the hooks above.`,
	},
	"gemini": {
		name: "gemini", product: "Gemini CLI",
		events: map[string]hookEvent{"SessionStart": eventSessionStart, "BeforeAgent": eventPrompt,
			"AfterAgent": eventStop, "BeforeTool": eventToolCall, "Notification": eventNotification},
		gate:        geminiGateAnswer,
		wire:        []hookWire{{"SessionStart", ""}, {"BeforeAgent", ""}, {"AfterAgent", ""}},
		timeoutUnit: time.Millisecond,
		answers:     geminiAnswers,
		register: `~/.gemini/settings.json (or
.gemini/settings.json):

   {"hooks": {
      "SessionStart": [{"hooks": [{"name": "maos", "type": "command", "command": "maosctl hook gemini --agent gemini"}]}],
      "BeforeAgent":  [{"hooks": [{"name": "maos", "type": "command", "command": "maosctl hook gemini --agent gemini"}]}],
      "AfterAgent":   [{"hooks": [{"name": "maos", "type": "command", "command": "maosctl hook gemini --agent gemini"}]}],
      "BeforeTool":   [{"hooks": [{"name": "maos", "type": "command", "timeout": 660000,
                        "command": "maosctl hook gemini --agent gemini --gate ~/.config/maos/gates.yaml"}]}]}}

Gemini CLI's hook timeout is in milliseconds; the BeforeTool hook's must
be above the longest gate timeout. Gemini's tools are named
run_shell_command, write_file, replace, ...: a gate's tool regexp names
them (docs/agents/gemini.md).`,
	},
}

// hookDialectNames are the dialects' names, sorted.
func hookDialectNames() []string { return slices.Sorted(maps.Keys(hookDialects)) }

// permissionAnswer is the PreToolUse answer Claude Code and Codex read.
// silentAllow leaves out an allow that does not change the input (Codex
// logs it as a failed hook and runs the call anyway): such a call goes on
// under the CLI's own approval policy.
func permissionAnswer(silentAllow bool) func(gateVerdict, json.RawMessage) any {
	return func(v gateVerdict, _ json.RawMessage) any {
		p := hookPermission{HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: "maos gate: " + v.Reason}
		if v.Allow {
			if silentAllow && len(v.UpdatedInput) == 0 {
				return nil
			}
			p.PermissionDecision, p.UpdatedInput = "allow", v.UpdatedInput
		}
		return hookPermissionOutput{HookSpecificOutput: p}
	}
}

// geminiDecision is Gemini CLI's answer to BeforeTool: decision allow or
// deny with a reason (a deny's reason goes to the model as the tool's
// error), and an approved modify's input as hookSpecificOutput.tool_input.
type geminiDecision struct {
	Decision           string              `json:"decision"`
	Reason             string              `json:"reason"`
	HookSpecificOutput *geminiToolOverride `json:"hookSpecificOutput,omitempty"`
}

type geminiToolOverride struct {
	HookEventName string          `json:"hookEventName"`
	ToolInput     json.RawMessage `json:"tool_input"`
}

// geminiGateAnswer is the gate's answer for Gemini CLI. Gemini merges
// hookSpecificOutput.tool_input into the model's arguments rather than
// replacing them, so an approved modify that dropped an argument of the
// call cannot be expressed: it is denied, saying so, rather than run
// with the argument the approvers took out.
func geminiGateAnswer(v gateVerdict, input json.RawMessage) any {
	if !v.Allow {
		return geminiDecision{Decision: "deny", Reason: "maos gate: " + v.Reason}
	}
	out := geminiDecision{Decision: "allow", Reason: "maos gate: " + v.Reason}
	if len(v.UpdatedInput) == 0 {
		return out
	}
	if missing := droppedKeys(input, v.UpdatedInput); len(missing) > 0 {
		return geminiDecision{Decision: "deny", Reason: fmt.Sprintf("maos gate: %s, but the change removes %v, which Gemini CLI "+
			"cannot take out of a call (it merges the approved input into the model's); run the call as approved instead", v.Reason, missing)}
	}
	out.HookSpecificOutput = &geminiToolOverride{HookEventName: "BeforeTool", ToolInput: v.UpdatedInput}
	return out
}

// droppedKeys are the top-level keys of the object from that the object
// to lacks, sorted; an input that is not an object drops everything.
func droppedKeys(from, to json.RawMessage) []string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal(from, &a) != nil {
		return nil
	}
	if json.Unmarshal(to, &b) != nil {
		return slices.Sorted(maps.Keys(a))
	}
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

const claudeCodexAnswers = `SessionStart       {"hookSpecificOutput":{"hookEventName":"SessionStart",
                   "additionalContext":"You are maos agent A … digest"}}:
                   the agent's identity and a digest of its unread mail
                   and of the approvals waiting for its decision
                   (always, even with neither).
UserPromptSubmit   the same, but only when unread mail or an approval
                   waits.
Stop               {"decision":"block","reason":"… urgent digest"} when
                   urgent unread mail waits, so the agent reads it before
                   it stops; nothing when stop_hook_active is true (the
                   agent already continues because of a Stop hook), so it
                   cannot loop.
PreToolUse         with a gate policy (--gate), a tool call a gate matches
                   files an approval of its exact action and waits for
                   the decision within the gate's timeout:
                   {"hookSpecificOutput":{"hookEventName":"PreToolUse",
                   "permissionDecision":"allow"|"deny",
                   "permissionDecisionReason":"maos gate: approved by
                   alice, bob (approval ID)"}}; deny on reject (with the
                   comment), expiry, or no decision in time (saying how
                   to retry). A call no gate matches prints nothing (the
                   agent's own permissions apply). Codex gets nothing for
                   an allow that does not change the input.
Notification       nothing (Claude Code).
other events       nothing.

Presence: the hook also reports its agent's substate as a heartbeat
(PUT /v1/presence/A, source hook; 'maosctl who' shows it): WORKING on
UserPromptSubmit and on a Stop it blocks, IDLE on any other Stop, on
Claude Code's idle_prompt Notification and on SessionStart (not after a
compaction).`

const geminiAnswers = `SessionStart       {"hookSpecificOutput":{"hookEventName":"SessionStart",
                   "additionalContext":"You are maos agent A … digest"}}:
                   the agent's identity and a digest of its unread mail
                   and of the approvals waiting for its decision
                   (always, even with neither).
BeforeAgent        the same (hookEventName BeforeAgent), but only when
                   unread mail or an approval waits.
AfterAgent         nothing: Gemini CLI's "deny" there rejects the answer
                   the agent gave and retries the turn, so the hook never
                   holds a turn back for mail.
BeforeTool         with a gate policy (--gate), a tool call a gate matches
                   waits for an approval as for Claude Code, then
                   {"decision":"allow"|"deny","reason":"maos gate: …"}
                   (an approved modify adds "hookSpecificOutput":
                   {"hookEventName":"BeforeTool","tool_input":{…}}; one
                   that removed an argument is denied, as Gemini merges
                   tool_input into the call). No gate matched: nothing.
Notification,
other events       nothing.

Presence: the hook also reports its agent's substate as a heartbeat
(PUT /v1/presence/A, source hook; 'maosctl who' shows it): WORKING on
BeforeAgent, IDLE on AfterAgent and on SessionStart.`
