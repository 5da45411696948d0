package chaos

import (
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/watcher"
)

// view builds what a node shows: requests q1..qn to agent a, and replies.
func view(requests []string, replies ...*api.Message) *watcherView {
	v := &watcherView{requests: map[string]*api.Message{}, replies: map[string][]*api.Message{}}
	for i, id := range requests {
		v.requests[id] = &api.Message{ID: id, Seq: uint64(i + 1), From: WatcherSender, To: api.Recipients{"a"}}
	}
	for _, r := range replies {
		v.replies[r.InReplyTo] = append(v.replies[r.InReplyTo], r)
	}
	return v
}

// reply is from's answer to the request to, as view stores the requests
// (no timestamp).
func reply(from, to string) *api.Message {
	return &api.Message{ID: watcher.ReplyID(from, &api.Message{ID: to}), From: from, InReplyTo: to, Type: "response"}
}

// Each violation the watcher check knows is found, on the node it is on;
// a clean set of views passes.
func TestCheckWatcherViews(t *testing.T) {
	acked := map[string]uint64{"q1": 1, "q2": 2}
	good := view([]string{"q1", "q2"}, reply("a", "q1"), reply("a", "q2"))
	res := checkWatcherViews([]string{"n1", "n2"}, []*watcherView{good, good}, acked, 1)
	if !res.OK() || res.Stored != 2 || res.Answered != 2 || res.Acked != 2 {
		t.Fatalf("clean views: %+v", res)
	}
	wrongID := reply("a", "q2")
	wrongID.ID = "re-a-other"
	tests := []struct {
		name  string
		bad   *watcherView
		field func(*WatcherCheck) []string
		want  string
	}{
		{"unanswered", view([]string{"q1", "q2"}, reply("a", "q1")), func(c *WatcherCheck) []string { return c.Unanswered }, "q2"},
		{"answered twice", view([]string{"q1", "q2"}, reply("a", "q1"), reply("a", "q2"), reply("b", "q2")),
			func(c *WatcherCheck) []string { return c.Duplicated }, "q2"},
		{"reply from another agent", view([]string{"q1", "q2"}, reply("a", "q1"), reply("b", "q2")),
			func(c *WatcherCheck) []string { return c.Orphans }, reply("b", "q2").ID},
		{"reply with another id", view([]string{"q1", "q2"}, reply("a", "q1"), wrongID),
			func(c *WatcherCheck) []string { return c.Orphans }, "re-a-other"},
		{"reply without request", view([]string{"q1", "q2"}, reply("a", "q1"), reply("a", "q2"), reply("a", "q9")),
			func(c *WatcherCheck) []string { return c.Orphans }, reply("a", "q9").ID},
		{"lost request", view([]string{"q1"}, reply("a", "q1")), func(c *WatcherCheck) []string { return c.Lost }, "q2"},
	}
	for _, tt := range tests {
		res := checkWatcherViews([]string{"n1", "n2"}, []*watcherView{good, tt.bad}, acked, 1)
		if res.OK() || !slices.Contains(tt.field(res), tt.want) {
			t.Errorf("%s: not found: %+v", tt.name, res)
			continue
		}
		if len(res.Notes) == 0 || !strings.HasPrefix(res.Notes[0], "n2: ") {
			t.Errorf("%s: notes %q do not say it is on n2", tt.name, res.Notes)
		}
		if txt := (&Report{Watchers: res}).Text(); !strings.Contains(txt, "("+tt.want) {
			t.Errorf("%s: the report text does not list %s:\n%s", tt.name, tt.want, txt)
		}
	}
}
