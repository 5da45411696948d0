package fsm

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/maos-project/maos/api"
)

func TestNewReply(t *testing.T) {
	root := &api.Message{ID: "msg-root", Seq: 3, Channel: "review", From: "codex", To: api.Recipients{"claude", "role:qa"},
		Type: "request", Title: "retry logic", Priority: api.PriorityUrgent, Content: api.Content{Text: "please look"},
		Tags: []string{"x"}, CorrelationID: "task_1", RequiresResponse: true, Visibility: api.VisibilityPublic}
	r := api.NewReply(root, "claude", "done")
	want := api.Message{Channel: "review", From: "claude", To: api.Recipients{"codex"}, Type: "response", Title: "Re: retry logic",
		Priority: api.PriorityNormal, Content: api.Content{Text: "done"}, InReplyTo: "msg-root", ThreadID: "msg-root",
		Visibility: api.VisibilityPublic}
	if got, w := mustMarshal(r), mustMarshal(want); got != w {
		t.Errorf("NewReply(root) =\n %s\nwant\n %s", got, w)
	}
	r.Normalize(root.Timestamp)
	if err := r.Validate(); err != nil {
		t.Errorf("the reply does not validate: %v", err)
	}

	for _, tc := range []struct {
		name  string
		edit  func(m *api.Message)
		check func(r *api.Message) bool
	}{
		{"a reply joins its parent's thread", func(m *api.Message) { m.ThreadID = "msg-top" }, func(r *api.Message) bool { return r.ThreadID == "msg-top" }},
		{"no second Re:", func(m *api.Message) { m.Title = "Re: retry logic" }, func(r *api.Message) bool { return r.Title == "Re: retry logic" }},
		{"an untitled message gets an untitled reply", func(m *api.Message) { m.Title = "" }, func(r *api.Message) bool { return r.Title == "" }},
		{"a task_assign gets a task_result", func(m *api.Message) { m.Type = "task_assign" }, func(r *api.Message) bool { return r.Type == "task_result" }},
		{"a chat gets a response", func(m *api.Message) { m.Type = "chat" }, func(r *api.Message) bool { return r.Type == "response" }},
		{"private stays private", func(m *api.Message) { m.Visibility = api.VisibilityPrivate }, func(r *api.Message) bool { return r.Visibility == api.VisibilityPrivate }},
		{"for moderators stays for moderators", func(m *api.Message) { m.Visibility = api.VisibilityModerators }, func(r *api.Message) bool { return r.Visibility == api.VisibilityModerators }},
		{"no visibility is public", func(m *api.Message) { m.Visibility = "" }, func(r *api.Message) bool { return r.Visibility == api.VisibilityPublic }},
		{"a long title is cut on a character", func(m *api.Message) { m.Title = strings.Repeat("é", api.MaxTitleLen) }, func(r *api.Message) bool {
			return len(r.Title) <= api.MaxTitleLen && len(r.Title) > api.MaxTitleLen-2 && utf8.ValidString(r.Title) && strings.HasPrefix(r.Title, "Re: é")
		}},
	} {
		m := *root
		tc.edit(&m)
		if r := api.NewReply(&m, "claude", "done"); !tc.check(r) {
			t.Errorf("%s: NewReply = %+v", tc.name, r)
		}
	}
}
