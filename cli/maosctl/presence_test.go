package maosctl

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestWhoTable(t *testing.T) {
	e := newTestEnv(t)
	if out := e.ok("who"); !strings.Contains(out, "no agent has sent a heartbeat") {
		t.Errorf("who with no agents printed %q", out)
	}
	now := time.Now().UTC()
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Substate: "WORKING", Source: "hook", Channel: "review",
		PID: 42, Task: "reviewing PR 12", Timestamp: now.Add(-4 * time.Second), Version: 7, Origin: "n1"})
	e.svc.SetPresence(api.Presence{AgentID: "codex", Node: "n2", State: "OFFLINE", Reason: "node n2 dead",
		Timestamp: now.Add(-3 * time.Minute), Version: 9, Origin: "n1"})
	out := e.ok("who")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("who printed %d lines, want a header and 2 agents:\n%s", len(lines), out)
	}
	for i, re := range []string{
		`^AGENT\s+STATE\s+SUBSTATE\s+SOURCE\s+NODE\s+CHANNEL\s+LAST SEEN\s+TASK$`,
		`^claude\s+AWAKE\s+WORKING\s+hook\s+n1\s+review\s+\d+s ago\s+reviewing PR 12$`,
		`^codex\s+OFFLINE \(node n2 dead\)\s+-\s+-\s+n2\s+-\s+3m ago\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want it to match %s", i, lines[i], re)
		}
	}
	one := e.ok("who", "codex")
	if strings.Contains(one, "claude") || !strings.Contains(one, "node n2 dead") {
		t.Errorf("who codex printed:\n%s", one)
	}
}

func TestWhoJSON(t *testing.T) {
	e := newTestEnv(t)
	ts := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Substate: "IDLE", Source: "pane", Timestamp: ts, Version: 3, Origin: "n1"})
	if out := e.ok("who", "--json"); !strings.Contains(out, `"substate": "IDLE",`+"\n"+`      "source": "pane",`) {
		t.Errorf("who --json does not show the substate and its source:\n%s", out)
	}
	var list api.PresenceResponse
	dec := json.NewDecoder(strings.NewReader(e.ok("who", "--json")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].AgentID != "claude" || list.Agents[0].Source != "pane" || list.Agents[0].Version != 3 || !list.Agents[0].Timestamp.Equal(ts) {
		t.Errorf("who --json = %+v", list)
	}
	var one api.Presence
	if err := json.Unmarshal([]byte(e.ok("--json", "who", "claude")), &one); err != nil || one.AgentID != "claude" || one.Source != "pane" {
		t.Errorf("who --json claude = %+v, %v", one, err)
	}
	// Empty: a list, not null, so scripts can iterate.
	e2 := newTestEnv(t)
	if out := strings.TrimSpace(e2.ok("who", "--json")); !strings.Contains(out, `"agents": []`) {
		t.Errorf("empty who --json = %s", out)
	}
}

// who --health: each agent's status by Presence.Health's rule, its task
// counts, error rate, mean run time and last error; --json the reports.
func TestWhoHealth(t *testing.T) {
	e := newTestEnv(t)
	now := time.Now().UTC()
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Substate: "WORKING", Timestamp: now,
		AgentHealth: api.AgentHealth{TasksRunning: 1, TasksSucceeded: 3, TasksFailed: 1, LastError: "exit status 2", MeanDurationMS: 2500},
		Version:     7, Origin: "n1"})
	e.svc.SetPresence(api.Presence{AgentID: "codex", Node: "n2", State: "OFFLINE", Reason: "node n2 dead",
		Timestamp: now, Version: 9, Origin: "n1"})
	e.svc.SetPresence(api.Presence{AgentID: "gemini", Node: "n1", State: "AWAKE", Substate: "IDLE", Timestamp: now,
		AgentHealth: api.AgentHealth{TasksFailed: 2}, Version: 10, Origin: "n1"})
	out := e.ok("who", "--health")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("who --health printed %d lines, want a header and 3 agents:\n%s", len(lines), out)
	}
	for i, re := range []string{
		`^AGENT\s+STATUS\s+RUNNING\s+SUCCEEDED\s+FAILED\s+ERROR RATE\s+MEAN\s+LAST ERROR$`,
		`^claude\s+healthy\s+1\s+3\s+1\s+25%\s+2\.5s\s+exit status 2$`,
		`^codex\s+error \(node n2 dead\)\s+0\s+0\s+0\s+0%\s+-\s+-$`,
		`^gemini\s+degraded\s+0\s+0\s+2\s+100%\s+-\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want it to match %s", i, lines[i], re)
		}
	}
	var one api.HealthReport
	if err := json.Unmarshal([]byte(e.ok("--json", "who", "--health", "claude")), &one); err != nil ||
		one.AgentID != "claude" || one.Status != "healthy" || one.TasksSucceeded != 3 || one.ErrorRatePercentage != 25 {
		t.Errorf("who --json --health claude = %+v, %v", one, err)
	}
	var all struct {
		Agents []api.HealthReport `json:"agents"`
	}
	if err := json.Unmarshal([]byte(e.ok("who", "--health", "--json")), &all); err != nil || len(all.Agents) != 3 || all.Agents[2].Status != "degraded" {
		t.Errorf("who --health --json = %+v, %v", all, err)
	}
	e.fail([]string{"who", "--health", "nobody"}, "not found")
}

func TestMembers(t *testing.T) {
	e := newTestEnv(t)
	out := e.ok("members")
	for _, re := range []string{
		`(?m)^gossip seen from n1; encrypted: no \(start every maosd with the same --gossip-key`,
		`(?m)^\s+NODE\s+STATUS\s+GOSSIP ADDR\s+API ADDR\s+RAFT ADDR\s+VERSION$`,
		`(?m)^\* n1\s+alive\s+127\.0\.0\.1:7072\s+127\.0\.0\.1:7070\s+127\.0\.0\.1:7071\s+v0\.1\.0$`,
		`(?m)^  n2\s+dead\s+127\.0\.0\.1:7082\s+127\.0\.0\.1:7080\s+127\.0\.0\.1:7081\s+v0\.1\.0$`,
		`(?m)^  n3\s+left\s+127\.0\.0\.1:7092\s+-\s+-\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("members output does not match %s:\n%s", re, out)
		}
	}
	var res api.MembersResponse
	dec := json.NewDecoder(strings.NewReader(e.ok("--json", "members")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.NodeID != "n1" || len(res.Members) != 3 || res.Members[1].Status != "dead" {
		t.Errorf("members --json = %+v", res)
	}
}

func TestPresenceErrors(t *testing.T) {
	e := newTestEnv(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"who", "nobody"}, []string{"maosctl: ", "nobody", "404"}},
		{[]string{"who", "a", "b"}, []string{"unexpected argument \"b\"", "maosctl who --help"}},
		{[]string{"members", "extra"}, []string{"unexpected argument \"extra\"", "maosctl members --help"}},
	}
	for _, tc := range cases {
		r := e.run("", tc.args...)
		if r.err == nil || ExitCode(r.err) != 1 || r.out != "" {
			t.Errorf("%v: err=%v out=%q, want exit 1 and no output", tc.args, r.err, r.out)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, r.errOut, w)
			}
		}
	}
	// No node at the address: the error says so and names it.
	r := runApp("127.0.0.1:1", "", "members")
	if r.err == nil || !strings.Contains(r.errOut, "cannot reach a maos node at http://127.0.0.1:1 (connection refused)") {
		t.Errorf("members against a closed port: err=%v stderr=%q", r.err, r.errOut)
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Second, "just now"}, {0, "just now"}, {59 * time.Second, "59s ago"}, {61 * time.Second, "1m ago"},
		{2*time.Hour + 5*time.Minute, "2h5m ago"}, {50 * time.Hour, "2d ago"},
	} {
		if got := ago(now, now.Add(-tc.d)); got != tc.want {
			t.Errorf("ago(-%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := ago(now, time.Time{}); got != "-" {
		t.Errorf("ago(zero) = %q, want -", got)
	}
}
