package fsm

import (
	"testing"

	"github.com/maos-project/maos/api"
)

// InQueue is the claim's rule: the agent named, or a registered agent of
// the role or with the capability.
func TestInQueue(t *testing.T) {
	rita := &api.Agent{ID: "rita", Role: "reviewer", Capabilities: []string{"go", "review"}}
	for _, tc := range []struct {
		agent string
		a     *api.Agent
		to    string
		want  bool
	}{
		{"rita", rita, "rita", true},
		{"rita", nil, "rita", true},
		{"rita", rita, "bob", false},
		{"rita", rita, "role:reviewer", true},
		{"rita", rita, "role:tester", false},
		{"rita", nil, "role:reviewer", false},
		{"rita", rita, "capability:go", true},
		{"rita", rita, "capability:rust", false},
		{"rita", nil, "capability:go", false},
		{"reviewer", nil, "role:reviewer", false},
	} {
		if got := InQueue(tc.agent, tc.a, tc.to); got != tc.want {
			t.Errorf("InQueue(%s, %v, %s) = %v, want %v", tc.agent, tc.a != nil, tc.to, got, tc.want)
		}
	}
}
