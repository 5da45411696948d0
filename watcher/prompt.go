package watcher

import (
	"context"
	"fmt"
	"strings"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/artifacts"
)

// DefaultPrompt is the prompt template used when an agent sets none. Its
// "id: " line carries the message or task id (the stub model answers
// with it). A task's prompt says how to report on stdout (seed 002 §6).
const DefaultPrompt = `You are {{.Agent}}, an agent with the role "{{.Role}}" in a multi-agent team that talks through the maos mailbox.
{{- if .Parent}}
You are a temporary fork of {{.Parent}}: you answer this one message for it while it goes on with its own work. You may read {{.Parent}}'s files but do not change them; your working directory is your own.
{{- end}}
{{- if .Guardrails}}

Rules you must follow:
{{.Guardrails}}
{{- end}}
{{- if .Context}}

{{if .Parent}}The thread so far:{{else}}Recent messages in channel {{.Message.Channel}}:{{end}}
{{- range .Context}}
[{{.From}} → {{join .Recipients ", "}}] {{.Title}}{{if .Title}} — {{end}}{{.Content.Text}}
{{- end}}
{{- end}}
{{- if .Artifacts}}

Files attached, fetched into your shared context:
{{- range .Artifacts}}
- {{.Name}}: {{if .Err}}could not be fetched ({{.Err}}){{else}}{{.Path}}{{end}}
{{- end}}
{{- end}}
{{- if .Task}}
{{- if .Dependencies}}

Tasks this one depends on:
{{- range .Dependencies}}
- {{.ID}} "{{.Title}}": {{.State}}{{with .Completion}} ({{.Status}}){{if .Result}}: {{.Result}}{{end}}{{end}}
{{- end}}
{{- end}}

Task to do:
id: {{.Task.ID}}
from: {{.Task.From}}
priority: {{.Task.Priority}}
title: {{.Task.Title}}
{{- if .Task.Context}}
context: {{printf "%s" .Task.Context}}
{{- end}}

{{.Task.Description}}
{{- if .Task.ApprovedAction}}

You asked for approval of an action for this task, and {{.Task.From}} changed it. Carry out this approved action, not the one you proposed:
{{printf "%s" .Task.ApprovedAction}}
{{- end}}

Do the task, then print its result as text. You may also print JSON lines:
{"type":"status","message":"...","progress":0.5} while you work,
{"type":"artifact","path":"...","description":"..."} for each file you make,
{"type":"dependency","waiting_for":"TASK_ID","reason":"..."} to wait for another task and be run again once it succeeded,
{"type":"complete","result":"success|partial_success|failure","outputs":["..."]} at the end,
or {"type":"complete","result":"requires_approval","proposed_action":{...},"rationale":"..."} to have {{.Task.From}} approve the action first (approved, the task succeeds; rejected, it fails; changed, you are run again to carry out the changed action).
{{- else}}

Message to answer:
id: {{.Message.ID}}
from: {{.Message.From}}
type: {{.Message.Type}}
priority: {{.Message.Priority}}
{{- if .Message.Title}}
title: {{.Message.Title}}
{{- end}}

{{.Message.Content.Text}}
{{- if .Message.Content.Code}}

{{.Message.Content.Code}}
{{- end}}

Answer with the text of your reply only. To attach a file you made, also print a line {"type":"artifact","path":"FILE"}.
{{- end}}
`

// PromptData is what a prompt template sees.
type PromptData struct {
	Agent      string
	Role       string
	Guardrails string
	// Context is up to context_messages messages of the channel stored
	// before Message, oldest first; for a fork, of Message's thread.
	Context []*api.Message
	// Parent is the agent a fork answers for ("" unless Agent is a fork,
	// "A-fork-N"; fork.go).
	Parent string
	// Message is the message to answer; for a task, its task_delegation
	// message (from the creator, the title, the description as text).
	Message *api.Message
	// Task is the task to do, nil for a message. Its ApprovedAction is
	// set when its approver modified the action a requires_approval
	// completion proposed: the run is to carry that out.
	Task *api.Task
	// Dependencies are the tasks Task depends on (its depends_on, then
	// those its CLI waited for), as they ended.
	Dependencies []*api.Task
	// Artifacts are the artifacts Message or Task references, fetched into
	// the agent's shared context (Path), or why not (Err).
	Artifacts []artifacts.Local
}

// Render executes the agent's prompt template.
func (a *AgentConfig) Render(d PromptData) (string, error) {
	var b strings.Builder
	if err := a.tmpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("watcher: render prompt for %s: %w", a.ID, err)
	}
	return b.String(), nil
}

// recentContext returns up to n messages of m's channel stored before m,
// oldest first. Seqs are global, so it scans a window of seqs before m that
// doubles until it holds n messages or reaches the channel's start.
func recentContext(ctx context.Context, c *client.Client, m *api.Message, n int) ([]*api.Message, error) {
	if n <= 0 || m.Seq <= 1 {
		return nil, nil
	}
	window := uint64(4 * n)
	for {
		after := uint64(0)
		if m.Seq > window {
			after = m.Seq - window
		}
		var ring []*api.Message
		cur := after
	scan:
		for {
			p, err := c.ChannelPage(ctx, m.Channel, cur, api.MaxPageLimit, api.Local)
			if err != nil {
				return nil, fmt.Errorf("watcher: context of %s: %w", m.ID, err)
			}
			for _, x := range p.Messages {
				if x.Seq >= m.Seq {
					break scan
				}
				ring = append(ring, x)
				if len(ring) > n {
					ring = ring[1:]
				}
				cur = x.Seq
			}
			if !p.HasMore || len(p.Messages) == 0 {
				break
			}
		}
		if len(ring) >= n || after == 0 {
			return ring, nil
		}
		window *= 4
	}
}
