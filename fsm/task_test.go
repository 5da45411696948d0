package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func validTaskCreate() api.TaskCreateCommand {
	c := api.TaskCreateCommand{From: "orchestrator", To: "role:reviewer", Title: "Review the retry logic",
		Context: json.RawMessage(`{ "pr": 456 }`)}
	c.Normalize(time.Date(2026, 11, 24, 10, 30, 0, 0, time.UTC))
	return c
}

func TestTaskCreateNormalize(t *testing.T) {
	c := validTaskCreate()
	if !strings.HasPrefix(c.ID, "task-20261124-103000-orchestrator-") {
		t.Errorf("id = %q, want task-YYYYMMDD-HHMMSS-{from}-{hex}", c.ID)
	}
	if c.Priority != api.PriorityNormal || c.TimeoutSeconds != 300 || c.MaxAttempts != 5 || c.Channel != api.DefaultChannel {
		t.Errorf("defaults not filled: %+v", c)
	}
	if string(c.Context) != `{"pr":456}` {
		t.Errorf("context = %s, want it compacted", c.Context)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid create refused: %v", err)
	}
}

func TestTaskCreateValidate(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        func(*api.TaskCreateCommand)
	}{
		{"bad id", "id", func(c *api.TaskCreateCommand) { c.ID = "-x" }},
		{"bad from", "from", func(c *api.TaskCreateCommand) { c.From = "Alice" }},
		{"bad to", "to", func(c *api.TaskCreateCommand) { c.To = "team:reviewers" }},
		{"bad role", "to", func(c *api.TaskCreateCommand) { c.To = "role:Rev" }},
		{"no title", "title", func(c *api.TaskCreateCommand) { c.Title = "  " }},
		{"long title", "title", func(c *api.TaskCreateCommand) { c.Title = strings.Repeat("t", api.MaxTitleLen+1) }},
		{"long description", "description", func(c *api.TaskCreateCommand) { c.Description = strings.Repeat("d", api.MaxTaskTextBytes+1) }},
		{"priority", "priority", func(c *api.TaskCreateCommand) { c.Priority = "medium" }},
		{"context", "context", func(c *api.TaskCreateCommand) { c.Context = json.RawMessage(`{`) }},
		{"self dependency", "depends_on[0]", func(c *api.TaskCreateCommand) { c.DependsOn = []string{c.ID} }},
		{"twice", "depends_on[1]", func(c *api.TaskCreateCommand) { c.DependsOn = []string{"a", "a"} }},
		{"timeout", "timeout_seconds", func(c *api.TaskCreateCommand) { c.TimeoutSeconds = -1 }},
		{"attempts", "max_attempts", func(c *api.TaskCreateCommand) { c.MaxAttempts = api.MaxTaskAttempts + 1 }},
		{"channel", "channel", func(c *api.TaskCreateCommand) { c.Channel = "Ops" }},
		{"from maos", "from", func(c *api.TaskCreateCommand) { c.From = api.SystemSender }},
		{"to maos", "to", func(c *api.TaskCreateCommand) { c.To = api.SystemSender }},
		{"to all", "to", func(c *api.TaskCreateCommand) { c.To = "all" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validTaskCreate()
			tc.edit(&c)
			var fe *api.FieldError
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Validate = %v, want a field error on %s", err, tc.field)
			}
		})
	}
	c := validTaskCreate()
	c.To = "capability:go"
	if err := c.Validate(); err != nil {
		t.Errorf("capability queue refused: %v", err)
	}
}

func TestTaskCompletionValidate(t *testing.T) {
	half, over := 0.5, 1.5
	ok := api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "done", ConfidenceScore: &half}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid completion refused: %v", err)
	}
	for _, tc := range []struct {
		field string
		c     api.TaskCompletion
	}{
		{"status", api.TaskCompletion{Status: "done"}},
		{"confidence_score", api.TaskCompletion{Status: api.TaskStatusSuccess, ConfidenceScore: &over}},
		{"execution_time_ms", api.TaskCompletion{Status: api.TaskStatusSuccess, ExecutionTimeMS: -1}},
		{"actions_taken", api.TaskCompletion{Status: api.TaskStatusSuccess, ActionsTaken: make([]json.RawMessage, api.MaxTaskActions+1)}},
		{"rationale", api.TaskCompletion{Status: api.TaskStatusSuccess, Rationale: strings.Repeat("é", api.MaxTaskNoteRunes+1)}},
		{"next_steps[0]", api.TaskCompletion{Status: api.TaskStatusSuccess, NextSteps: []string{strings.Repeat("x", api.MaxTaskNoteRunes+1)}}},
		{"metrics", api.TaskCompletion{Status: api.TaskStatusSuccess, Metrics: json.RawMessage(`[1,`)}},
		{"error.error_type", api.TaskCompletion{Status: api.TaskStatusFailure, Error: &api.TaskError{ErrorMessage: "boom"}}},
		{"error.retry_count", api.TaskCompletion{Status: api.TaskStatusFailure, Error: &api.TaskError{ErrorType: "api_error", RetryCount: -1}}},
	} {
		var fe *api.FieldError
		if err := tc.c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate = %v, want a field error on %s", tc.field, err, tc.field)
		}
	}
}

func TestTaskClaimantCommandsNeedAFence(t *testing.T) {
	for name, err := range map[string]error{
		"progress": (&api.TaskProgressCommand{ID: "t1", Agent: "rita"}).Validate(),
		"complete": (&api.TaskCompleteCommand{ID: "t1", Agent: "rita", Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}}).Validate(),
		"handoff":  (&api.TaskHandoffCommand{ID: "t1", Agent: "rita", To: "bob"}).Validate(),
	} {
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "fence" {
			t.Errorf("%s without a fence: %v, want a field error on fence", name, err)
		}
	}
}

func TestTaskBackoff(t *testing.T) {
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second}
	for k, w := range want {
		if got := TaskBackoff(k); got != w {
			t.Errorf("TaskBackoff(%d) = %v, want %v", k, got, w)
		}
	}
}

// maos is the system's sender: no task command acts as it.
func TestTaskCommandsRefuseTheSystemSender(t *testing.T) {
	for name, err := range map[string]error{
		"claim":    (&api.TaskClaimCommand{ID: "t1", Agent: api.SystemSender}).Validate(),
		"progress": (&api.TaskProgressCommand{ID: "t1", Agent: api.SystemSender, Fence: 1}).Validate(),
		"complete": (&api.TaskCompleteCommand{ID: "t1", Agent: api.SystemSender, Fence: 1, Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}}).Validate(),
		"handoff":  (&api.TaskHandoffCommand{ID: "t1", Agent: "rita", Fence: 1, To: api.SystemSender}).Validate(),
		"cancel":   (&api.TaskCancelCommand{ID: "t1", From: api.SystemSender}).Validate(),
	} {
		var fe *api.FieldError
		if !errors.As(err, &fe) || !strings.Contains(fe.Reason, `"maos" is reserved`) {
			t.Errorf("%s as maos: %v, want a field error saying maos is reserved", name, err)
		}
	}
}
