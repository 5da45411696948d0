package fsm

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestValidateAcceptsValidMessages(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *api.Message)
	}{
		{"minimal", func(m *api.Message) {}},
		{"to all", func(m *api.Message) { m.To = api.Recipients{"all"} }},
		{"to star", func(m *api.Message) { m.To = api.Recipients{"*"} }},
		{"to role", func(m *api.Message) { m.To = api.Recipients{"role:reviewer"} }},
		{"to glob", func(m *api.Message) { m.To = api.Recipients{"engineer_*", "qa?", "[ab]gent"} }},
		{"seed id", func(m *api.Message) { m.ID = "msg_001" }},
		{"uuid id", func(m *api.Message) { m.ID = "3f2b8c1e-1b2d-4c5e-9f00-112233445566" }},
		{"max recipients", func(m *api.Message) { m.To = slices.Repeat(api.Recipients{"claude"}, api.MaxRecipients) }},
		{"well-known type with underscore", func(m *api.Message) { m.Type = "task_assign" }},
		{"every priority", func(m *api.Message) { m.Priority = "urgent" }},
		{"private", func(m *api.Message) { m.Visibility = "private" }},
		{"title at limit", func(m *api.Message) { m.Title = strings.Repeat("t", api.MaxTitleLen) }},
		{"tags", func(m *api.Message) { m.Tags = []string{"review", "p1.x-y"} }},
		{"full", func(m *api.Message) {
			m.Title = "Review the retry logic"
			m.Content.Code = "func f() {}"
			m.Content.Artifacts = api.ArtifactRefs("shared/context/qa/plan.md")
			m.InReplyTo = "msg-20261121-102900-claude-0c1d22aa"
			m.ThreadID = "msg-20261121-102000-supervisor-77ab01fe"
			m.CorrelationID = "task_123"
			m.RequiresResponse = true
			m.Metadata = json.RawMessage(`{"k":[1,2]}`)
			m.Timestamp = time.Date(2026, 11, 21, 10, 30, 0, 123e6, time.UTC)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMessage("msg-20261121-103000-codex-9f3a61c2", "agent-os-paper", "@claude please review")
			tt.modify(&m)
			if err := m.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateFieldErrors(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name   string
		modify func(m *api.Message)
		field  string
	}{
		{"id missing", func(m *api.Message) { m.ID = "" }, "id"},
		{"id bad chars", func(m *api.Message) { m.ID = "msg 1/2" }, "id"},
		{"id leading dash", func(m *api.Message) { m.ID = "-msg" }, "id"},
		{"id too long", func(m *api.Message) { m.ID = long(api.MaxIDLen + 1) }, "id"},
		{"seq set", func(m *api.Message) { m.Seq = 7 }, "seq"},
		{"from missing", func(m *api.Message) { m.From = "" }, "from"},
		{"from upper case", func(m *api.Message) { m.From = "Codex" }, "from"},
		{"from too long", func(m *api.Message) { m.From = long(api.MaxNameLen + 1) }, "from"},
		{"channel missing", func(m *api.Message) { m.Channel = "" }, "channel"},
		{"channel with space", func(m *api.Message) { m.Channel = "my channel" }, "channel"},
		{"to missing", func(m *api.Message) { m.To = nil }, "to"},
		{"to empty list", func(m *api.Message) { m.To = api.Recipients{} }, "to"},
		{"to too many", func(m *api.Message) { m.To = slices.Repeat(api.Recipients{"claude"}, api.MaxRecipients+1) }, "to"},
		{"to[0] mention", func(m *api.Message) { m.To = api.Recipients{"@claude"} }, "to[0]"},
		{"to[2] empty", func(m *api.Message) { m.To = api.Recipients{"claude", "all", ""} }, "to[2]"},
		{"to[1] bad role", func(m *api.Message) { m.To = api.Recipients{"claude", "role:"} }, "to[1]"},
		{"text missing", func(m *api.Message) { m.Content.Text = "" }, "content.text"},
		{"text blank", func(m *api.Message) { m.Content.Text = " \n\t" }, "content.text"},
		{"type missing", func(m *api.Message) { m.Type = "" }, "type"},
		{"type upper case", func(m *api.Message) { m.Type = "Chat" }, "type"},
		{"priority missing", func(m *api.Message) { m.Priority = "" }, "priority"},
		{"priority unknown", func(m *api.Message) { m.Priority = "critical" }, "priority"},
		{"visibility missing", func(m *api.Message) { m.Visibility = "" }, "visibility"},
		{"visibility unknown", func(m *api.Message) { m.Visibility = "secret" }, "visibility"},
		{"title too long", func(m *api.Message) { m.Title = long(api.MaxTitleLen + 1) }, "title"},
		{"title control char", func(m *api.Message) { m.Title = "line\nbreak" }, "title"},
		{"too many tags", func(m *api.Message) { m.Tags = slices.Repeat([]string{"x"}, api.MaxTags+1) }, "tags"},
		{"tags[1] bad", func(m *api.Message) { m.Tags = []string{"ok", "Not OK"} }, "tags[1]"},
		{"too many artifacts", func(m *api.Message) { m.Content.Artifacts = api.ArtifactRefs(make([]string, api.MaxArtifacts+1)...) }, "content.artifacts"},
		{"in_reply_to bad", func(m *api.Message) { m.InReplyTo = "not an id" }, "in_reply_to"},
		{"thread_id bad", func(m *api.Message) { m.ThreadID = "../etc" }, "thread_id"},
		{"correlation_id too long", func(m *api.Message) { m.CorrelationID = long(api.MaxIDLen + 1) }, "correlation_id"},
		{"metadata invalid", func(m *api.Message) { m.Metadata = json.RawMessage(`{"a":`) }, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMessage("msg-20261121-103000-codex-9f3a61c2", "general", "hello")
			tt.modify(&m)
			err := m.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error on %q", tt.field)
			}
			var fe *api.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %T %v, want *FieldError", err, err)
			}
			if fe.Field != tt.field {
				t.Errorf("FieldError.Field = %q, want %q (%v)", fe.Field, tt.field, err)
			}
			if fe.Reason == "" {
				t.Errorf("FieldError.Reason is empty")
			}
			if !errors.Is(err, api.ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
			if !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("Error() = %q, want it to start with %q", err.Error(), tt.field+": ")
			}
		})
	}
}

func TestNormalizeFillsDefaults(t *testing.T) {
	// 10:30:00 UTC expressed in another zone: the id must use UTC.
	now := time.Date(2026, 11, 21, 11, 30, 0, 0, time.FixedZone("CET", 3600))
	m := api.Message{
		Channel:  "general",
		From:     "codex",
		To:       api.Recipients{"claude"},
		Content:  api.Content{Text: "hi"},
		Metadata: json.RawMessage("{ \"a\" : [1, 2],\n \"b\": {} }"),
	}
	m.Normalize(now)

	idFormat := regexp.MustCompile(`^msg-20261121-103000-codex-[0-9a-f]{8}$`)
	if !idFormat.MatchString(m.ID) {
		t.Errorf("ID = %q, want msg-20261121-103000-codex-{8 hex}", m.ID)
	}
	if m.Priority != "normal" || m.Type != "chat" || m.Visibility != "public" {
		t.Errorf("priority/type/visibility = %q/%q/%q, want normal/chat/public", m.Priority, m.Type, m.Visibility)
	}
	if got := string(m.Metadata); got != `{"a":[1,2],"b":{}}` {
		t.Errorf("Metadata = %s, want compacted", got)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("Validate() after Normalize = %v", err)
	}
}

func TestNormalizeKeepsGivenValues(t *testing.T) {
	m := api.Message{
		ID:         "msg_001",
		From:       "codex",
		Type:       "request",
		Priority:   "urgent",
		Visibility: "private",
	}
	m.Normalize(time.Unix(0, baseTS))
	if m.ID != "msg_001" || m.Type != "request" || m.Priority != "urgent" || m.Visibility != "private" {
		t.Errorf("Normalize changed given fields: %+v", m)
	}

	// Without a sender there is nothing to build an id from: Validate
	// reports the missing sender, which is what the client must fix.
	anon := api.Message{}
	anon.Normalize(time.Unix(0, baseTS))
	if anon.ID != "" {
		t.Errorf("ID = %q for a message without from, want empty", anon.ID)
	}
	var fe *api.FieldError
	if err := anon.Validate(); !errors.As(err, &fe) || fe.Field != "from" {
		t.Errorf("Validate() = %v, want a FieldError on from", err)
	}
}

func TestNewIDFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := api.NewID("claude", at)
	if !regexp.MustCompile(`^msg-20260102-030405-claude-[0-9a-f]{8}$`).MatchString(id) {
		t.Errorf("NewID = %q", id)
	}
	if !api.ValidID(id) {
		t.Errorf("NewID = %q does not pass the id rule", id)
	}
}

// A derived id has the seed format with 16 hex digits that depend on the
// key alone: the same inputs, the same id.
func TestDerivedIDFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 999, time.FixedZone("X", -3600))
	id := api.DerivedID("bob", at, "bob\x00msg-1")
	if !regexp.MustCompile(`^msg-20260102-040405-bob-[0-9a-f]{16}$`).MatchString(id) || !api.ValidID(id) {
		t.Errorf("DerivedID = %q", id)
	}
	if again := api.DerivedID("bob", at.UTC(), "bob\x00msg-1"); again != id {
		t.Errorf("DerivedID again = %q, want %q", again, id)
	}
	if other := api.DerivedID("bob", at, "bob\x00msg-2"); other[len(other)-16:] == id[len(id)-16:] {
		t.Errorf("two keys gave the same hex: %q, %q", id, other)
	}
}

func TestRecipientsUnmarshal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    api.Recipients
		wantErr bool
	}{
		{"single string", `"codex"`, api.Recipients{"codex"}, false},
		{"string with spaces around", " \n\"codex\" ", api.Recipients{"codex"}, false},
		{"list", `["claude", "role:qa", "all"]`, api.Recipients{"claude", "role:qa", "all"}, false},
		{"empty list", `[]`, api.Recipients{}, false},
		{"number", `42`, nil, true},
		{"list of numbers", `[1, 2]`, nil, true},
		{"object", `{"a":"b"}`, nil, true},
		{"bad string", `"unterminated`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r api.Recipients
			err := json.Unmarshal([]byte(tt.in), &r)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Unmarshal(%s) = %v, nil; want an error", tt.in, r)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if !slices.Equal(r, tt.want) {
				t.Errorf("Unmarshal(%s) = %q, want %q", tt.in, r, tt.want)
			}
		})
	}
}

func TestMessageJSONSeedForms(t *testing.T) {
	// The seed mailbox writes "to" as a single string.
	var m api.Message
	in := `{"id":"msg_001","from":"codex","channel":"c1","to":"claude","content":{"text":"hi"}}`
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !slices.Equal(m.To, api.Recipients{"claude"}) {
		t.Errorf("To = %q, want [claude]", m.To)
	}
	// A number for "to" is refused with a message naming the field.
	err := json.Unmarshal([]byte(`{"id":"msg_001","to":7}`), &m)
	if err == nil || !strings.Contains(err.Error(), "to") {
		t.Errorf("Unmarshal with to=7: %v, want an error about to", err)
	}
	// A stored message always carries the first six fields; optional ones
	// are left out when empty.
	m = testMessage("msg_001", "c1", "hi")
	m.Seq = 3
	m.Timestamp = time.Unix(0, baseTS).UTC()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "seq", "timestamp", "channel", "from", "to", "content"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("marshalled message lacks %q: %s", k, b)
		}
	}
	for _, k := range []string{"title", "tags", "in_reply_to", "thread_id", "metadata"} {
		if _, ok := obj[k]; ok {
			t.Errorf("marshalled message has empty optional %q: %s", k, b)
		}
	}
}
