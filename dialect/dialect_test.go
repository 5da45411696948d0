package dialect

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// seed reads a seed's example message (testdata, copied from
// shared/seeds) and its top-level fields.
func seed(t *testing.T, name string) ([]byte, map[string]json.RawMessage) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	return raw, obj
}

func metaOf(t *testing.T, m *api.Message) map[string]any {
	t.Helper()
	v := map[string]any{}
	if len(m.Metadata) > 0 {
		if err := json.Unmarshal(m.Metadata, &v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// Each seed's example is a dialect; maos's own format, whatever fields it
// sets, is not (its unknown fields stay errors).
func TestIs(t *testing.T) {
	for _, name := range []string{"seed001.json", "seed002.json", "seed004_coc.json", "seed004_completion.json"} {
		if _, obj := seed(t, name); !Is(obj) {
			t.Errorf("%s is not taken for a dialect", name)
		}
	}
	for body, want := range map[string]bool{
		`{"from":"a","to":"b","channel":"c","content":"seed 000: a string"}`:                   true,
		`{"from":"a","to":"b","channel":"c","content":{"text":"x"}}`:                           false,
		`{"from":"a","to":"b","channel":"c","content":{"text":"x"},"tittle":"a typo"}`:         false,
		`{"from":"a","to":"b","channel":"c","title":"t","priority":"high","metadata":{"x":1}}`: false,
		`{"from_agent":"a","to":"b","channel":"c","content":{"text":"x"}}`:                     true,
		`{"from":"a","to":"b","channel":"c","content":{"text":"x"},"privacy_level":"PRIVATE"}`: true,
	} {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatal(err)
		}
		if Is(obj) != want {
			t.Errorf("Is(%s) = %v, want %v", body, !want, want)
		}
	}
}

// A message posted to the API (the zero Place) maps like a file, except
// that without an id it gets none (the send generates one) and nothing
// of a file's place fills a missing field.
func TestMapSeedsOnTheAPI(t *testing.T) {
	raw, _ := seed(t, "seed001.json")
	m, err := Map(raw, Place{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "msg-20260111-163315-claude-4c78" || m.Channel != "agent-os-paper" || m.From != "claude" || m.To[0] != "codex" ||
		m.Type != "chat" || m.Content.Text != "Your message text here" || m.Content.Code != "" || m.InReplyTo != "msg-20260111-163300-codex-a1b2" ||
		!m.Timestamp.Equal(time.Date(2026, 1, 11, 16, 33, 15, 123e6, time.UTC)) || metaOf(t, m)["turn"] != "claude" {
		t.Errorf("seed 001 = %+v", m)
	}

	raw, _ = seed(t, "seed002.json")
	if _, err := Map(raw, Place{}, Options{}); err == nil || !strings.HasPrefix(err.Error(), "channel: missing") {
		t.Errorf("seed 002 without a channel: %v, want a channel error", err)
	}
	m, err = Map(raw, Place{}, Options{Channel: "design"})
	if err != nil {
		t.Fatal(err)
	}
	md := metaOf(t, m)
	if m.ID != "msg_abc123" || m.From != "agent_architect_001" || m.Title != "API endpoint clarification" ||
		!strings.HasPrefix(m.Content.Text, "Can you clarify") || m.ThreadID != "thread_xyz789" || !m.RequiresResponse ||
		md["context"].(map[string]any)["line"] != 145.0 {
		t.Errorf("seed 002 = %+v meta %v", m, md)
	}

	raw, _ = seed(t, "seed004_completion.json")
	withCh := strings.Replace(string(raw), `"task_id"`, `"channel": "triage", "task_id"`, 1)
	m, err = Map([]byte(withCh), Place{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	md = metaOf(t, m)
	if m.ID != "unique_uuid_2" || m.Type != "task_completion" || m.From != "triage" || m.To[0] != "orchestrator" ||
		m.InReplyTo != "unique_uuid" || !strings.HasPrefix(m.Content.Text, "Clear, human-readable") ||
		md["task_id"] != "original_task_id" || md["confidence_score"] != 0.97 || md["status"] != "success" {
		t.Errorf("seed 004 = %+v meta %v", m, md)
	}

	// No id anywhere: none, not a hash (two posts of one body are two
	// messages, as for the native format).
	m, err = Map([]byte(`{"from":"a","to":"b","session_id":"c","content":"hi"}`), Place{}, Options{})
	if err != nil || m.ID != "" {
		t.Errorf("no id: %+v, %v; want none", m, err)
	}
	// A file without one gets the hash.
	m, err = Map([]byte(`{"from":"a","to":"b","session_id":"c","content":"hi"}`), Place{FileName: "x.json"}, Options{})
	if err != nil || !strings.HasPrefix(m.ID, "imp-") {
		t.Errorf("file without an id: %+v, %v; want imp-…", m, err)
	}
}

// On the API a field that cannot be mapped is a *api.FieldError naming it,
// with no word about files.
func TestMapErrorsNameTheField(t *testing.T) {
	for body, field := range map[string]string{
		`{"to":"b","session_id":"c","content":"x"}`:                  "from",
		`{"from":"a","session_id":"c","content":"x"}`:                "to",
		`{"from":"a","to":"b","content":"x","subject":"s"}`:          "channel",
		`{"from":"a","to":"b","session_id":"c","content":7}`:         "content",
		`{"from":"a","to":"b","session_id":"c","message_id":7}`:      "message_id",
		`{"from":"a","to":"b","session_id":"c","timestamp":"never"}`: "timestamp",
		`{"from":"a","to":"b","session_id":"c","tags":"x"}`:          "tags",
	} {
		_, err := Map([]byte(body), Place{}, Options{})
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != field || strings.Contains(err.Error(), "outbox") || strings.Contains(err.Error(), "inbox") {
			t.Errorf("Map(%s) = %v, want a *api.FieldError on %s", body, err, field)
		}
	}
}
