package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestCanonicalJSONAndActionHash(t *testing.T) {
	a := json.RawMessage(`{ "tool_input": {"command": "git push", "n": 12345678901234567890}, "tool_name": "Bash", "<": "&" }`)
	b := json.RawMessage(`{"<":"&","tool_name":"Bash","tool_input":{"n":12345678901234567890,"command":"git push"}}`)
	ca, err := api.CanonicalJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"<":"&","tool_input":{"command":"git push","n":12345678901234567890},"tool_name":"Bash"}`; string(ca) != want {
		t.Errorf("canonical = %s, want %s (sorted keys, numbers as written, no HTML escaping)", ca, want)
	}
	ha, _ := api.ActionHash(a)
	hb, _ := api.ActionHash(b)
	if ha != hb || !api.ValidActionHash(ha) {
		t.Errorf("hashes %s and %s of the same value differ or are malformed", ha, hb)
	}
	hc, _ := api.ActionHash(json.RawMessage(`{"tool_name":"Bash","tool_input":{"command":"git push --force"}}`))
	if hc == ha {
		t.Error("a different action hashes the same")
	}
	for _, bad := range []string{``, `{`, `{} {}`, `nul`} {
		if _, err := api.CanonicalJSON(json.RawMessage(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) accepted", bad)
		}
	}
}

func validApprovalRequest() api.ApprovalRequestCommand {
	c := api.ApprovalRequestCommand{From: "triage", Approvers: []string{"alice", "bob", "role:lead"}, Quorum: 2,
		Title: "Close #123 as a duplicate", Action: json.RawMessage(`{"action_type":"close_issue","issue_number":123}`)}
	c.Normalize(time.Date(2026, 11, 24, 10, 30, 0, 0, time.UTC))
	return c
}

func TestApprovalRequestNormalize(t *testing.T) {
	c := validApprovalRequest()
	if !strings.HasPrefix(c.ID, "appr-20261124-103000-triage-") || c.Priority != api.PriorityNormal || c.OnTimeout != api.OnTimeoutReject ||
		time.Duration(c.Timeout) != api.DefaultApprovalTimeout || c.Channel != api.DefaultChannel {
		t.Errorf("defaults not filled: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	withExtras := validApprovalRequest()
	withExtras.Options, withExtras.Context = []string{"approve", "reject"}, json.RawMessage(`{ "url": "https://x", "a": 1 }`)
	withExtras.Normalize(time.Now())
	if err := withExtras.Validate(); err != nil || string(withExtras.Context) != `{"a":1,"url":"https://x"}` {
		t.Errorf("options and context: %v, context %s", err, withExtras.Context)
	}
	seed := api.ApprovalRequestCommand{From: "triage", Approvers: []string{"alice"}, Title: "t", Action: json.RawMessage(`1`), TimeoutHours: 72}
	seed.Normalize(time.Now())
	if time.Duration(seed.Timeout) != 72*time.Hour || seed.TimeoutHours != 0 {
		t.Errorf("timeout_hours 72 became timeout %v (hours left %v)", time.Duration(seed.Timeout), seed.TimeoutHours)
	}
	var d api.ApprovalTimeout
	for in, want := range map[string]time.Duration{`"10m"`: 10 * time.Minute, `90`: 90 * time.Second, `0.5`: 500 * time.Millisecond} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || time.Duration(d) != want {
			t.Errorf("timeout %s = %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error(`timeout "soon" accepted`)
	}
}

func TestApprovalRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        func(*api.ApprovalRequestCommand)
	}{
		{"bad id", "id", func(c *api.ApprovalRequestCommand) { c.ID = "" }},
		{"maos", "from", func(c *api.ApprovalRequestCommand) { c.From = api.SystemSender }},
		{"no approvers", "approvers", func(c *api.ApprovalRequestCommand) { c.Approvers = nil }},
		{"glob approver", "approvers[1]", func(c *api.ApprovalRequestCommand) { c.Approvers = []string{"alice", "eng*"} }},
		{"all", "approvers[0]", func(c *api.ApprovalRequestCommand) { c.Approvers = []string{"all"} }},
		{"twice", "approvers[1]", func(c *api.ApprovalRequestCommand) { c.Approvers = []string{"alice", "alice"} }},
		{"quorum zero", "quorum", func(c *api.ApprovalRequestCommand) { c.Quorum = -1 }},
		{"quorum unreachable", "quorum", func(c *api.ApprovalRequestCommand) { c.Approvers, c.Quorum = []string{"alice"}, 2 }},
		{"no title", "title", func(c *api.ApprovalRequestCommand) { c.Title = "" }},
		{"no action", "action", func(c *api.ApprovalRequestCommand) { c.Action = nil }},
		{"bad action", "action", func(c *api.ApprovalRequestCommand) { c.Action = json.RawMessage(`{"a":`) }},
		{"big action", "action", func(c *api.ApprovalRequestCommand) {
			c.Action = json.RawMessage(`"` + strings.Repeat("x", api.MaxActionBytes) + `"`)
		}},
		{"confidence", "confidence", func(c *api.ApprovalRequestCommand) { v := 2.0; c.Confidence = &v }},
		{"short timeout", "timeout", func(c *api.ApprovalRequestCommand) { c.Timeout = api.ApprovalTimeout(time.Millisecond) }},
		{"both timeouts", "timeout_hours", func(c *api.ApprovalRequestCommand) { c.TimeoutHours = 1 }},
		{"on_timeout", "on_timeout", func(c *api.ApprovalRequestCommand) { c.OnTimeout = "approve" }},
		{"rationale", "rationale", func(c *api.ApprovalRequestCommand) { c.Rationale = strings.Repeat("r", api.MaxTaskNoteRunes+1) }},
		{"unknown option", "options[1]", func(c *api.ApprovalRequestCommand) { c.Options = []string{"approve", "defer"} }},
		{"option twice", "options[1]", func(c *api.ApprovalRequestCommand) { c.Options = []string{"reject", "reject"} }},
		{"no approve option", "options", func(c *api.ApprovalRequestCommand) { c.Options = []string{"reject", "modify"} }},
		{"context not an object", "context", func(c *api.ApprovalRequestCommand) { c.Context = json.RawMessage(`[1]`) }},
		{"context not JSON", "context", func(c *api.ApprovalRequestCommand) { c.Context = json.RawMessage(`{"a"`) }},
		{"big context", "context", func(c *api.ApprovalRequestCommand) {
			c.Context = json.RawMessage(`{"a":"` + strings.Repeat("x", api.MaxActionBytes) + `"}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validApprovalRequest()
			tc.edit(&c)
			var fe *api.FieldError
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Validate = %v, want a field error on %s", err, tc.field)
			}
		})
	}
}

func TestApprovalDecideValidate(t *testing.T) {
	hash, _ := api.ActionHash(json.RawMessage(`{"a":1}`))
	ok := api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: api.DecisionApprove, ActionHash: hash}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid decision refused: %v", err)
	}
	for _, tc := range []struct {
		field string
		c     api.ApprovalDecideCommand
	}{
		{"decision", api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: "maybe", ActionHash: hash}},
		{"action_hash", api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: api.DecisionApprove, ActionHash: strings.TrimPrefix(hash, "sha256:")}},
		{"action_hash", api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: api.DecisionApprove, ActionHash: strings.ToUpper(hash)}},
		{"action", api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: api.DecisionModify, ActionHash: hash}},
		{"action", api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: api.DecisionApprove, ActionHash: hash, Action: json.RawMessage(`{}`)}},
		{"approver", api.ApprovalDecideCommand{ID: "appr-1", Approver: "Alice", Decision: api.DecisionApprove, ActionHash: hash}},
	} {
		var fe *api.FieldError
		if err := tc.c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: Validate = %v, want a field error on %s", tc.c, err, tc.field)
		}
	}
	m := api.ApprovalDecideCommand{ID: "appr-1", Approver: "alice", Decision: api.DecisionModify, ActionHash: hash, Action: json.RawMessage(`{ "b": 2, "a": 1 }`)}
	m.Normalize()
	if string(m.Action) != `{"a":1,"b":2}` || m.Validate() != nil {
		t.Errorf("modify normalized to %s (%v)", m.Action, m.Validate())
	}
}
