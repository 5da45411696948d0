package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func validTaskCreate() TaskCreateCommand {
	c := TaskCreateCommand{From: "orchestrator", To: "role:reviewer", Title: "Review the retry logic",
		Context: json.RawMessage(`{ "pr": 456 }`)}
	c.Normalize(time.Date(2026, 11, 24, 10, 30, 0, 0, time.UTC))
	return c
}

func TestTaskCreateNormalize(t *testing.T) {
	c := validTaskCreate()
	if !strings.HasPrefix(c.ID, "task-20261124-103000-orchestrator-") {
		t.Errorf("id = %q, want task-YYYYMMDD-HHMMSS-{from}-{hex}", c.ID)
	}
	if c.Priority != PriorityNormal || c.TimeoutSeconds != 300 || c.MaxAttempts != 5 || c.Channel != DefaultChannel {
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
		edit        func(*TaskCreateCommand)
	}{
		{"bad id", "id", func(c *TaskCreateCommand) { c.ID = "-x" }},
		{"bad from", "from", func(c *TaskCreateCommand) { c.From = "Alice" }},
		{"bad to", "to", func(c *TaskCreateCommand) { c.To = "team:reviewers" }},
		{"bad role", "to", func(c *TaskCreateCommand) { c.To = "role:Rev" }},
		{"no title", "title", func(c *TaskCreateCommand) { c.Title = "  " }},
		{"long title", "title", func(c *TaskCreateCommand) { c.Title = strings.Repeat("t", MaxTitleLen+1) }},
		{"long description", "description", func(c *TaskCreateCommand) { c.Description = strings.Repeat("d", MaxTaskTextBytes+1) }},
		{"priority", "priority", func(c *TaskCreateCommand) { c.Priority = "medium" }},
		{"context", "context", func(c *TaskCreateCommand) { c.Context = json.RawMessage(`{`) }},
		{"self dependency", "depends_on[0]", func(c *TaskCreateCommand) { c.DependsOn = []string{c.ID} }},
		{"twice", "depends_on[1]", func(c *TaskCreateCommand) { c.DependsOn = []string{"a", "a"} }},
		{"timeout", "timeout_seconds", func(c *TaskCreateCommand) { c.TimeoutSeconds = -1 }},
		{"attempts", "max_attempts", func(c *TaskCreateCommand) { c.MaxAttempts = MaxTaskAttempts + 1 }},
		{"channel", "channel", func(c *TaskCreateCommand) { c.Channel = "Ops" }},
		{"from maos", "from", func(c *TaskCreateCommand) { c.From = SystemSender }},
		{"to maos", "to", func(c *TaskCreateCommand) { c.To = SystemSender }},
		{"to all", "to", func(c *TaskCreateCommand) { c.To = "all" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validTaskCreate()
			tc.edit(&c)
			var fe *FieldError
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
	ok := TaskCompletion{Status: TaskStatusSuccess, Result: "done", ConfidenceScore: &half}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid completion refused: %v", err)
	}
	for _, tc := range []struct {
		field string
		c     TaskCompletion
	}{
		{"status", TaskCompletion{Status: "done"}},
		{"confidence_score", TaskCompletion{Status: TaskStatusSuccess, ConfidenceScore: &over}},
		{"execution_time_ms", TaskCompletion{Status: TaskStatusSuccess, ExecutionTimeMS: -1}},
		{"actions_taken", TaskCompletion{Status: TaskStatusSuccess, ActionsTaken: make([]json.RawMessage, MaxTaskActions+1)}},
		{"rationale", TaskCompletion{Status: TaskStatusSuccess, Rationale: strings.Repeat("é", MaxTaskNoteRunes+1)}},
		{"next_steps[0]", TaskCompletion{Status: TaskStatusSuccess, NextSteps: []string{strings.Repeat("x", MaxTaskNoteRunes+1)}}},
		{"metrics", TaskCompletion{Status: TaskStatusSuccess, Metrics: json.RawMessage(`[1,`)}},
		{"error.error_type", TaskCompletion{Status: TaskStatusFailure, Error: &TaskError{ErrorMessage: "boom"}}},
		{"error.retry_count", TaskCompletion{Status: TaskStatusFailure, Error: &TaskError{ErrorType: "api_error", RetryCount: -1}}},
	} {
		var fe *FieldError
		if err := tc.c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate = %v, want a field error on %s", tc.field, err, tc.field)
		}
	}
}

func TestTaskClaimantCommandsNeedAFence(t *testing.T) {
	for name, err := range map[string]error{
		"progress": (&TaskProgressCommand{ID: "t1", Agent: "rita"}).Validate(),
		"complete": (&TaskCompleteCommand{ID: "t1", Agent: "rita", Completion: TaskCompletion{Status: TaskStatusSuccess}}).Validate(),
		"handoff":  (&TaskHandoffCommand{ID: "t1", Agent: "rita", To: "bob"}).Validate(),
	} {
		var fe *FieldError
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
		"claim":    (&TaskClaimCommand{ID: "t1", Agent: SystemSender}).Validate(),
		"progress": (&TaskProgressCommand{ID: "t1", Agent: SystemSender, Fence: 1}).Validate(),
		"complete": (&TaskCompleteCommand{ID: "t1", Agent: SystemSender, Fence: 1, Completion: TaskCompletion{Status: TaskStatusSuccess}}).Validate(),
		"handoff":  (&TaskHandoffCommand{ID: "t1", Agent: "rita", Fence: 1, To: SystemSender}).Validate(),
		"cancel":   (&TaskCancelCommand{ID: "t1", From: SystemSender}).Validate(),
	} {
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(fe.Reason, `"maos" is reserved`) {
			t.Errorf("%s as maos: %v, want a field error saying maos is reserved", name, err)
		}
	}
}
