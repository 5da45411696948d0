package transport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// asHeader names the identity visEnv injects into a request: an agent, or
// "boss", a moderator. No header: no identity, as on a node without --auth.
const asHeader = "X-Test-As"

type visEnv struct {
	t   *testing.T
	svc *transporttest.Service
	url string
}

// The conversation every test reads: p1 public alice → bob; s private
// bob → alice answering p1; p2 public alice → bob answering s; p3 public
// carol → alice. All on channel general, all in p1's thread.
type visMsgs struct {
	p1, s, p2, p3 *api.SendResponse
}

func newVisEnv(t *testing.T) *visEnv {
	t.Helper()
	svc := newMailService(t)
	apiServer := transport.NewServer(svc, transport.ServerOptions{Logger: discard, KeepAlive: time.Hour})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if as := r.Header.Get(asHeader); as != "" {
			id := &transport.Identity{Agent: as, Role: api.RoleAgent, TokenID: "tok-" + as}
			if as == "boss" {
				id.Role = api.RoleModerator
			}
			r = r.WithContext(transport.WithIdentity(r.Context(), id))
		}
		apiServer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := &visEnv{t: t, svc: svc, url: srv.URL}
	for _, a := range []string{"alice", "bob", "carol", "boss"} {
		if _, err := svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: a, Role: "agent"}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *visEnv) send(id, from, to, title, text, visibility, inReplyTo string) *api.SendResponse {
	e.t.Helper()
	m := &api.Message{ID: id, From: from, To: api.Recipients{to}, Channel: "general", Title: title,
		Content: api.Content{Text: text}, Visibility: visibility, InReplyTo: inReplyTo}
	m.Normalize(time.Now())
	if err := m.Validate(); err != nil {
		e.t.Fatal(err)
	}
	res := store(e.t, e.svc, m)
	return &api.SendResponse{ID: res.ID, Seq: res.Seq}
}

func (e *visEnv) conversation() visMsgs {
	return visMsgs{
		p1: e.send("msg-p1", "alice", "bob", "hello", "public opening", "", ""),
		s:  e.send("msg-s", "bob", "alice", "secret title", "secret content", "private", "msg-p1"),
		// A reply to s would be private (the state machine makes it so);
		// p2 answers the public opening, in the same thread.
		p2: e.send("msg-p2", "alice", "bob", "", "public answer", "", "msg-p1"),
		p3: e.send("msg-p3", "carol", "alice", "", "public from carol", "", ""),
	}
}

// get reads path as the identity as ("" for none).
func (e *visEnv) get(as, path string) reply {
	e.t.Helper()
	h := http.Header{}
	if as != "" {
		h.Set(asHeader, as)
	}
	return do(e.t, "GET", e.url+path, "", h)
}

// ids lists the ids of the messages in a JSON body {"messages":[{"id"...}]}.
func ids(t *testing.T, r reply) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var p struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	out := []string{}
	for _, m := range p.Messages {
		out = append(out, m.ID)
	}
	return out
}

// noLeak fails when a body carries the private message, its title or
// text, or an event about it. (Its id may appear in a 404 as the id asked
// for.)
// hiddenAsAbsent gets path as carol, who may not see the message id it
// names, and fails unless the answer is a 404 worded as for absent, an id
// that does not exist, at the same path. It returns carol's answer.
func (e *visEnv) hiddenAsAbsent(t *testing.T, path, id, absent string) reply {
	t.Helper()
	r := e.get("carol", path)
	hidden := wantError(t, r, http.StatusNotFound, api.CodeNotFound)
	other := wantError(t, e.get("carol", strings.Replace(path, id, absent, 1)), http.StatusNotFound, api.CodeNotFound)
	if strings.ReplaceAll(hidden, id, "ID") != strings.ReplaceAll(other, absent, "ID") {
		t.Errorf("%s: carol's 404 %q differs from an absent one's %q", path, hidden, other)
	}
	return r
}

func noLeak(t *testing.T, what string, body []byte) {
	t.Helper()
	for _, s := range []string{`"id":"msg-s"`, `"message_id":"msg-s"`, "secret", "bob→alice"} {
		if strings.Contains(string(body), s) {
			t.Errorf("%s leaks %q: %s", what, s, body)
		}
	}
}

// A private message is invisible to a third agent on every read path,
// visible to its sender, its recipient and a moderator; the public ones
// around it stay visible to everyone.
func TestPrivateMessageReadPaths(t *testing.T) {
	e := newVisEnv(t)
	c := e.conversation()
	all := []string{"msg-p1", "msg-s", "msg-p2", "msg-p3"}
	public := []string{"msg-p1", "msg-p2", "msg-p3"}

	t.Run("get", func(t *testing.T) {
		noLeak(t, "404", e.hiddenAsAbsent(t, "/v1/messages/msg-s", "msg-s", "msg-x").body)
		for _, as := range []string{"", "alice", "bob", "boss"} {
			var m api.Message
			wantOK(t, e.get(as, "/v1/messages/msg-s"), &m)
			if m.Content.Text != "secret content" {
				t.Errorf("%q reads %+v", as, m)
			}
		}
		wantOK(t, e.get("carol", "/v1/messages/msg-p1"), new(api.Message))
	})

	t.Run("channel", func(t *testing.T) {
		for as, want := range map[string][]string{"": all, "alice": all, "bob": all, "boss": all, "carol": public} {
			if got := ids(t, e.get(as, "/v1/channels/general/messages")); !slices.Equal(got, want) {
				t.Errorf("%q: channel = %v, want %v", as, got, want)
			}
		}
		noLeak(t, "channel", e.get("carol", "/v1/channels/general/messages").body)
		// Pages of one: the private message is passed over, nothing else is,
		// and has_more ends the paging.
		var got []string
		after := uint64(0)
		for range 10 {
			r := e.get("carol", fmt.Sprintf("/v1/channels/general/messages?limit=1&after=%d", after))
			var p api.Page
			wantOK(t, r, &p)
			for _, m := range p.Messages {
				got = append(got, m.ID)
				after = m.Seq
			}
			if !p.HasMore {
				break
			}
			if len(p.Messages) == 0 {
				t.Fatalf("an empty page with has_more after %d", after)
			}
		}
		if !slices.Equal(got, public) {
			t.Errorf("paged = %v, want %v", got, public)
		}
		// A page that would have started on the private message.
		if got := ids(t, e.get("carol", fmt.Sprintf("/v1/channels/general/messages?limit=1&after=%d", c.p1.Seq))); !slices.Equal(got, []string{"msg-p2"}) {
			t.Errorf("page after p1 = %v, want [msg-p2]", got)
		}
	})

	t.Run("inbox", func(t *testing.T) {
		for _, as := range []string{"alice", "boss", ""} {
			if got := ids(t, e.get(as, "/v1/agents/alice/inbox")); !slices.Equal(got, []string{"msg-s", "msg-p3"}) {
				t.Errorf("%q: alice's inbox = %v", as, got)
			}
		}
		// Another agent's inbox is refused by authorization; if it is ever
		// answered, it still holds nothing private.
		r := e.get("carol", "/v1/agents/alice/inbox")
		switch r.status {
		case http.StatusForbidden, http.StatusNotFound:
		case http.StatusOK:
			if got := ids(t, r); !slices.Equal(got, []string{"msg-p3"}) {
				t.Errorf("carol reads alice's inbox as %v", got)
			}
		default:
			t.Errorf("carol reads alice's inbox: %d %s", r.status, r.body)
		}
		noLeak(t, "inbox", r.body)
	})

	t.Run("thread", func(t *testing.T) {
		thread := []string{"msg-p1", "msg-s", "msg-p2"}
		for _, as := range []string{"", "alice", "bob", "boss"} {
			for _, id := range []string{"msg-p1", "msg-s", "msg-p2"} {
				if got := ids(t, e.get(as, "/v1/threads/"+id)); !slices.Equal(got, thread) {
					t.Errorf("%q: thread %s = %v", as, id, got)
				}
			}
		}
		for _, id := range []string{"msg-p1", "msg-p2"} {
			r := e.get("carol", "/v1/threads/"+id)
			if got := ids(t, r); !slices.Equal(got, []string{"msg-p1", "msg-p2"}) {
				t.Errorf("carol: thread %s = %v", id, got)
			}
			noLeak(t, "thread", r.body)
		}
		r := e.get("carol", "/v1/threads/msg-p1?limit=1&after="+fmt.Sprint(c.p1.Seq))
		if got := ids(t, r); !slices.Equal(got, []string{"msg-p2"}) {
			t.Errorf("carol: thread page after p1 = %v", got)
		}
		noLeak(t, "thread 404", e.hiddenAsAbsent(t, "/v1/threads/msg-s", "msg-s", "msg-x").body)
	})

	t.Run("receipts", func(t *testing.T) {
		noLeak(t, "receipts 404", e.hiddenAsAbsent(t, "/v1/messages/msg-s/receipts", "msg-s", "msg-x").body)
		for _, as := range []string{"alice", "boss"} {
			var rs api.Receipts
			wantOK(t, e.get(as, "/v1/messages/msg-s/receipts"), &rs)
			if rs.From != "bob" || len(rs.Receipts) != 1 || rs.Receipts[0].Agent != "alice" {
				t.Errorf("%q: receipts of s = %+v", as, rs)
			}
		}
		// p1 was answered by s: only its parties see which message answered.
		replyOf := func(as string) string {
			var rs api.Receipts
			wantOK(t, e.get(as, "/v1/messages/msg-p1/receipts"), &rs)
			if len(rs.Receipts) != 1 || rs.Receipts[0].State != api.ReceiptAnswered {
				t.Fatalf("%q: receipts of p1 = %+v", as, rs)
			}
			return rs.Receipts[0].ReplyID
		}
		for as, want := range map[string]string{"": "msg-s", "bob": "msg-s", "boss": "msg-s", "carol": ""} {
			if got := replyOf(as); got != want {
				t.Errorf("%q: p1's reply id = %q, want %q", as, got, want)
			}
		}
	})

	t.Run("overview", func(t *testing.T) {
		entries := func(as, q string) []api.OverviewEntry {
			var p api.OverviewPage
			r := e.get(as, "/v1/overview"+q)
			wantOK(t, r, &p)
			if as == "carol" {
				noLeak(t, "overview", r.body)
			}
			return p.Messages
		}
		titleOfS := func(as string) (string, bool) {
			for _, m := range entries(as, "") {
				if m.ID == "msg-s" {
					return m.Title, m.Private
				}
			}
			return "", false
		}
		for as, want := range map[string]string{"": fsm.PrivateText, "alice": "secret title", "bob": "secret title", "boss": "secret title"} {
			if title, private := titleOfS(as); title != want || !private {
				t.Errorf("%q: overview entry of s: title %q private %t, want %q", as, title, private, want)
			}
		}
		var got []string
		for _, m := range entries("carol", "") {
			got = append(got, m.ID)
		}
		if !slices.Equal(got, public) {
			t.Errorf("carol's overview = %v, want %v", got, public)
		}
		if got := entries("carol", fmt.Sprintf("?channel=general&limit=1&after=%d", c.p1.Seq)); len(got) != 1 || got[0].ID != "msg-p2" {
			t.Errorf("carol's overview page after p1 = %+v", got)
		}
	})

	t.Run("audit", func(t *testing.T) {
		event := func(as string) (api.AuditEntry, []byte) {
			r := e.get(as, "/v1/audit")
			a := decodeAudit(t, r)
			for _, ev := range a.Events {
				if ev.Kind == fsm.AuditMessage && ev.Index == c.s.Seq {
					return ev, r.body
				}
			}
			t.Fatalf("%q: no audit event at index %d: %s", as, c.s.Seq, r.body)
			return api.AuditEntry{}, nil
		}
		ev, body := event("carol")
		noLeak(t, "audit", body)
		if !ev.Private || ev.From != "" || len(ev.To) != 0 || ev.MessageID != "" || ev.Text != fsm.PrivateText ||
			!strings.HasSuffix(ev.Line, "] MESSAGE: (private)") || strings.Contains(ev.Line, "bob") {
			t.Errorf("carol's line for s = %+v, want it redacted", ev)
		}
		for _, as := range []string{"alice", "bob", "boss"} {
			ev, _ := event(as)
			if !strings.HasSuffix(ev.Line, "[bob→alice] CHAT: secret title") || ev.MessageID != "msg-s" {
				t.Errorf("%q: line for s = %q", as, ev.Line)
			}
		}
		// Without authentication the line is as it always was: parties
		// shown, text hidden.
		if ev, _ := event(""); !strings.HasSuffix(ev.Line, "[bob→alice] CHAT: (private)") {
			t.Errorf("unauthenticated line for s = %q", ev.Line)
		}
		// The public lines are whole for carol.
		if !strings.Contains(string(body), "[alice→bob] CHAT: hello") {
			t.Errorf("carol's audit lacks p1's line: %s", body)
		}
	})
}

// event is one Server-Sent Event.
type event struct{ id, name, data string }

// openStream reads GET /v1/stream?query as the identity as, with
// Last-Event-ID lastID when it is not "", until closed or the test ends.
func (e *visEnv) openStream(as, query, lastID string) (<-chan event, context.CancelFunc) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/stream?"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if as != "" {
		req.Header.Set(asHeader, as)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("stream: status %d", resp.StatusCode)
	}
	ch := make(chan event, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
				ev = event{}
			}
		}
	}()
	return ch, cancel
}

// next returns the next event, failing the test after 5 s.
func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no stream event within 5s")
	}
	return event{}
}

// backlog returns the message ids a stream sends before its ready event.
func backlog(t *testing.T, ch <-chan event) []string {
	t.Helper()
	out := []string{}
	for {
		ev := next(t, ch)
		if ev.name == api.EventReady {
			return out
		}
		var m api.Message
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatalf("event %+v: %v", ev, err)
		}
		if ev.id != fmt.Sprint(m.Seq) {
			t.Errorf("event id %s for seq %d", ev.id, m.Seq)
		}
		out = append(out, m.ID)
	}
}

func TestPrivateMessageStream(t *testing.T) {
	e := newVisEnv(t)
	c := e.conversation()
	all := []string{"msg-p1", "msg-s", "msg-p2", "msg-p3"}
	public := []string{"msg-p1", "msg-p2", "msg-p3"}
	for _, tc := range []struct {
		as, query, lastID string
		want              []string
	}{
		{"carol", "", "", public},
		{"carol", "channel=general", "", public},
		{"carol", "agent=carol", "", []string{}},
		// Resuming right before the private message passes over it.
		{"carol", "", fmt.Sprint(c.p1.Seq), []string{"msg-p2", "msg-p3"}},
		{"carol", "channel=general&after=" + fmt.Sprint(c.p1.Seq), "", []string{"msg-p2", "msg-p3"}},
		{"alice", "", "", all},
		{"alice", "agent=alice", "", []string{"msg-s", "msg-p3"}},
		{"bob", "channel=general", "", all},
		{"boss", "", "", all},
		{"", "", "", all},
	} {
		ch, closeStream := e.openStream(tc.as, tc.query, tc.lastID)
		if got := backlog(t, ch); !slices.Equal(got, tc.want) {
			t.Errorf("%q ?%s Last-Event-ID %q: %v, want %v", tc.as, tc.query, tc.lastID, got, tc.want)
		}
		closeStream()
	}

	// Live: a private message pushed after ready reaches its parties only;
	// carol's next event is the public message after it.
	carol, _ := e.openStream("carol", "", "")
	bob, _ := e.openStream("bob", "", "")
	backlog(t, carol)
	backlog(t, bob)
	s2 := e.send("msg-s2", "alice", "bob", "secret again", "secret live", "private", "")
	p4 := e.send("msg-p4", "alice", "bob", "", "public live", "", "")
	if ev := next(t, carol); ev.name != api.EventMessage || ev.id != fmt.Sprint(p4.Seq) {
		t.Errorf("carol's next event = %+v, want p4 (seq %d)", ev, p4.Seq)
	}
	for _, want := range []uint64{s2.Seq, p4.Seq} {
		if ev := next(t, bob); ev.id != fmt.Sprint(want) {
			t.Errorf("bob's next event = %+v, want seq %d", ev, want)
		}
	}
}
