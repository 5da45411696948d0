package bridge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/dialect"
)

// scanMap scans root and maps each file it finds at its place. What a
// body gives its message is package dialect's to test; these tests check
// what the folder layout adds: which files are messages, and each one's
// place (the channel folder, the outbox's sender, the file name's id).
func scanMap(t *testing.T, root string) (map[string]*api.Message, []string) {
	t.Helper()
	files, ignored, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*api.Message{}
	for _, f := range files {
		raw, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := dialect.Map(raw, f.Place(), dialect.Options{Fallback: "fallback"})
		if err != nil {
			t.Fatalf("%s: %v", f.Rel, err)
		}
		out[f.Rel] = m
	}
	return out, ignored
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
	if m := got["mailboxes/master_agent/inbox/msg_002.json"]; m.Channel != "fallback" || m.ID != "msg_002" {
		t.Errorf("msg_002 = %+v", m)
	}
	m = got["mailboxes/developer_agent/outbox/msg_003.json"]
	if m.From != "developer_agent" || m.ID != "msg_003" || m.Priority != "urgent" {
		t.Errorf("msg_003 (id from the file name, from from the outbox) = %+v", m)
	}
}

func TestMapChannelLayout(t *testing.T) {
	got, _ := scanMap(t, "testdata/channel")
	if len(got) != 3 {
		t.Fatalf("got %d files", len(got))
	}
	// No session_id: the folder's name.
	if m := got["agent-os-paper/msg-20260111-155709-qc-1-b4f6.json"]; m.Channel != "agent-os-paper" || m.To[0] != "all" {
		t.Errorf("qc msg = %+v", m)
	}
}

// The ADR 008 layout: inbox and outbox folders per agent, files named
// by time, sender and id; every message file is found.
func TestMapADR008AndOrchestrator(t *testing.T) {
	got, ignored := scanMap(t, "testdata/adr008")
	if len(got) != 4 || len(ignored) != 0 {
		t.Fatalf("got %d files, ignored %v", len(got), ignored)
	}
	if m := got["shared/messages/inbox/agent_engineer_002/1705314600-agent_architect_001-msg_abc123.json"]; m.ID != "msg_abc123" || m.Channel != "fallback" {
		t.Errorf("adr msg = %+v", m)
	}
	if m := got["shared/messages/outbox/orchestrator/20251020T143000Z-triage-task.json"]; m.From != "orchestrator" || m.Channel != "fallback" {
		t.Errorf("delegation = %+v", m)
	}
}

func TestWriteFileNeverRewrites(t *testing.T) {
	dir := t.TempDir()
	m := &api.Message{ID: "msg-20260111-163315-claude-4c78", Seq: 7, Channel: "c", From: "claude", To: api.Recipients{"codex"},
		Type: "chat", Content: api.Content{Text: "hi"}, Timestamp: time.Date(2026, 1, 11, 16, 33, 15, 123e6, time.UTC)}
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
