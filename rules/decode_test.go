package rules

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// seedRulesYAML is the seed's communication_rules.yaml as the seed writes
// it, comments and all: testdata/communication_rules.yaml, which the tests
// of fsm and transport read too.
func seedRulesYAML(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("testdata/communication_rules.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// The seed file in YAML and its JSON form decode to the same document.
func TestDecodeYAMLAndJSONAgree(t *testing.T) {
	y, err := Decode([]byte(seedRulesYAML(t)), YAML)
	if err != nil {
		t.Fatal(err)
	}
	j, err := Decode([]byte(seedRulesJSON), JSON)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(y, j) {
		t.Errorf("YAML %+v\nJSON %+v", y, j)
	}
	if len(y.AllowedInteractions) != 4 || y.ForbiddenInteractions[0].Reason != "Should go through developer first" {
		t.Errorf("decoded %+v", y)
	}
	// Every field, both syntaxes.
	const full = `{"preset": "hierarchical", "orchestrator_role": "lead", "default": "allow",
	  "interrupt": ["role:lead", "ops"], "agents": [{"agent": "x", "can_send_to": [], "can_receive_from": "*"}],
	  "allowed_interactions": {"y": {"can_send_to": ["x"]}}, "forbidden": [{"from": "a", "to": "b", "reason": "r"}],
	  "forbidden_interactions": [{"from": "c", "to": "d"}]}`
	fromJSON, err := Decode([]byte(full), JSON)
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := Decode([]byte(full), YAML) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	want := &Document{Preset: "hierarchical", OrchestratorRole: "lead", Default: "allow",
		Interrupt:             []string{"role:lead", "ops"},
		Agents:                []AgentRule{{Agent: "x", CanSendTo: []string{}, CanReceiveFrom: []string{"*"}}},
		AllowedInteractions:   map[string]AgentRule{"y": {CanSendTo: []string{"x"}}},
		Forbidden:             []ForbiddenRule{{From: "a", To: "b", Reason: "r"}},
		ForbiddenInteractions: []ForbiddenRule{{From: "c", To: "d"}}}
	for name, got := range map[string]*Document{"JSON": fromJSON, "YAML": fromYAML} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v\nwant %+v", name, got, want)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		format    Format
		want      string
	}{
		{"empty", "  \n", JSON, "empty rules document"},
		{"empty YAML", "\n", YAML, "empty rules document"},
		{"bad YAML", "agents: [\n", YAML, "malformed YAML: "},
		{"unquoted star", "agents:\n  - agent: x\n    can_send_to: [*]\n", YAML, `(quote "*": unquoted, it starts a YAML alias)`},
		{"two YAML documents", "preset: hierarchical\n---\ndefault: deny\n", YAML, "several YAML documents (---): send one"},
		{"bad JSON", `{"preset":`, JSON, "malformed JSON: "},
		{"trailing data", `{"preset":"hierarchical"} {}`, JSON, "trailing data after the JSON document"},
		{"YAML is not JSON", "preset: hierarchical\n", JSON, "malformed JSON"},
	} {
		_, err := Decode([]byte(c.doc), c.format)
		if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrMalformed with %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), ErrMalformed.Error()) {
			t.Errorf("%s: %q repeats the sentinel's words; the caller adds its own", c.name, err)
		}
	}
}

func TestDecodeYAMLFieldErrors(t *testing.T) {
	for _, c := range []struct{ doc, field, reason string }{
		{"allowed_interactions:\n  1: {can_send_to: [x]}\n", "allowed_interactions", "key 1 is not a string (quote it)"},
		{"1: x\n", "rules", "key 1 is not a string"},
		{"agents:\n  - {agent: x, can_send_to: [y], true: 1}\n", "agents[0]", "key true is not a string"},
		{"agents:\n  - agent: 123\n    can_send_to: [x]\n", "agents[0].agent", "want a string, got a number (123) (quote it)"},
		{"agents:\n  - agent: x\n    can_send: [y]\n", "agents[0].can_send", "unknown field; known here: agent, can_receive_from, can_send_to"},
		{"default: 2026-01-02\n", "default", "want a string, got a timestamp"},
		{"- a\n", "rules", "want an object (a mapping)"},
	} {
		_, err := Decode([]byte(c.doc), YAML)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.reason) {
			t.Errorf("%q: %v, want field %s with %q", c.doc, err, c.field, c.reason)
		}
	}
}

// The stored form is the document's JSON: a document that comes back from
// it (as fsm reads its state) compiles to the same answers.
func TestDocumentJSONRoundTrip(t *testing.T) {
	for _, doc := range []string{seedRulesJSON, precedenceDoc, `{"agents": [{"agent": "x", "can_send_to": []}]}`,
		`{"interrupt": []}`, `{"interrupt": ["role:lead"], "preset": "hierarchical"}`} {
		d, err := decodeJSON(t, doc)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Document
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, d) {
			t.Errorf("through JSON:\n%+v\nwant\n%+v", &back, d)
		}
	}
	// [] (nobody) and a missing list (nothing said) stay apart; without an
	// interrupt list the stored bytes are what they were before the list
	// existed.
	for doc, want := range map[string]string{
		`{"agents": [{"agent": "x", "can_send_to": []}]}`: `{"agents":[{"agent":"x","can_send_to":[]}]}`,
		`{"default": "deny"}`:                             `{"default":"deny"}`,
		`{"default": "deny", "interrupt": []}`:            `{"default":"deny","interrupt":[]}`,
	} {
		d, err := decodeJSON(t, doc)
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := json.Marshal(d); string(data) != want {
			t.Errorf("%s: stored form %s, want %s", doc, data, want)
		}
	}
}
