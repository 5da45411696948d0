package chaos

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRecoveryTime(t *testing.T) {
	h := HistoryFromOps([]Op{
		sendOK(0, "a", "chaos-0", 0, 10, 1),
		sendOK(1, "b", "chaos-0", 90, 500, 2), // invoked before the fault
		sendFail(2, "c", "chaos-0", 110, 120, "no_leader"),
		sendOK(2, "c", "chaos-0", 130, 400, 3), // the first OK return after the fault
		sendOK(3, "d", "chaos-0", 120, 450, 4),
		readOK(4, "chaos-0", 101, 102),
	})
	if got := RecoveryTime(h, at(100)); got != at(300) {
		t.Errorf("RecoveryTime = %v, want 300ms", got)
	}
	if got := RecoveryTime(h, at(1000)); got != -1 {
		t.Errorf("RecoveryTime after the last op = %v, want -1", got)
	}
}

func TestCountOps(t *testing.T) {
	got := CountOps([]Op{
		sendOK(0, "a", "chaos-0", 0, 10, 1),
		sendFail(0, "b", "chaos-0", 0, 10, "no_leader"),
		sendUnknown(0, "b", "chaos-0", 0, 10),
		{Kind: KindSend, ID: "c"},
		readOK(1, "chaos-0", 0, 1),
		{Kind: KindRead, Outcome: Fail},
	})
	want := OpCounts{SendOK: 1, SendFail: 1, SendUnknown: 2, ReadOK: 1, ReadFail: 1}
	if got != want {
		t.Errorf("CountOps = %+v, want %+v", got, want)
	}
}

func TestReportTextAndJSON(t *testing.T) {
	r := &Report{
		Scenario: "kill-leader", Nodes: 3, Seed: 7, Duration: 12 * time.Second,
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Ops:     OpCounts{SendOK: 100, SendFail: 3, SendUnknown: 2, ReadOK: 50, ReadFail: 1},
		Faults: []Fault{
			{Name: "kill", Nodes: []string{"n1"}, Start: 2 * time.Second, End: 5 * time.Second, RecoveredAfter: 1500 * time.Millisecond},
			{Name: "pause", Nodes: []string{"n2", "n3"}, Start: 6 * time.Second, End: 9 * time.Second, RecoveredAfter: -1},
		},
		Check: CheckResult{Acked: 100, Stored: map[string]int{"n2": 101, "n1": 101},
			Lost:                   []string{"chaos-c1-1", "chaos-c1-2", "chaos-c1-3", "chaos-c1-4", "chaos-c1-5", "chaos-c1-6"},
			LinearizabilityChecked: true, NonLinearizable: []string{"chaos-0"}, Visualization: "/tmp/x/linearizability.html",
			Notes: []string{"lost: chaos-c1-1 ..."}},
	}
	text := r.Text()
	for _, want := range []string{
		"chaos kill-leader: FAIL (3 nodes, 12s, seed 7, started 2026-01-02T03:04:05Z)",
		"ops: send 100 ok, 3 failed, 2 unknown; read 50 ok, 1 failed",
		"fault kill on n1: 2s – 5s, recovered after 1.5s",
		"fault pause on n2,n3: 6s – 9s, never recovered",
		"stored n1=101 n2=101",
		"lost: 6 (chaos-c1-1, chaos-c1-2, chaos-c1-3, chaos-c1-4, chaos-c1-5, ...)",
		"duplicated: 0",
		"divergent: 0",
		"linearizable: no (chaos-0)",
		"visualization: /tmp/x/linearizability.html",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Text() lacks %q:\n%s", want, text)
		}
	}
	r.Pass, r.Check = true, CheckResult{Linearizable: true, LinearizabilityChecked: true}
	if text := r.Text(); !strings.Contains(text, ": PASS (") || !strings.Contains(text, "linearizable: yes") {
		t.Errorf("passing report:\n%s", text)
	}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snake.MatchString(k) && !strings.HasSuffix(path, ".stored") {
					t.Errorf("JSON key %s.%s is not snake_case", path, k)
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("report", generic)
	for _, key := range []string{"scenario", "duration_ns", "ops", "faults", "check", "pass", "started"} {
		if _, ok := generic[key]; !ok {
			t.Errorf("report JSON lacks %q: %s", key, b)
		}
	}
	ob, _ := json.Marshal(sendOK(0, "a", "chaos-0", 1, 2, 3))
	var op map[string]any
	_ = json.Unmarshal(ob, &op)
	walk("op", op)
}
