package dialect

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func jsonOf(t *testing.T, v json.RawMessage) map[string]any {
	t.Helper()
	out := map[string]any{}
	if len(v) > 0 {
		if err := json.Unmarshal(v, &out); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	return out
}

// Seed 004's task_delegation, verbatim: the task object gives the
// description, priority, timeout and requires_hitl, message_id the id;
// the placeholders ("concierge|triage|...", "high|medium|low") map as a
// message's names and priorities do, the originals kept; everything else
// is the task's context.
func TestMapTaskDelegationSeed(t *testing.T) {
	raw, _ := seed(t, "seed004_delegation.json")
	tm, err := MapTask(raw)
	if err != nil {
		t.Fatal(err)
	}
	if tm == nil || tm.Create == nil || tm.Complete != nil {
		t.Fatalf("MapTask = %+v, want a create", tm)
	}
	c := tm.Create
	if c.ID != "unique_uuid" || c.From != "orchestrator" || c.To != "concierge-triage-lifecycle-scribe-community" ||
		c.Title != "Human-readable task description" || c.Description != "Human-readable task description" ||
		c.Priority != api.PriorityNormal || c.TimeoutSeconds != 300 || c.RequiresHITL || c.Channel != "" || c.MaxAttempts != 0 {
		t.Errorf("create = %+v", c)
	}
	ctx := jsonOf(t, c.Context)
	for _, k := range []string{"event_context", "context", "repository_context", "timestamp", "original_to", "original_priority", "task"} {
		if _, ok := ctx[k]; !ok {
			t.Errorf("context lacks %s: %s", k, c.Context)
		}
	}
	for _, k := range []string{"message_type", "message_id", "from_agent", "to_agent"} {
		if _, ok := ctx[k]; ok {
			t.Errorf("context keeps the consumed %s: %s", k, c.Context)
		}
	}
	if ctx["task"].(map[string]any)["confidence_threshold"] != 0.95 || ctx["original_priority"] != "high|medium|low" ||
		ctx["context"].(map[string]any)["issue_number"] != 123.0 {
		t.Errorf("context %s", c.Context)
	}
	if _, ok := ctx["task"].(map[string]any)["description"]; ok {
		t.Errorf("context.task keeps the consumed description: %s", c.Context)
	}
}

// Seed 004's failed task_completion, verbatim: the claimant, the task and
// every completion field; the fence is left to the API; fields the
// completion has no name for are kept under flags, the envelope dropped.
func TestMapTaskCompletionSeed(t *testing.T) {
	raw, _ := seed(t, "seed004_completion_failure.json")
	tm, err := MapTask(raw)
	if err != nil {
		t.Fatal(err)
	}
	if tm == nil || tm.Complete == nil || tm.Create != nil {
		t.Fatalf("MapTask = %+v, want a completion", tm)
	}
	c := tm.Complete
	tc := c.Completion
	if c.ID != "original_task_id" || c.Agent != "lifecycle" || c.Fence != 0 || tc.Status != api.TaskStatusFailure ||
		tc.ExecutionTimeMS != 5000 || len(tc.ActionsTaken) != 0 || !strings.HasPrefix(tc.Rationale, "Explanation of what went wrong") ||
		len(tc.NextSteps) != 3 || tc.Error == nil {
		t.Fatalf("completion = %+v", c)
	}
	if e := tc.Error; e.ErrorType != "ci_trigger_failed|insufficient_context|api_error|timeout" || e.ErrorCode != "ERR_001" ||
		e.RetryCount != 3 || !e.IsRecoverable || e.SuggestedAction != "Retry with exponential backoff" || e.ErrorMessage != "Detailed error description" {
		t.Errorf("error = %+v", e)
	}
	flags := jsonOf(t, tc.Flags)
	if flags["requires_human_review"] != true || flags["human_review_reason"] != "Repeated failures require maintainer investigation" || len(flags) != 2 {
		t.Errorf("flags %s", tc.Flags)
	}

	// The success example names its status as a list of choices: refused,
	// naming the field and the choices.
	raw, _ = seed(t, "seed004_completion_success.json")
	_, err = MapTask(raw)
	var fe *api.FieldError
	if !errors.As(err, &fe) || fe.Field != "status" || !strings.Contains(err.Error(), "success, failure") {
		t.Errorf("status placeholder: %v, want a field error on status", err)
	}
	tm, err = MapTask([]byte(strings.Replace(string(raw), `"success|failure|requires_approval|partial_success"`, `"success"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	tc = tm.Complete.Completion
	if tc.Status != "success" || *tc.ConfidenceScore != 0.97 || len(tc.ActionsTaken) != 1 || tc.Error != nil ||
		tm.Complete.Agent != "concierge-triage-lifecycle-scribe-community" || jsonOf(t, tc.Metrics)["tokens_used"] != 1250.0 {
		t.Errorf("success = %+v", tm.Complete)
	}
	flags = jsonOf(t, tc.Flags)
	if flags["documentation_gap"] != "FAQ section lacks setup troubleshooting" || flags["requires_human_review"] != false || flags["coc_concern"] != false {
		t.Errorf("flags %s", tc.Flags)
	}

	// Without task_id, in_reply_to names the task (the delegation's
	// message_id is its id).
	tm, err = MapTask([]byte(`{"message_type":"task_completion","from_agent":"triage","in_reply_to":"t-1","status":"success"}`))
	if err != nil || tm.Complete.ID != "t-1" {
		t.Errorf("in_reply_to: %+v, %v", tm, err)
	}
}

// Any other message is not a task: Map's.
func TestMapTaskOthers(t *testing.T) {
	for _, name := range []string{"seed001.json", "seed002.json", "seed004_coc.json"} {
		raw, _ := seed(t, name)
		if tm, err := MapTask(raw); tm != nil || err != nil {
			t.Errorf("%s: %+v, %v; want nil, nil", name, tm, err)
		}
	}
	for _, body := range []string{`[1]`, `null`, `{"message_type":"request","from_agent":"a"}`} {
		if tm, err := MapTask([]byte(body)); tm != nil || err != nil {
			t.Errorf("%s: %+v, %v; want nil, nil", body, tm, err)
		}
	}
}

// Queues keep their prefix; ids, names and channels map as a message's.
func TestMapTaskNames(t *testing.T) {
	for to, want := range map[string]string{"role:Reviewer": "role:reviewer", "capability:Go Lang": "capability:go-lang", "Triage Bot": "triage-bot"} {
		tm, err := MapTask([]byte(`{"message_type":"task_delegation","from_agent":"Orchestrator","to_agent":"` + to +
			`","session_id":"Ops Room","title":"t","message_id":"not an id!"}`))
		if err != nil {
			t.Fatal(err)
		}
		c := tm.Create
		ctx := jsonOf(t, c.Context)
		if c.To != want || c.From != "orchestrator" || c.Channel != "ops-room" || !strings.HasPrefix(c.ID, "imp-") ||
			ctx["original_id"] != "not an id!" || ctx["original_from"] != "Orchestrator" || ctx["original_session_id"] != "Ops Room" {
			t.Errorf("to %q: %+v context %s", to, c, c.Context)
		}
	}
	// The top level gives what the task object does not; the object wins.
	tm, err := MapTask([]byte(`{"message_type":"task_delegation","from":"a","to":"b","description":"top\nmore","priority":"low",` +
		`"depends_on":["t-1","t-2"],"max_attempts":2,"task":{"priority":"critical"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := tm.Create; c.Title != "top" || c.Description != "top\nmore" || c.Priority != api.PriorityUrgent ||
		!slices.Equal(c.DependsOn, []string{"t-1", "t-2"}) || c.MaxAttempts != 2 || len(c.Context) == 0 {
		t.Errorf("create %+v context %s", c, c.Context)
	}
}

// What cannot be mapped is a *api.FieldError naming the field.
func TestMapTaskErrorsNameTheField(t *testing.T) {
	const d, cpl = `"message_type":"task_delegation",`, `"message_type":"task_completion",`
	for body, field := range map[string]string{
		`{` + d + `"to_agent":"b","title":"t"}`:                                                                            "from",
		`{` + d + `"from_agent":"a","title":"t"}`:                                                                          "to",
		`{` + d + `"from_agent":"a","to_agent":["b","c"],"title":"t"}`:                                                     "to",
		`{` + d + `"from_agent":"a","to_agent":"b"}`:                                                                       "title",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","task":[1]}`:                                                "task",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","task":{"timeout_seconds":"5m"}}`:                           "task.timeout_seconds",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","task":{"timeout_seconds":0.5}}`:                            "task.timeout_seconds",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","task":{"description":7}}`:                                  "task.description",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","priority":7}`:                                              "priority",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","depends_on":"t-1"}`:                                        "depends_on",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","requires_hitl":"no"}`:                                      "requires_hitl",
		`{` + d + `"from_agent":"a","to_agent":"b","title":"t","max_attempts":1000}`:                                       "max_attempts",
		`{` + d + `"from_agent":"a","to_agent":"role:!!","title":"t"}`:                                                     "to",
		`{` + cpl + `"task_id":"t-1","status":"success"}`:                                                                  "from_agent",
		`{` + cpl + `"from_agent":"a","status":"success"}`:                                                                 "task_id",
		`{` + cpl + `"from_agent":"a","task_id":"t-1","status":"done"}`:                                                    "status",
		`{` + cpl + `"from_agent":"a","task_id":"t-1","status":"success","confidence_score":2}`:                            "confidence_score",
		`{` + cpl + `"from_agent":"a","task_id":"t-1","status":"success","confidence_score":"high"}`:                       "confidence_score",
		`{` + cpl + `"from_agent":"a","task_id":"t-1","status":"failure","error":{"retry_count":"3"}}`:                     "error.retry_count",
		`{` + cpl + `"from_agent":"a","task_id":"t-1","status":"failure","error":{"error_message":"x"}}`:                   "error.error_type",
		`{` + cpl + `"from_agent":"a","task_id":"t-1","status":"success","rationale":"` + strings.Repeat("r", 1001) + `"}`: "rationale",
	} {
		_, err := MapTask([]byte(body))
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("MapTask(%.120s) = %v, want a *api.FieldError on %s", body, err, field)
		}
	}
}
