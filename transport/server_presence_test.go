package transport_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// A heartbeat in the seed format (watcher_pid, lower-case state) is
// normalized before the service sees it, and the stored record comes back.
func TestPutPresenceNormalizes(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	r := do(t, http.MethodPut, srv.URL+"/v1/presence/codex",
		`{"agent_id":"codex","state":"awake","source":" Hook ","watcher_pid":12345,"channel":"agent-os-paper","task":"review <PR 12> & merge"}`, nil)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got api.Presence
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.AgentID != "codex" || got.State != "AWAKE" || got.Substate != "IDLE" || got.Source != "hook" || got.PID != 12345 ||
		got.Channel != "agent-os-paper" || got.Version != 1 || got.Node != "n1" {
		t.Errorf("answered %+v", got)
	}
	ups := f.PresenceUpdates()
	if len(ups) != 1 {
		t.Fatalf("service got %d updates, want 1", len(ups))
	}
	if u := ups[0]; u.State != "AWAKE" || u.Substate != "IDLE" || u.Source != "hook" || u.PID != 12345 || u.WatcherPID != 0 || u.Task != "review <PR 12> & merge" {
		t.Errorf("service got %+v, want it normalized", u)
	}
	if c := f.CallsTo("PutPresence"); len(c) != 1 || c[0].Arg != "codex" {
		t.Errorf("PutPresence calls %+v", c)
	}
}

// Bad heartbeats get a 400 naming the field, and never reach the service.
func TestPutPresenceRefusesBadInput(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	long := strings.Repeat("x", api.MaxPresenceTask+1)
	cases := []struct {
		name, agent, body, code, field string
	}{
		{"no state", "codex", `{"substate":"IDLE"}`, "invalid", "state"},
		{"unknown state", "codex", `{"state":"ASLEEP"}`, "invalid", "state"},
		{"unknown substate", "codex", `{"state":"AWAKE","substate":"NAPPING"}`, "invalid", "substate"},
		{"offline with substate", "codex", `{"state":"OFFLINE","substate":"IDLE"}`, "invalid", "substate"},
		{"awake with reason", "codex", `{"state":"AWAKE","reason":"gone"}`, "invalid", "reason"},
		{"agent id differs from path", "codex", `{"agent_id":"claude","state":"AWAKE"}`, "invalid", "agent_id"},
		{"bad agent in path", "Codex!", `{"state":"AWAKE"}`, "invalid", "agent_id"},
		{"bad node", "codex", `{"node":"N 1","state":"AWAKE"}`, "invalid", "node"},
		{"bad channel", "codex", `{"state":"AWAKE","channel":"Bad Channel"}`, "invalid", "channel"},
		{"negative pid", "codex", `{"state":"AWAKE","pid":-4}`, "invalid", "pid"},
		{"unknown source", "codex", `{"state":"AWAKE","source":"cron"}`, "invalid", "source"},
		{"task too long", "codex", `{"state":"AWAKE","task":"` + long + `"}`, "invalid", "task"},
		{"task with a newline", "codex", `{"state":"AWAKE","task":"two\nlines"}`, "invalid", "task"},
		{"reason too long", "codex", `{"state":"OFFLINE","reason":"` + strings.Repeat("r", api.MaxPresenceReason+1) + `"}`, "invalid", "reason"},
		{"negative tasks_failed", "codex", `{"state":"AWAKE","tasks_failed":-1}`, "invalid", "tasks_failed"},
		{"negative tasks_running", "codex", `{"state":"AWAKE","tasks_running":-2}`, "invalid", "tasks_running"},
		{"negative mean_duration_ms", "codex", `{"state":"AWAKE","mean_duration_ms":-5}`, "invalid", "mean_duration_ms"},
		{"last_error too long", "codex", `{"state":"AWAKE","last_error":"` + strings.Repeat("e", api.MaxPresenceLastError+1) + `"}`, "invalid", "last_error"},
		{"last_error with a newline", "codex", `{"state":"AWAKE","last_error":"two\nlines"}`, "invalid", "last_error"},
		{"unknown field", "codex", `{"state":"AWAKE","version":99}`, "unknown_field", "version"},
		{"not JSON", "codex", `{"state":`, "bad_request", ""},
		{"body too large", "codex", `{"state":"AWAKE","task":"` + strings.Repeat("y", 5000) + `"}`, "too_large", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, http.MethodPut, srv.URL+"/v1/presence/"+tc.agent, tc.body, nil)
			code, msg := errorOf(t, r.body)
			if code != tc.code {
				t.Fatalf("code %s (%d), want %s: %s", code, r.status, tc.code, msg)
			}
			if tc.field != "" && !strings.Contains(msg, tc.field) {
				t.Errorf("message %q does not name %s", msg, tc.field)
			}
		})
	}
	if n := len(f.CallsTo("PutPresence")); n != 0 {
		t.Errorf("the service was called %d times for refused heartbeats", n)
	}
}

// Errors of the service map to their status codes.
func TestPutPresenceServiceErrors(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("older heartbeat: %w", api.ErrConflict), http.StatusConflict, "conflict"},
		{&api.FieldError{Field: "node", Reason: "this is n1"}, http.StatusBadRequest, "invalid"},
		{errors.New("boom"), http.StatusInternalServerError, "internal"},
	}
	for _, tc := range cases {
		f.Fail("PutPresence", tc.err)
		r := do(t, http.MethodPut, srv.URL+"/v1/presence/codex", `{"state":"AWAKE"}`, nil)
		code, _ := errorOf(t, r.body)
		if r.status != tc.status || code != tc.code {
			t.Errorf("%v: answered %d %s, want %d %s", tc.err, r.status, code, tc.status, tc.code)
		}
	}
}

func TestGetPresence(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	// Empty: a list, not null.
	r := do(t, http.MethodGet, srv.URL+"/v1/presence", "", nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"agents":[]}` {
		t.Fatalf("empty list: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodGet, srv.URL+"/v1/presence/codex", "", nil)
	if code, _ := errorOf(t, r.body); r.status != http.StatusNotFound || code != "not_found" {
		t.Fatalf("unknown agent: %d %s", r.status, r.body)
	}
	for _, a := range []string{"zed", "codex"} {
		if r := do(t, http.MethodPut, srv.URL+"/v1/presence/"+a, `{"state":"AWAKE","substate":"WORKING"}`, nil); r.status != http.StatusOK {
			t.Fatalf("put %s: %d %s", a, r.status, r.body)
		}
	}
	r = do(t, http.MethodGet, srv.URL+"/v1/presence", "", nil)
	var list api.PresenceResponse
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != http.StatusOK {
		t.Fatalf("list: %d %s (%v)", r.status, r.body, err)
	}
	if len(list.Agents) != 2 || list.Agents[0].AgentID != "codex" || list.Agents[1].AgentID != "zed" {
		t.Errorf("list = %+v, want codex and zed", list.Agents)
	}
	r = do(t, http.MethodGet, srv.URL+"/v1/presence/zed", "", nil)
	var one api.Presence
	if err := json.Unmarshal(r.body, &one); err != nil || one.AgentID != "zed" || one.Substate != "WORKING" {
		t.Errorf("get zed: %d %s", r.status, r.body)
	}
}

func TestMembersEndpoint(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	r := do(t, http.MethodGet, srv.URL+"/v1/cluster/members", "", nil)
	var res map[string]any
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != http.StatusOK {
		t.Fatalf("members: %d %s", r.status, r.body)
	}
	if got := keys(res); strings.Join(got, ",") != "encrypted,members,node_id" {
		t.Errorf("members body has keys %v", got)
	}
	f.Fail("Members", errors.New("gossip is down"))
	r = do(t, http.MethodGet, srv.URL+"/v1/cluster/members", "", nil)
	if code, msg := errorOf(t, r.body); r.status != http.StatusInternalServerError || !strings.Contains(msg, "gossip is down") {
		t.Errorf("failing members: %d %s %s", r.status, code, msg)
	}
}

// The client's presence methods against the server and the fake.
func TestClientPresenceRoundTrip(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	c := client.NewClient(srv.URL, nil)
	ctx := t.Context()
	ts := time.Date(2026, 11, 21, 10, 31, 0, 0, time.UTC)
	p, err := c.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Substate: "BLOCKED", PID: 7, Task: "waiting on CI", Timestamp: &ts})
	if err != nil {
		t.Fatal(err)
	}
	if p.AgentID != "codex" || p.Substate != "BLOCKED" || !p.Timestamp.Equal(ts) || p.Version != 1 {
		t.Errorf("put answered %+v", p)
	}
	got, err := c.AgentPresence(ctx, "codex")
	if err != nil || got != p {
		t.Errorf("get = %+v, %v; want %+v", got, err, p)
	}
	list, err := c.Presence(ctx)
	if err != nil || len(list) != 1 || list[0] != p {
		t.Errorf("list = %+v, %v", list, err)
	}
	if _, err := c.AgentPresence(ctx, "nobody"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown agent: %v, want not found", err)
	}
	if _, err := c.PutPresence(ctx, "codex", api.PresenceUpdate{State: "LOST"}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("bad state: %v, want invalid", err)
	}
	f.EditMembers(func(m *api.MembersResponse) { m.Encrypted = true })
	m, err := c.Members(ctx)
	if err != nil || m.NodeID != "n1" || !m.Encrypted || len(m.Members) != 3 || m.Members[1].Status != "dead" || m.Members[0].GossipAddr != "127.0.0.1:7072" {
		t.Errorf("members = %+v, %v", m, err)
	}
}

// A record at the field limits stays under the gossip wire limit unless
// the task is made of characters JSON must escape: the node checks the
// encoded size (cluster tests), and this pins the arithmetic. An AWAKE
// record carries the watcher's task health; an OFFLINE one, whether the
// agent said so (with a reason at its limit) or its node died, does not.
func TestPresenceRecordFitsAPacket(t *testing.T) {
	p := api.Presence{
		AgentID: strings.Repeat("a", 64), Node: strings.Repeat("n", 64), State: "AWAKE", Substate: "WORKING", Source: api.SourceWatcher,
		Channel: strings.Repeat("c", 64), PID: 1 << 30, Task: strings.Repeat("t", api.MaxPresenceTask),
		AgentHealth: api.AgentHealth{TasksRunning: 1 << 30, TasksSucceeded: 1 << 30, TasksFailed: 1 << 30,
			LastError: strings.Repeat("e", api.MaxPresenceLastError), MeanDurationMS: 1 << 40},
		Timestamp: time.Date(2026, 11, 21, 10, 30, 0, 123456789, time.UTC), Version: 1 << 62, Origin: strings.Repeat("o", 64),
	}
	said := p
	said.MarkOffline(strings.Repeat("r", api.MaxPresenceReason))
	nodeDied := p
	nodeDied.MarkOffline("node " + strings.Repeat("n", 64) + " dead")
	for _, rec := range []api.Presence{p, said, nodeDied} {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(b)+1 > api.MaxPresenceWire {
			t.Errorf("a %s record at the field limits is %d bytes on the wire, over %d", rec.State, len(b)+1, api.MaxPresenceWire)
		}
	}
	if said.State != "OFFLINE" || said.Substate != "" || said.Source != "" || said.AgentHealth != (api.AgentHealth{}) {
		t.Errorf("MarkOffline left %+v", said)
	}
	u := api.PresenceUpdate{State: "offline", Source: "watcher", AgentHealth: p.AgentHealth}
	if u.Normalize(); u.AgentHealth != (api.AgentHealth{}) || u.Source != "" {
		t.Errorf("an OFFLINE heartbeat keeps its task health %+v or source %q", u.AgentHealth, u.Source)
	}
}

// A heartbeat's task counts come back in the presence record and in the
// agent's health report, whose status follows Presence.Health's rule.
func TestAgentHealth(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	c := client.NewClient(srv.URL, nil)
	ctx := t.Context()
	if _, err := c.AgentHealth(ctx, "codex"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("health of an unknown agent: %v, want not found", err)
	}
	r := do(t, http.MethodPut, srv.URL+"/v1/presence/codex",
		`{"state":"AWAKE","substate":"WORKING","task":"task-1","tasks_running":1,"tasks_succeeded":3,"tasks_failed":1,"last_error":"exit status 2","mean_duration_ms":2340}`, nil)
	if r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var p api.Presence
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	want := api.AgentHealth{TasksRunning: 1, TasksSucceeded: 3, TasksFailed: 1, LastError: "exit status 2", MeanDurationMS: 2340}
	if p.AgentHealth != want {
		t.Errorf("stored health %+v, want %+v", p.AgentHealth, want)
	}
	r = do(t, http.MethodGet, srv.URL+"/v1/agents/codex/health", "", nil)
	var raw map[string]any
	if err := json.Unmarshal(r.body, &raw); err != nil || r.status != http.StatusOK {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
	if raw["status"] != "healthy" || raw["tasks_succeeded"] != 3.0 || raw["error_rate_percentage"] != 25.0 || raw["mean_duration_ms"] != 2340.0 ||
		raw["last_error"] != "exit status 2" || raw["node"] != "n1" || raw["task"] != "task-1" {
		t.Errorf("health body %s", r.body)
	}
	for _, tc := range []struct{ body, status string }{
		{`{"state":"AWAKE","tasks_succeeded":1,"tasks_failed":2}`, api.HealthDegraded},
		{`{"state":"AWAKE","substate":"BLOCKED"}`, api.HealthDegraded},
		{`{"state":"OFFLINE","reason":"stopped"}`, api.HealthError},
		{`{"state":"AWAKE","tasks_succeeded":2,"tasks_failed":2}`, api.HealthHealthy},
	} {
		if _, err := c.PutPresence(ctx, "codex", mustUpdate(t, tc.body)); err != nil {
			t.Fatal(err)
		}
		h, err := c.AgentHealth(ctx, "codex")
		if err != nil || h.Status != tc.status || h.AgentID != "codex" {
			t.Errorf("after %s: health %+v, %v; want status %s", tc.body, h, err, tc.status)
		}
	}
}

func mustUpdate(t *testing.T, body string) api.PresenceUpdate {
	t.Helper()
	var u api.PresenceUpdate
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	return u
}
