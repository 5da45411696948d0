package dialect

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// registeredOnly is a registry that knows names alone.
func registeredOnly(names ...string) func(string) bool {
	return func(id string) bool { return slices.Contains(names, id) }
}

// Seed 004's hitl_approval_request, verbatim: proposed_action is the
// action, the tagged approvers resolve to the registered agents (the
// others kept as unresolved), the placeholder priority maps as a
// message's, and the fields an approval has no name for are its context.
func TestMapApprovalSeed(t *testing.T) {
	raw, obj := seed(t, "seed004_approval.json")
	if !Is(obj) {
		t.Error("seed 004's approval request is not seen as a dialect")
	}
	c, err := MapApproval(raw, registeredOnly("maintainer1"))
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		t.Fatal("MapApproval = nil, want a request")
	}
	if c.ID != "unique_uuid" || c.From != "triage" || !slices.Equal(c.Approvers, []string{"maintainer1"}) ||
		c.Title != "close_duplicate_issue" || c.ApprovalNeededFor != "close_duplicate_issue" ||
		c.Rationale != "Why this action is recommended" || c.Confidence == nil || *c.Confidence != 0.96 ||
		c.Priority != api.PriorityNormal || c.TimeoutHours != 72 || c.Quorum != 0 ||
		!slices.Equal(c.Options, []string{"approve", "reject", "modify"}) || c.Channel != "" {
		t.Errorf("request = %+v", c)
	}
	action := jsonOf(t, c.Action)
	if action["action_type"] != "close_issue" || action["issue_number"] != 123.0 ||
		action["details"].(map[string]any)["duplicate_of"] != 456.0 {
		t.Errorf("action %s", c.Action)
	}
	ctx := jsonOf(t, c.Context)
	if ctx["github_comment_posted"] != true || ctx["github_comment_url"] != "https://github.com/owner/repo/issues/123#issuecomment-xyz" ||
		ctx["timestamp"] != "2025-10-20T14:30:00Z" || ctx["original_priority"] != "high|medium|low" {
		t.Errorf("context %s", c.Context)
	}
	if u, ok := ctx["unresolved_approvers"].([]any); !ok || len(u) != 1 || u[0] != "@maintainer2" {
		t.Errorf("unresolved approvers in context %s", c.Context)
	}
	if to, ok := ctx["original_to"].([]any); !ok || len(to) != 1 || to[0] != "orchestrator" {
		t.Errorf("unused to_agent in context %s", c.Context)
	}
	for _, k := range []string{"message_type", "message_id", "from_agent", "proposed_action", "approvers_tagged", "human_decision_options"} {
		if _, ok := ctx[k]; ok {
			t.Errorf("context keeps the consumed %s: %s", k, c.Context)
		}
	}
	// As the API normalizes it: 72 hours, a valid request.
	check := *c
	check.Normalize(time.Now())
	if err := check.Validate(); err != nil || time.Duration(check.Timeout) != 72*time.Hour {
		t.Errorf("normalized %+v: %v", check, err)
	}

	// Nobody tagged is registered: the message's to_agent decides.
	c, err = MapApproval(raw, registeredOnly())
	if err != nil {
		t.Fatal(err)
	}
	ctx = jsonOf(t, c.Context)
	if !slices.Equal(c.Approvers, []string{"orchestrator"}) || ctx["original_to"] != nil || len(ctx["unresolved_approvers"].([]any)) != 2 {
		t.Errorf("fallback: approvers %v context %s", c.Approvers, c.Context)
	}
}

// Roles are kept as tagged; names, ids and channels map as a message's;
// without approval_needed_for the title is the rationale's first line.
func TestMapApprovalNames(t *testing.T) {
	c, err := MapApproval([]byte(`{"message_type":"hitl_approval_request","message_id":"not an id!","from_agent":"Triage Bot",`+
		`"approvers_tagged":["@role:Lead","@Alice","@alice","@capability:go"],"quorum":2,"session_id":"Ops Room",`+
		`"rationale":"first line\nmore","proposed_action":{"x":1},"priority":"critical","on_timeout":"escalate"}`), registeredOnly("alice"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := jsonOf(t, c.Context)
	if !strings.HasPrefix(c.ID, "imp-") || c.From != "triage-bot" || !slices.Equal(c.Approvers, []string{"role:lead", "alice"}) ||
		c.Quorum != 2 || c.Channel != "ops-room" || c.Title != "first line" || c.Priority != api.PriorityUrgent ||
		c.OnTimeout != api.OnTimeoutEscalate || ctx["original_id"] != "not an id!" || ctx["original_from"] != "Triage Bot" ||
		ctx["original_session_id"] != "Ops Room" || len(ctx["unresolved_approvers"].([]any)) != 1 {
		t.Errorf("request %+v context %s", c, c.Context)
	}
}

// Any other message is not an approval request: nil, nil.
func TestMapApprovalOthers(t *testing.T) {
	for _, name := range []string{"seed001.json", "seed002.json", "seed004_coc.json", "seed004_delegation.json"} {
		raw, _ := seed(t, name)
		if c, err := MapApproval(raw, registeredOnly()); c != nil || err != nil {
			t.Errorf("%s: %+v, %v; want nil, nil", name, c, err)
		}
	}
	for _, body := range []string{`[1]`, `null`, `{"message_type":"request","from_agent":"a"}`} {
		if c, err := MapApproval([]byte(body), registeredOnly()); c != nil || err != nil {
			t.Errorf("%s: %+v, %v; want nil, nil", body, c, err)
		}
	}
}

// What cannot be mapped is a *api.FieldError naming the field.
func TestMapApprovalErrorsNameTheField(t *testing.T) {
	const h = `"message_type":"hitl_approval_request",`
	const ok = `"from_agent":"a","to_agent":"b","proposed_action":{"x":1},"title":"t"`
	for body, field := range map[string]string{
		`{` + h + `"to_agent":"b","proposed_action":1,"title":"t"}`:                    "from_agent",
		`{` + h + `"from_agent":"a","proposed_action":1,"title":"t"}`:                  "approvers_tagged",
		`{` + h + `"from_agent":"a","to_agent":"b","title":"t"}`:                       "proposed_action",
		`{` + h + `"from_agent":"a","to_agent":"b","proposed_action":1}`:               "title",
		`{` + h + ok + `,"approvers_tagged":"@x"}`:                                     "approvers_tagged",
		`{` + h + ok + `,"confidence":"high"}`:                                         "confidence",
		`{` + h + ok + `,"confidence":2}`:                                              "confidence",
		`{` + h + ok + `,"timeout_hours":"3d"}`:                                        "timeout_hours",
		`{` + h + ok + `,"timeout_hours":100000}`:                                      "timeout",
		`{` + h + ok + `,"quorum":2}`:                                                  "quorum",
		`{` + h + ok + `,"human_decision_options":"approve"}`:                          "human_decision_options",
		`{` + h + ok + `,"human_decision_options":["approve","defer"]}`:                "options[1]",
		`{` + h + ok + `,"on_timeout":"approve"}`:                                      "on_timeout",
		`{` + h + ok + `,"rationale":7}`:                                               "rationale",
		`{` + h + ok + `,"session_id":"!!"}`:                                           "channel",
		`{` + h + `"from_agent":"a","to_agent":"all","proposed_action":1,"title":"t"}`: "approvers[0]",
	} {
		_, err := MapApproval([]byte(body), registeredOnly())
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("MapApproval(%.120s) = %v, want a *api.FieldError on %s", body, err, field)
		}
	}
}
