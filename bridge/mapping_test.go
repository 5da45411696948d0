package bridge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/dialect"
	"github.com/maos-project/maos/fsm"
)

func scanMap(t *testing.T, root string) (map[string]*fsm.Message, []string) {
	t.Helper()
	files, ignored, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*fsm.Message{}
	for _, f := range files {
		raw, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := dialect.Map(raw, f.Place(), dialect.Options{Fallback: "fallback"})
		if err != nil {
			t.Fatalf("%s: %v", f.Rel, err)
		}
		m2, _ := dialect.Map(raw, f.Place(), dialect.Options{Fallback: "fallback"})
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(m2)
		if string(a) != string(b) {
			t.Fatalf("%s: mapping not deterministic:\n%s\n%s", f.Rel, a, b)
		}
		out[f.Rel] = m
	}
	return out, ignored
}

func meta(t *testing.T, m *fsm.Message) map[string]any {
	t.Helper()
	v := map[string]any{}
	if len(m.Metadata) > 0 {
		if err := json.Unmarshal(m.Metadata, &v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func TestMapMailboxLayout(t *testing.T) {
	got, ignored := scanMap(t, "testdata/mailbox")
	if len(got) != 4 || len(ignored) != 1 || ignored[0] != "mailboxes/global_bulletin/status.json" {
		t.Fatalf("got %d files, ignored %v", len(got), ignored)
	}
	m := got["mailboxes/developer_agent/inbox/msg_001.json"]
	if m.ID != "msg_001" || m.From != "master_agent" || m.To[0] != "developer_agent" || m.Channel != "fallback" ||
		m.Content.Text != "Please review the error handling in module X" || m.Type != "instruction" ||
		!m.RequiresResponse || m.CorrelationID != "task_123" || !m.Timestamp.Equal(time.Date(2024, 1, 27, 10, 30, 0, 0, time.UTC)) {
		t.Errorf("msg_001 = %+v", m)
	}
	a, _ := json.Marshal(m)
	b, _ := json.Marshal(got["mailboxes/master_agent/outbox/msg_001.json"])
	if string(a) != string(b) {
		t.Errorf("inbox and outbox copies map differently:\n%s\n%s", a, b)
	}
	m = got["mailboxes/master_agent/inbox/msg_002.json"]
	md := meta(t, m)
	if m.From != "developer-agent" || md["original_from"] != "Developer Agent" || m.Priority != "normal" ||
		md["original_priority"] != "medium" || m.Title != "Code review request for login feature" || m.To[0] != "*" {
		t.Errorf("msg_002 = %+v meta %v", m, md)
	}
	m = got["mailboxes/developer_agent/outbox/msg_003.json"]
	if m.From != "developer_agent" || m.ID != "msg_003" || m.Priority != "urgent" {
		t.Errorf("msg_003 (id from the file name, from from the outbox) = %+v", m)
	}
}

func TestMapChannelLayout(t *testing.T) {
	got, _ := scanMap(t, "testdata/channel")
	m := got["agent-os-paper/msg-20260111-163315-claude-4c78.json"]
	if m.Channel != "agent-os-paper" || m.InReplyTo != "msg-20260111-163300-codex-a1b2" ||
		m.Content.Code != `fmt.Println("draft")` || len(m.Content.Artifacts) != 1 ||
		m.Timestamp.Nanosecond() != 123e6 || meta(t, m)["turn"] != "claude" {
		t.Errorf("claude msg = %+v", m)
	}
	// No session_id: the folder's name.
	if m := got["agent-os-paper/msg-20260111-155709-qc-1-b4f6.json"]; m.Channel != "agent-os-paper" || m.To[0] != "all" {
		t.Errorf("qc msg = %+v", m)
	}
}

func TestMapADR008AndOrchestrator(t *testing.T) {
	got, _ := scanMap(t, "testdata/adr008")
	m := got["shared/messages/inbox/agent_engineer_002/1705314600-agent_architect_001-msg_abc123.json"]
	md := meta(t, m)
	if m.Title != "API endpoint clarification" || !strings.HasPrefix(m.Content.Text, "Can you clarify") ||
		m.ThreadID != "thread_xyz789" || md["context"] == nil {
		t.Errorf("adr msg = %+v meta %v", m, md)
	}
	if m := got["shared/messages/inbox/agent_engineer_002/1705315000.5-agent_architect_001-msg_1705315000.5.json"]; m.Timestamp.Nanosecond() != 5e8 {
		t.Errorf("zone-less timestamp = %v", m.Timestamp)
	}
	m = got["shared/messages/outbox/orchestrator/20251020T143000Z-triage-task.json"]
	md = meta(t, m)
	if m.ID != "7f9c2ba4-e88f-4d2a-b1a0-5c3d9e8f1a22" || m.From != "orchestrator" || m.To[0] != "triage" ||
		m.Type != "task_delegation" || m.Content.Text != "Triage new issue #123" || md["task"] == nil {
		t.Errorf("delegation = %+v meta %v", m, md)
	}
	m = got["shared/messages/inbox/orchestrator/20251020T143015Z-triage-done.json"]
	md = meta(t, m)
	if !strings.HasPrefix(m.ID, "imp-") || md["original_id"] != "task completion #1" || m.InReplyTo != "7f9c2ba4-e88f-4d2a-b1a0-5c3d9e8f1a22" ||
		!strings.HasPrefix(m.Content.Text, "Applied 'bug' label") || md["status"] != "success" {
		t.Errorf("completion = %+v meta %v", m, md)
	}
}

func TestWriteFileNeverRewrites(t *testing.T) {
	dir := t.TempDir()
	m := &fsm.Message{ID: "msg-20260111-163315-claude-4c78", Seq: 7, Channel: "c", From: "claude", To: fsm.Recipients{"codex"},
		Type: "chat", Content: fsm.Content{Text: "hi"}, Timestamp: time.Date(2026, 1, 11, 16, 33, 15, 123e6, time.UTC)}
	ok, err := WriteFile(dir, m)
	if err != nil || !ok {
		t.Fatalf("first write: %v %v", ok, err)
	}
	p := filepath.Join(dir, "msg-20260111-163315-claude-4c78.json")
	m.Content.Text = "changed"
	if ok, err := WriteFile(dir, m); err != nil || ok {
		t.Fatalf("second write: %v %v, want not written", ok, err)
	}
	b, _ := os.ReadFile(p)
	var f FileMessage
	if err := json.Unmarshal(b, &f); err != nil || f.Content.Text != "hi" || f.Timestamp != "2026-01-11T16:33:15.123Z" || f.To != "codex" || f.SessionID != "c" {
		t.Fatalf("file %s: %+v %v", b, f, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left %d entries (a .tmp?)", len(entries))
	}
	if n, err := NewestSeq(dir); err != nil || n != 7 {
		t.Fatalf("NewestSeq = %d %v", n, err)
	}
	if _, err := WriteFile(filepath.Join(dir, "missing"), m); err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
}
