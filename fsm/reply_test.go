package fsm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNewReply(t *testing.T) {
	root := &Message{ID: "msg-root", Seq: 3, Channel: "review", From: "codex", To: Recipients{"claude", "role:qa"},
		Type: "request", Title: "retry logic", Priority: PriorityUrgent, Content: Content{Text: "please look"},
		Tags: []string{"x"}, CorrelationID: "task_1", RequiresResponse: true, Visibility: VisibilityPublic}
	r := NewReply(root, "claude", "done")
	want := Message{Channel: "review", From: "claude", To: Recipients{"codex"}, Type: "response", Title: "Re: retry logic",
		Priority: PriorityNormal, Content: Content{Text: "done"}, InReplyTo: "msg-root", ThreadID: "msg-root",
		Visibility: VisibilityPublic}
	if got, w := mustMarshal(r), mustMarshal(want); got != w {
		t.Errorf("NewReply(root) =\n %s\nwant\n %s", got, w)
	}
	r.Normalize(root.Timestamp)
	if err := r.Validate(); err != nil {
		t.Errorf("the reply does not validate: %v", err)
	}

	for _, tc := range []struct {
		name  string
		edit  func(m *Message)
		check func(r *Message) bool
	}{
		{"a reply joins its parent's thread", func(m *Message) { m.ThreadID = "msg-top" }, func(r *Message) bool { return r.ThreadID == "msg-top" }},
		{"no second Re:", func(m *Message) { m.Title = "Re: retry logic" }, func(r *Message) bool { return r.Title == "Re: retry logic" }},
		{"an untitled message gets an untitled reply", func(m *Message) { m.Title = "" }, func(r *Message) bool { return r.Title == "" }},
		{"a task_assign gets a task_result", func(m *Message) { m.Type = "task_assign" }, func(r *Message) bool { return r.Type == "task_result" }},
		{"a chat gets a response", func(m *Message) { m.Type = "chat" }, func(r *Message) bool { return r.Type == "response" }},
		{"private stays private", func(m *Message) { m.Visibility = VisibilityPrivate }, func(r *Message) bool { return r.Visibility == VisibilityPrivate }},
		{"for moderators stays for moderators", func(m *Message) { m.Visibility = VisibilityModerators }, func(r *Message) bool { return r.Visibility == VisibilityModerators }},
		{"no visibility is public", func(m *Message) { m.Visibility = "" }, func(r *Message) bool { return r.Visibility == VisibilityPublic }},
		{"a long title is cut on a character", func(m *Message) { m.Title = strings.Repeat("é", MaxTitleLen) }, func(r *Message) bool {
			return len(r.Title) <= MaxTitleLen && len(r.Title) > MaxTitleLen-2 && utf8.ValidString(r.Title) && strings.HasPrefix(r.Title, "Re: é")
		}},
	} {
		m := *root
		tc.edit(&m)
		if r := NewReply(&m, "claude", "done"); !tc.check(r) {
			t.Errorf("%s: NewReply = %+v", tc.name, r)
		}
	}
}
