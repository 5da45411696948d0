package maosctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// statusLineOffline is what status-line prints when no node answers in
// time: a status bar must never show an error or stall.
const statusLineOffline = "📭 maos offline"

// statusLineDefaultMaxTime bounds status-line's requests: status bars
// run the command on every refresh, so a dead node must cost little.
const statusLineDefaultMaxTime = 300 * time.Millisecond

func statusLineCommand() *cli.Command {
	return &cli.Command{
		Name:  "status-line",
		Usage: "one line for a status bar: unread mail, approvals to decide, system status, phase",
		UsageText: `maosctl status-line [--agent A] [--max-time 300ms]

   maosctl status-line --agent claude
   # Claude Code ~/.claude/settings.json:
   #   "statusLine": {"type": "command", "command": "maosctl status-line --agent claude"}`,
		Description: `Prints one line, for example

   📬 3 new (1 urgent) | 🔐 2 to approve | 🌐 normal | phase: implementation

from the inbox counters of agent A, the pending approvals A may decide and
has not decided yet, and the bulletin's system_status and current_phase,
read in one request from the node at --addr (a local read). "(N urgent)",
"🔐 N to approve" and "phase: …" appear only when there is something to
say.

When no node answers within --max-time it prints "📭 maos offline" and
exits 0, so a status bar shows the marker instead of an error. An agent
without an inbox shows "📬 0 new". With --json, an object with online,
unread, urgent, to_approve, system_status and current_phase.`,
		Flags: []cli.Flag{
			agentFlag("agent", "agent `ID` whose inbox to count"),
			&cli.DurationFlag{Name: "max-time", Usage: "give up after `DURATION` and print the offline marker", Value: statusLineDefaultMaxTime},
			jsonFlag(),
		},
		Action: statusLine,
	}
}

// status is the status line's data (its --json form).
type status struct {
	Online bool   `json:"online"`
	Agent  string `json:"agent"`
	Unread uint64 `json:"unread"`
	Urgent uint64 `json:"urgent"`
	// ToApprove counts the pending approvals the agent may decide and has
	// not decided.
	ToApprove    int    `json:"to_approve"`
	SystemStatus string `json:"system_status,omitempty"`
	CurrentPhase string `json:"current_phase,omitempty"`
	// InboxError is the API's refusal of the counters (other than 404).
	InboxError string `json:"inbox_error,omitempty"`
}

func statusLine(c *cli.Context) error {
	if err := noArgs(c, "agent"); err != nil {
		return err
	}
	agent := strings.TrimSpace(c.String("agent"))
	ctx, cancel := within(commandContext(c), c.Duration("max-time"))
	defer cancel()
	st := fetchStatus(ctx, apiClient(c), agent)
	if wantJSON(c) {
		return printJSON(c.App.Writer, st)
	}
	_, err := fmt.Fprintln(c.App.Writer, formatStatus(st))
	return err
}

// fetchStatus reads the inbox counters, the approvals to decide and the
// bulletin in one request (GET /v1/agents/{id}/summary). Online is true
// when the node answered; an agent with no inbox counts as empty.
func fetchStatus(ctx context.Context, client *client.Client, agent string) status {
	st := status{Agent: agent}
	sum, err := client.AgentSummary(ctx, agent, api.Local)
	var apiErr *api.APIError
	st.Online = err == nil || errors.As(err, &apiErr)
	if err != nil {
		if st.Online {
			st.InboxError = err.Error()
		}
		return st
	}
	st.Unread = sum.Counts.Unread
	st.Urgent = sum.Counts.UnreadByPriority[api.PriorityUrgent]
	st.ToApprove = sum.PendingApprovals
	var doc struct {
		SystemStatus any `json:"system_status"`
		CurrentPhase any `json:"current_phase"`
	}
	if json.Unmarshal(sum.Bulletin.Doc, &doc) == nil {
		st.SystemStatus = statusText(doc.SystemStatus)
		st.CurrentPhase = statusText(doc.CurrentPhase)
	}
	return st
}

// statusText renders a bulletin value for one line: strings as they
// are, anything else as compact JSON, whitespace folded.
func statusText(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		s = x
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	return strings.Join(strings.Fields(s), " ")
}

// formatStatus is the status line of st.
func formatStatus(st status) string {
	if !st.Online {
		return statusLineOffline
	}
	parts := []string{fmt.Sprintf("📬 %d new", st.Unread)}
	if st.InboxError != "" {
		parts[0] = "📬 ?"
	} else if st.Urgent > 0 {
		parts[0] += fmt.Sprintf(" (%d urgent)", st.Urgent)
	}
	if st.ToApprove > 0 {
		parts = append(parts, fmt.Sprintf("🔐 %d to approve", st.ToApprove))
	}
	if st.SystemStatus != "" {
		parts = append(parts, "🌐 "+st.SystemStatus)
	}
	if st.CurrentPhase != "" {
		parts = append(parts, "phase: "+st.CurrentPhase)
	}
	return strings.Join(parts, " | ")
}

// isNotFound reports whether err is the API's 404.
func isNotFound(err error) bool {
	var apiErr *api.APIError
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound
}
