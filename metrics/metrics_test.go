package metrics_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/maos-project/maos/metrics"
)

// scrape serves m's handler once and parses the text it answers.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	fams, err := metrics.Parse(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, rec.Body)
	}
	return fams
}

func TestCountersAndNodeState(t *testing.T) {
	m := metrics.New()
	m.Send(metrics.SendOK)
	m.Send(metrics.SendOK)
	m.Send("forbidden")
	m.Forward(nil)
	m.Forward(errors.New("x"))
	m.StrongRead()
	m.StreamOpened()
	m.StreamOpened()
	m.StreamClosed()
	m.ApplyBatch(3, time.Millisecond)
	m.Commit(2 * time.Millisecond)
	m.WatcherRun("coder", metrics.OutcomeOK, time.Second)
	m.Observe(func() metrics.NodeState {
		return metrics.NodeState{RaftState: "follower", Term: 7, CommitIndex: 12, RaftApplied: 12, StateApplied: 11,
			LastContact: -1, Tasks: map[string]int{"ready": 2}, PendingApprovals: 1, Presence: map[string]int{"AWAKE": 3}}
	}, nil)
	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"maos_sends_total", map[string]string{"result": "ok"}, 2},
		{"maos_sends_total", map[string]string{"result": "forbidden"}, 1},
		{"maos_forwarded_writes_total", map[string]string{"result": "error"}, 1},
		{"maos_strong_reads_total", nil, 1},
		{"maos_stream_subscribers", nil, 1},
		{"maos_watcher_invocations_total", map[string]string{"agent": "coder", "outcome": "ok"}, 1},
		{"maos_raft_state", map[string]string{"state": "follower"}, 1},
		{"maos_raft_state", map[string]string{"state": "leader"}, 0},
		{"maos_raft_term", nil, 7},
		{"maos_state_applied_index", nil, 11},
		{"maos_raft_last_contact_seconds", nil, -1},
		{"maos_tasks", map[string]string{"state": "ready"}, 2},
		{"maos_approvals_pending", nil, 1},
		{"maos_presence_agents", map[string]string{"state": "AWAKE"}, 3},
	} {
		got, ok := metrics.Value(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if n, _ := metrics.Value(fams, "maos_apply_batch_entries", nil); n != 1 {
		t.Errorf("apply batch histogram count = %v, want 1", n)
	}
}

// Two nodes in one process each have their own registry.
func TestRegistriesAreSeparate(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	a.Send(metrics.SendOK)
	if v, _ := metrics.Value(scrape(t, b), "maos_sends_total", map[string]string{"result": "ok"}); v != 0 {
		t.Fatalf("b counted a's send: %v", v)
	}
	var nilM *metrics.Metrics
	nilM.Send(metrics.SendOK) // a nil Metrics records nothing, and does not panic
	nilM.Observe(func() metrics.NodeState { return metrics.NodeState{} }, nil)
}

func TestParseRefusesGarbage(t *testing.T) {
	if _, err := metrics.Parse(strings.NewReader("not a metric line {")); err == nil {
		t.Fatal("parsed garbage")
	}
}
