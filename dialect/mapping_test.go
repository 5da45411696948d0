package dialect

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestMapRefusals(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`[1,2]`, "not a JSON object"},
		{`{"from":"a","content":"x"`, "not a JSON object"},
		{`{"to":"b","content":"x"}`, "from: missing"},
		{`{"from":"a","content":"x"}`, "to: missing"},
		{`{"from":"a","to":"b","content":"x","timestamp":"yesterday"}`, "timestamp"},
		{`{"from":"a","to":"b","content":7}`, "content"},
		{`{"from":"???","to":"b","content":"x"}`, "from"},
		{`{"from":"a","to":["b",3],"content":"x"}`, "to"},
		{`{"from":"a","to":"b","id":7,"content":"x"}`, "id: want a string"},
	} {
		_, err := Map([]byte(tc.body), Place{FileName: "other.json", Folder: "ch"}, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Map(%s) = %v, want an error with %q", tc.body, err, tc.want)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{"Agent Name": "agent-name", "_x": "x", "QC-1": "qc-1", "!!!": "", strings.Repeat("a", 70): strings.Repeat("a", 64)} {
		if got := SanitizeName(in); got != want || (got != "" && !api.ValidName(got)) {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// What a file's body gives its message, for the bodies of the seeds'
// folder layouts (bridge tests what the layout adds: the place of each
// file). Mapping a body twice gives the same message.
func TestMapFileBodies(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  string
		place Place
		ok    func(m *api.Message, md map[string]any) bool
	}{
		{"mailbox names and priority, kept as metadata",
			`{"id": "msg_002", "from": "Developer Agent", "to": ["*"], "title": "Code review request for login feature",
			  "priority": "medium", "type": "request", "content": "Full details of the code changes..."}`,
			Place{FileName: "msg_002.json", Recipient: "master_agent"},
			func(m *api.Message, md map[string]any) bool {
				return m.From == "developer-agent" && md["original_from"] == "Developer Agent" && m.Priority == "normal" &&
					md["original_priority"] == "medium" && m.Title == "Code review request for login feature" && m.To[0] == "*"
			}},
		{"content code and artifacts",
			`{"id": "msg-20260111-163315-claude-4c78", "session_id": "agent-os-paper", "from": "claude", "to": "codex",
			  "content": {"text": "Your message text here", "code": "fmt.Println(\"draft\")", "artifacts": ["paper/section3.md"]}}`,
			Place{FileName: "msg-20260111-163315-claude-4c78.json", Folder: "agent-os-paper"},
			func(m *api.Message, md map[string]any) bool {
				return m.Content.Code == `fmt.Println("draft")` && len(m.Content.Artifacts) == 1 && m.Content.Artifacts[0].Ref == "paper/section3.md"
			}},
		{"a zone-less timestamp is UTC",
			`{"id": "msg_1705315000.5", "timestamp": "2024-01-15T10:36:40.500000", "from": "agent_architect_001",
			  "to": "all_engineers", "subject": "Spec frozen", "body": "The API spec is frozen for this sprint."}`,
			Place{FileName: "1705315000.5-agent_architect_001-msg_1705315000.5.json", Recipient: "agent_engineer_002"},
			func(m *api.Message, md map[string]any) bool {
				return m.Timestamp.Equal(time.Date(2024, 1, 15, 10, 36, 40, 5e8, time.UTC))
			}},
		{"seed 004 delegation: text from task.description",
			`{"message_type": "task_delegation", "message_id": "7f9c2ba4-e88f-4d2a-b1a0-5c3d9e8f1a22", "from_agent": "orchestrator",
			  "to_agent": "triage", "task": {"description": "Triage new issue #123", "priority": "high"}}`,
			Place{FileName: "20251020T143000Z-triage-task.json", Sender: "orchestrator"},
			func(m *api.Message, md map[string]any) bool {
				return m.ID == "7f9c2ba4-e88f-4d2a-b1a0-5c3d9e8f1a22" && m.From == "orchestrator" && m.To[0] == "triage" &&
					m.Type == "task_delegation" && m.Content.Text == "Triage new issue #123" && md["task"] != nil
			}},
		{"seed 004 completion: an id that is no maos id, text from rationale",
			`{"message_type": "task_completion", "message_id": "task completion #1", "in_reply_to": "7f9c2ba4-e88f-4d2a-b1a0-5c3d9e8f1a22",
			  "from_agent": "triage", "to_agent": "orchestrator", "status": "success",
			  "rationale": "Applied 'bug' label: the report has a stack trace and reproduction steps"}`,
			Place{FileName: "20251020T143015Z-triage-done.json", Recipient: "orchestrator"},
			func(m *api.Message, md map[string]any) bool {
				return strings.HasPrefix(m.ID, "imp-") && md["original_id"] == "task completion #1" &&
					m.InReplyTo == "7f9c2ba4-e88f-4d2a-b1a0-5c3d9e8f1a22" && strings.HasPrefix(m.Content.Text, "Applied 'bug' label") &&
					md["status"] == "success"
			}},
		{"no id and no msg stem: a hash of the bytes; no channel: the folder",
			`{"from": "a", "to": "b", "content": "hi"}`,
			Place{FileName: "note.json", Folder: "ch"},
			func(m *api.Message, md map[string]any) bool {
				return strings.HasPrefix(m.ID, "imp-") && len(m.ID) == len("imp-")+16 && m.Channel == "ch"
			}},
	} {
		m, err := Map([]byte(c.body), c.place, Options{Fallback: "fallback"})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if md := metaOf(t, m); !c.ok(m, md) {
			t.Errorf("%s: %+v meta %v", c.name, m, md)
		}
		again, _ := Map([]byte(c.body), c.place, Options{Fallback: "fallback"})
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Errorf("%s: mapping not deterministic:\n%s\n%s", c.name, a, b)
		}
	}
}
