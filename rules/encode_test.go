package rules

import (
	"reflect"
	"strings"
	"testing"
)

// What EncodeYAML prints, Decode reads back to the same document; the
// YAML keeps [] (nobody) apart from a missing list (nothing said).
func TestEncodeYAMLRoundTrip(t *testing.T) {
	for _, doc := range []string{
		seedRulesJSON, precedenceDoc, `{}`,
		`{"preset": "hierarchical", "orchestrator_role": "lead", "default": "allow"}`,
		`{"agents": [{"agent": "x", "can_receive_from": []}]}`,
		`{"preset": "hierarchical", "orchestrator_role": "lead", "default": "allow", "interrupt": ["role:lead", "ops-*"]}`,
		`{"interrupt": [], "agents": [{"agent": "x", "can_receive_from": []}]}`,
		`{"reroute_blocked_to": "orchestrator", "forbidden": [{"from": "*", "to": "vault"}]}`,
		`{"allowed_interactions": {"z": {"can_send_to": "*"}, "a": {"can_receive_from": ["role:qa"]}},
		  "forbidden": [{"from": "*", "to": "vault"}]}`,
	} {
		d, err := decodeJSON(t, doc)
		if err != nil {
			t.Fatal(err)
		}
		out, err := EncodeYAML(d)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(out, YAML)
		if err != nil {
			t.Fatalf("%s\nprinted\n%s\nreads back as %v", doc, out, err)
		}
		if !reflect.DeepEqual(back, d) {
			t.Errorf("%s\nprinted\n%s\nreads back as %+v", doc, out, back)
		}
		// The same bytes every time (allowed_interactions is a map).
		if again, _ := EncodeYAML(d); string(again) != string(out) {
			t.Errorf("two encodings differ:\n%s\n%s", out, again)
		}
	}
}

func TestEncodeYAMLShape(t *testing.T) {
	d, err := decodeJSON(t, `{"forbidden_interactions": [{"from": "t", "to": "r", "reason": "go through d"}],
	  "agents": [{"agent": "engineer_*", "can_send_to": "role:lead"}, {"agent": "x", "can_receive_from": []}],
	  "interrupt": ["role:lead"], "default": "deny", "preset": "hierarchical"}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := EncodeYAML(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `preset: hierarchical
default: deny
interrupt: ['role:lead']
agents:
  - agent: engineer_*
    can_send_to: ['role:lead']
  - agent: x
    can_receive_from: []
forbidden_interactions:
  - from: t
    to: r
    reason: go through d
`
	if string(out) != want {
		t.Errorf("EncodeYAML:\n%s\nwant\n%s", out, want)
	}

	// Without an interrupt list, a comment says who may interrupt.
	for doc, want := range map[string]string{
		`{}`: "{}  # an empty document: everyone may message everyone\n" +
			"# no interrupt list: only roles master, orchestrator, supervisor may interrupt\n",
		`{"default": "deny"}`: "default: deny\n# no interrupt list: only roles master, orchestrator, supervisor may interrupt\n",
		`{"interrupt": []}`:   "interrupt: []\n",
	} {
		d, err := decodeJSON(t, doc)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := EncodeYAML(d); err != nil || string(out) != want {
			t.Errorf("EncodeYAML(%s) = %q, %v; want %q", doc, out, err, want)
		}
	}
	if _, err := EncodeYAML(nil); err == nil || !strings.Contains(err.Error(), "rules: required") {
		t.Errorf("EncodeYAML(nil) = %v", err)
	}
}
