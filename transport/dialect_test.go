package transport_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// seedBody is a seed's example message, as package dialect's tests keep
// it (copied from shared/seeds).
func seedBody(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "dialect", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// POST /v1/messages takes the JSON the seeds' agents write to files, each
// dialect mapped as maosctl import maps it; maos's own format keeps
// refusing unknown fields.
func TestSendSeedDialects(t *testing.T) {
	svc := transporttest.New(t)
	// The agents the seeds' messages are to.
	svc.Register(t, "codex", "orchestrator", "developer_agent", "agent_engineer_002")
	srv := serve(t, svc, transport.ServerOptions{})
	post := func(body string) api.SendResponse {
		t.Helper()
		var res api.SendResponse
		wantOK(t, do(t, "POST", srv.URL+"/v1/messages", body, nil), &res)
		return res
	}
	stored := func(id string) (*api.Message, map[string]any) {
		t.Helper()
		m, err := svc.State().Message(id)
		if err != nil {
			t.Fatal(err)
		}
		md := map[string]any{}
		if len(m.Metadata) > 0 {
			if err := json.Unmarshal(m.Metadata, &md); err != nil {
				t.Fatal(err)
			}
		}
		return m, md
	}

	// Seed 001: session_id is the channel, content{text,code,artifacts}.
	res := post(seedBody(t, "seed001.json"))
	m, md := stored(res.ID)
	if res.ID != "msg-20260111-163315-claude-4c78" || m.Channel != "agent-os-paper" || m.From != "claude" || m.To[0] != "codex" ||
		m.Content.Text != "Your message text here" || md["mode"] != "chat" || md["turn"] != "claude" {
		t.Errorf("seed 001 stored %+v meta %v", m, md)
	}

	// Seed 002: subject/body/context; it names no channel, so it goes to
	// the default one; one it names is kept.
	body := seedBody(t, "seed002.json")
	if m, _ := stored(post(strings.Replace(body, `"msg_abc123"`, `"msg_abc124"`, 1)).ID); m.Channel != api.DefaultChannel {
		t.Errorf("seed 002 without a channel stored on %q, want %q", m.Channel, api.DefaultChannel)
	}
	res = post(strings.Replace(body, `"type"`, `"channel": "design", "type"`, 1))
	m, md = stored(res.ID)
	if m.ID != "msg_abc123" || m.Channel != "design" || m.Title != "API endpoint clarification" ||
		!strings.HasPrefix(m.Content.Text, "Can you clarify the authentication flow") || m.ThreadID != "thread_xyz789" ||
		md["context"] == nil {
		t.Errorf("seed 002 stored %+v meta %v", m, md)
	}

	// Seed 004's other messages: message_type, message_id, from_agent,
	// to_agent; the rest under metadata. (Its task_delegation and
	// task_completion are tasks: TestSendSeedTasks.)
	res = post(strings.Replace(seedBody(t, "seed004_coc.json"), `"privacy_level"`, `"session_id": "moderation", "privacy_level"`, 1))
	m, md = stored(res.ID)
	if m.ID != "unique_uuid" || m.Type != "coc_violation_flag" || m.From != "community" || m.To[0] != "orchestrator" ||
		md["privacy_level"] != "PRIVATE_TO_MODERATORS" || md["violation"] == nil {
		t.Errorf("seed 004 stored %+v meta %v", m, md)
	}
	// Posted as is, with no channel: on the default channel.
	res = post(strings.Replace(seedBody(t, "seed004_coc.json"), `"unique_uuid"`, `"unique_uuid_2"`, 1))
	if m, _ = stored(res.ID); m.Channel != api.DefaultChannel || m.Type != "coc_violation_flag" {
		t.Errorf("seed 004 as is stored %+v, want it on %q", m, api.DefaultChannel)
	}
	// A task_completion is no longer stored as a message: it names a task.
	msg := wantError(t, do(t, "POST", srv.URL+"/v1/messages", seedBody(t, "seed004_completion.json"), nil), http.StatusNotFound, api.CodeNotFound)
	if msg != "task original_task_id: not found" {
		t.Errorf("seed 004 completion of no task: %q", msg)
	}

	// Seed 000: content a string.
	res = post(`{"from":"master_agent","to":["developer_agent"],"channel":"dev","type":"instruction","content":"Please review module X","correlation_id":"task_123"}`)
	if m, _ := stored(res.ID); m.Content.Text != "Please review module X" || m.CorrelationID != "task_123" || !strings.HasPrefix(res.ID, "msg-") {
		t.Errorf("seed 000 stored %+v (id %s)", m, res.ID)
	}

	// The native format: a typo is still an error naming it.
	msg = wantError(t, do(t, "POST", srv.URL+"/v1/messages", `{"from":"a","to":"b","channel":"c","tittle":"x","content":{"text":"x"}}`, nil),
		http.StatusBadRequest, api.CodeUnknownField)
	if !strings.Contains(msg, `"tittle"`) {
		t.Errorf("typo: %q", msg)
	}
}

// With auth, a dialect's sender (from_agent) is checked against the token
// like a native "from".
func TestSendDialectSenderIsAuthorized(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	body := `{"message_type":"request","from_agent":"bob","to_agent":"carol","channel":"ops","body":"hi"}`
	msg := wantError(t, e.as(aliceSecret, "POST", "/v1/messages", body), http.StatusForbidden, api.CodeForbidden)
	if !strings.Contains(msg, `from "bob" is not this token's agent`) {
		t.Errorf("403 message %q", msg)
	}
	wantOK(t, e.as(bobSecret, "POST", "/v1/messages", body), nil)
}
