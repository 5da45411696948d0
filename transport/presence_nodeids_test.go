package transport_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// A presence's standbys are a JSON array on the wire, and the field is
// left out when none stand by; a string is refused, naming the field.
func TestPresenceStandbyIsAnArray(t *testing.T) {
	p := api.Presence{AgentID: "oncall", ServedBy: "n1", Standby: api.JoinNodeIDs([]string{"n2", "n3"})}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"standby":["n2","n3"]`) {
		t.Fatalf("JSON %s: want standby as an array", b)
	}
	var back api.Presence
	if err := json.Unmarshal(b, &back); err != nil || back != p {
		t.Fatalf("round trip = %+v, %v; want %+v", back, err, p)
	}
	if got := back.Standby.List(); len(got) != 2 || got[0] != "n2" || got[1] != "n3" {
		t.Fatalf("List() = %q", got)
	}

	b, _ = json.Marshal(api.Presence{AgentID: "solo", ServedBy: "n1"})
	if strings.Contains(string(b), "standby") {
		t.Fatalf("JSON %s: want no standby field when none stand by", b)
	}
	if l := api.NodeIDs("").List(); l != nil {
		t.Fatalf(`NodeIDs("").List() = %q, want nil`, l)
	}

	err = json.Unmarshal([]byte(`{"agent_id":"x","standby":"n2,n3"}`), &back)
	if err == nil || !strings.Contains(err.Error(), "standby") {
		t.Fatalf("a string standby: %v, want an error naming standby", err)
	}
}
