package maosctl

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestPolicyVerbs(t *testing.T) {
	e := newTestEnv(t)
	if out := e.ok("policy", "get", "--agent", "claude"); out != "claude: no run-time policy; its watchers' YAML policy applies\n" {
		t.Errorf("get with none = %q", out)
	}
	out := e.ok("policy", "set", "--agent", "claude", "--mode", "quiet", "--for", "1h")
	if !regexp.MustCompile(`^claude: all mail quiet, until \S+ \S+ \(in (1h0m0s|59m5\ds)\)\n$`).MatchString(out) {
		t.Errorf("set = %q", out)
	}
	var p api.Policy
	if err := json.Unmarshal([]byte(e.ok("--json", "policy", "set", "--agent", "claude", "--from", "lead", "--mode", "interrupt")), &p); err != nil {
		t.Fatal(err)
	}
	if p.Agent != "claude" || p.From != "lead" || p.Mode != api.PolicyInterrupt || !p.Until.IsZero() || p.SetBy != "claude" {
		t.Errorf("set --json = %+v", p)
	}
	out = e.ok("policy", "get", "--agent", "claude")
	for _, want := range []string{`(?m)^MAIL +MODE +ENDS +SET BY +SOURCE$`, `(?m)^all mail +quiet +until .* \(in .*\) +claude at .* +run time$`,
		`(?m)^from lead +interrupt +until cleared +claude at .* +run time$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("get = %q, lacks %s", out, want)
		}
	}
	var set api.PolicySet
	if err := json.Unmarshal([]byte(e.ok("--json", "policy", "get", "--agent", "claude")), &set); err != nil || len(set.Policies) != 2 {
		t.Fatalf("get --json = %+v, %v", set, err)
	}
	if out := e.ok("policy", "clear", "--agent", "claude"); out != "claude: all mail policy cleared; its watchers' YAML applies\n" {
		t.Errorf("clear = %q", out)
	}
	// With only an override left, get says what covers the rest.
	out = e.ok("policy", "get", "--agent", "claude")
	if !regexp.MustCompile(`(?m)^other mail +\(YAML\) +watcher config$`).MatchString(out) {
		t.Errorf("get with an override only = %q, lacks the YAML line", out)
	}
	if out := e.ok("policy", "clear", "--agent", "claude", "--from", "lead"); out != "claude: from lead policy cleared; its watchers' YAML applies\n" {
		t.Errorf("clear --from = %q", out)
	}
	if out := e.ok("policy", "clear", "--agent", "claude", "--from", "lead"); out != "claude: from lead policy none was set; its watchers' YAML applies\n" {
		t.Errorf("second clear --from = %q", out)
	}
	if set, _ := e.svc.State().Policies("claude", time.Now()); len(set.Policies) != 0 {
		t.Errorf("policies after the clears = %+v", set)
	}
}

func TestPolicyVerbRefusals(t *testing.T) {
	e := newTestEnv(t)
	e.fails("", []string{"policy", "set", "--agent", "claude"}, "missing required flag --mode")
	e.fails("", []string{"policy", "set", "--mode", "quiet"}, "--agent is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
	e.fails("", []string{"policy", "set", "--agent", "claude", "--mode", "loud"}, `mode: "loud" is not a mode`)
	e.fails("", []string{"policy", "set", "--agent", "claude", "--mode", "quiet", "--for", "1500ms"}, "--for 1.5s: must be whole seconds, at most 720h")
	e.fails("", []string{"policy", "set", "--agent", "claude", "--mode", "quiet", "--for", "721h"}, "at most 720h")
	e.fails("", []string{"policy", "get"}, "--agent is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
	if set, _ := e.svc.State().Policies("claude", time.Now()); len(set.Policies) != 0 {
		t.Errorf("a refused set stored %+v", set)
	}
}
