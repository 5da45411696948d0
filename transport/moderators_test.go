package transport_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// Seed 004's code-of-conduct flag, posted to the API as its agents write
// it (and asking to be public), is stored for moderators only: its sender,
// the agent to_agent names by id and moderators read it on every path;
// carol, reached by "all", reads it on none.
func TestModeratorsOnlyReadPaths(t *testing.T) {
	e := newVisEnv(t)
	body := seedBody(t, "seed004_coc.json")
	body = strings.NewReplacer(`"from_agent": "community"`, `"from_agent": "alice"`,
		`"to_agent": "orchestrator"`, `"to_agent": ["bob", "all"], "session_id": "general", "visibility": "public"`,
		`"message_id": "unique_uuid"`, `"message_id": "coc-1"`).Replace(body)
	h := http.Header{}
	h.Set(asHeader, "alice")
	var res api.SendResponse
	wantOK(t, do(t, "POST", e.url+"/v1/messages", body, h), &res)
	e.send("msg-pub", "carol", "alice", "", "public from carol", "", "")

	var m api.Message
	wantOK(t, e.get("boss", "/v1/messages/coc-1"), &m)
	if m.Visibility != api.VisibilityModerators || m.Type != fsm.TypeCoCViolationFlag || !slices.Equal(m.Recipients, []string{"bob"}) {
		t.Fatalf("stored %+v; want visibility moderators, delivered to bob only", m)
	}
	leaks := func(what string, b []byte) {
		t.Helper()
		for _, s := range []string{"coc-1", "harassment", "Review for potential CoC", "alice→bob"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s shows carol %q: %s", what, s, b)
			}
		}
	}

	// get
	for _, as := range []string{"alice", "bob", "boss", ""} {
		wantOK(t, e.get(as, "/v1/messages/coc-1"), nil)
	}
	r := e.get("carol", "/v1/messages/coc-1")
	if msg := wantError(t, r, http.StatusNotFound, api.CodeNotFound); msg != "message coc-1: not found" {
		t.Errorf("carol's 404 says %q", msg)
	}

	// channel page
	for as, want := range map[string][]string{"alice": {"coc-1", "msg-pub"}, "bob": {"coc-1", "msg-pub"}, "boss": {"coc-1", "msg-pub"}, "carol": {"msg-pub"}} {
		r := e.get(as, "/v1/channels/general/messages")
		if got := ids(t, r); !slices.Equal(got, want) {
			t.Errorf("%s: channel = %v, want %v", as, got, want)
		}
		if as == "carol" {
			leaks("channel", r.body)
		}
	}

	// inboxes: "all" delivered it to nobody but bob
	if got := ids(t, e.get("bob", "/v1/agents/bob/inbox")); !slices.Equal(got, []string{"coc-1"}) {
		t.Errorf("bob's inbox = %v", got)
	}
	r = e.get("carol", "/v1/agents/carol/inbox")
	if got := ids(t, r); len(got) != 0 {
		t.Errorf("carol's inbox = %v, want empty", got)
	}
	leaks("inbox", r.body)
	var counts api.InboxCounts
	wantOK(t, e.get("carol", "/v1/agents/carol/inbox/counts"), &counts)
	if counts.Total != 0 || counts.Unread != 0 {
		t.Errorf("carol's counts = %+v, want none", counts)
	}

	// thread
	wantOK(t, e.get("bob", "/v1/threads/coc-1"), nil)
	e.hiddenAsAbsent(t, "/v1/threads/coc-1", "coc-1", "coc-x")

	// overview
	for as, want := range map[string]int{"boss": 2, "bob": 2, "carol": 1} {
		var p api.OverviewPage
		r := e.get(as, "/v1/overview")
		wantOK(t, r, &p)
		if len(p.Messages) != want {
			t.Errorf("%s: overview lists %d, want %d", as, len(p.Messages), want)
		}
		if as == "carol" {
			leaks("overview", r.body)
		}
	}

	// stream
	for as, want := range map[string][]string{"carol": {"msg-pub"}, "bob": {"coc-1", "msg-pub"}, "boss": {"coc-1", "msg-pub"}} {
		ch, closeStream := e.openStream(as, "channel=general", "")
		if got := backlog(t, ch); !slices.Equal(got, want) {
			t.Errorf("%s: stream = %v, want %v", as, got, want)
		}
		closeStream()
	}

	// audit
	lineOf := func(as string) (api.AuditEntry, []byte) {
		r := e.get(as, "/v1/audit")
		a := decodeAudit(t, r)
		for _, ev := range a.Events {
			if ev.Kind == fsm.AuditMessage && ev.Index == res.Seq {
				return ev, r.body
			}
		}
		t.Fatalf("%s: no audit line at %d", as, res.Seq)
		return api.AuditEntry{}, nil
	}
	ev, b := lineOf("carol")
	leaks("audit", b)
	if ev.Line == "" || !strings.HasSuffix(ev.Line, "] MESSAGE: (private)") {
		t.Errorf("carol's audit line %q, want it redacted", ev.Line)
	}
	for _, as := range []string{"bob", "boss"} {
		if ev, _ := lineOf(as); !strings.Contains(ev.Line, "[alice→bob] COC_VIOLATION_FLAG:") {
			t.Errorf("%s's audit line %q", as, ev.Line)
		}
	}
}
