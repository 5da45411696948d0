package rules

import (
	"errors"
	"strings"
	"testing"
)

// reroute_blocked_to names one agent; it reads from JSON and YAML, prints
// back, shows in the summary and is refused naming the field when it is
// not an agent id.
func TestRerouteBlockedTo(t *testing.T) {
	yamlDoc := "preset: hierarchical\nreroute_blocked_to: orchestrator\n"
	y, err := Decode([]byte(yamlDoc), YAML)
	if err != nil {
		t.Fatal(err)
	}
	j, err := decodeJSON(t, `{"preset": "hierarchical", "reroute_blocked_to": "orchestrator"}`)
	if err != nil {
		t.Fatal(err)
	}
	if y.RerouteBlockedTo != "orchestrator" || j.RerouteBlockedTo != "orchestrator" {
		t.Fatalf("decoded reroute_blocked_to = %q (YAML), %q (JSON), want orchestrator", y.RerouteBlockedTo, j.RerouteBlockedTo)
	}
	out, err := EncodeYAML(y)
	if err != nil {
		t.Fatal(err)
	}
	if want := "preset: hierarchical\nreroute_blocked_to: orchestrator\n"; !strings.HasPrefix(string(out), want) {
		t.Errorf("EncodeYAML =\n%s\nwant it to start with\n%s", out, want)
	}
	if got, want := y.Summary(), "preset hierarchical, 0 agent entries, 0 forbidden, blocked rerouted to orchestrator, default deny"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	c, err := Compile(y)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RerouteBlockedTo(); got != "orchestrator" {
		t.Errorf("Compiled.RerouteBlockedTo = %q, want orchestrator", got)
	}
	if got := (*Compiled)(nil).RerouteBlockedTo(); got != "" {
		t.Errorf("no document: RerouteBlockedTo = %q, want none", got)
	}
	// Rerouting changes where a blocked copy goes, not who is blocked.
	if ok, _ := c.Allows("w1", "engineer", "w2", "engineer"); ok {
		t.Error("reroute_blocked_to let a worker message a worker")
	}

	for _, bad := range []struct{ doc, reason string }{
		{`{"reroute_blocked_to": "role:orchestrator"}`, `"role:orchestrator" is not an agent id`},
		{`{"reroute_blocked_to": "Boss"}`, `"Boss" is not an agent id`},
		{`{"reroute_blocked_to": ["orchestrator"]}`, "want a string, got a list"},
	} {
		_, err := decodeJSON(t, bad.doc)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "reroute_blocked_to" || !strings.Contains(fe.Reason, bad.reason) {
			t.Errorf("%s: %v, want a field error on reroute_blocked_to with %q", bad.doc, err, bad.reason)
		}
	}
}
