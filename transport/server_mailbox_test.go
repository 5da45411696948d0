package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// newMailService is the fake with a real state machine behind every write,
// sends included, and every message read, as a one-node cluster would: the
// entry at index i is stamped transporttest.Epoch + i ms.
func newMailService(t *testing.T) *transporttest.Service {
	t.Helper()
	return transporttest.New(t, transporttest.Clock(func(i uint64) time.Time {
		return transporttest.Epoch.Add(time.Duration(i) * time.Millisecond)
	}))
}

type mailEnv struct {
	t      *testing.T
	svc    *transporttest.Service
	url    string
	client *client.Client
}

func newMailEnv(t *testing.T) *mailEnv {
	t.Helper()
	svc := newMailService(t)
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Logger: discard}))
	t.Cleanup(srv.Close)
	return &mailEnv{t: t, svc: svc, url: srv.URL, client: client.NewClient(srv.URL, nil)}
}

func (e *mailEnv) do(method, path, body string) reply {
	e.t.Helper()
	return do(e.t, method, e.url+path, body, nil)
}

func (e *mailEnv) dump() string {
	e.t.Helper()
	var buf bytes.Buffer
	if err := e.svc.FSM().Dump(&buf); err != nil {
		e.t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if !strings.HasPrefix(l, "meta ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

func (e *mailEnv) register(id, role string, caps ...string) {
	e.t.Helper()
	if _, err := e.client.RegisterAgent(context.Background(), api.RegisterAgentCommand{ID: id, Role: role, Capabilities: caps}); err != nil {
		e.t.Fatalf("register %s: %v", id, err)
	}
}

func (e *mailEnv) send(m *api.Message) *api.SendResponse {
	e.t.Helper()
	m.Normalize(time.Now())
	res, err := e.client.Send(context.Background(), m)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return res
}

func TestMailboxAgentsEndpoints(t *testing.T) {
	e := newMailEnv(t)
	ctx := context.Background()
	var a api.Agent
	wantOK(t, e.do("POST", "/v1/agents", `{"id":"alice","role":"reviewer","capabilities":["go","review"],"description":"reads diffs","node":"n1"}`), &a)
	if a.ID != "alice" || a.Role != "reviewer" || !slices.Equal(a.Capabilities, []string{"go", "review"}) || a.Node != "n1" || a.Index == 0 {
		t.Errorf("register answered %+v", a)
	}
	e.register("bob", "reviewer", "review")
	e.register("carol", "", "go") // role defaults to agent

	got, err := e.client.Agent(ctx, "carol", api.Strong)
	if err != nil || got.Role != api.DefaultRole {
		t.Errorf("Agent(carol) = %+v, %v", got, err)
	}
	for _, tt := range []struct {
		q    api.AgentQuery
		want []string
		more bool
	}{
		{api.AgentQuery{}, []string{"alice", "bob", "carol"}, false},
		{api.AgentQuery{Role: "reviewer"}, []string{"alice", "bob"}, false},
		{api.AgentQuery{Capability: "go"}, []string{"alice", "carol"}, false},
		{api.AgentQuery{Role: "reviewer", Capability: "go"}, []string{"alice"}, false},
		{api.AgentQuery{After: "alice", Limit: 1}, []string{"bob"}, true},
	} {
		p, err := e.client.Agents(ctx, tt.q, api.Local)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range p.Agents {
			ids = append(ids, a.ID)
		}
		if !slices.Equal(ids, tt.want) || p.HasMore != tt.more {
			t.Errorf("Agents(%+v) = %v more %t, want %v %t", tt.q, ids, p.HasMore, tt.want, tt.more)
		}
	}
	roles, err := e.client.Roles(ctx, api.Local)
	if err != nil || len(roles) != 2 || roles["reviewer"] != 2 || roles["agent"] != 1 {
		t.Errorf("Roles = %v, %v", roles, err)
	}
	removed, err := e.client.UnregisterAgent(ctx, "bob")
	if err != nil || removed.ID != "bob" {
		t.Errorf("UnregisterAgent = %+v, %v", removed, err)
	}
	msg := wantError(t, e.do("GET", "/v1/agents/bob", ""), http.StatusNotFound, api.CodeNotFound)
	if !strings.Contains(msg, "bob") {
		t.Errorf("404 message %q does not name bob", msg)
	}
	if _, err := e.client.UnregisterAgent(ctx, "bob"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unregister twice = %v, want not found", err)
	}
}

func TestMailboxInboxEndpoints(t *testing.T) {
	e := newMailEnv(t)
	ctx := context.Background()
	e.register("alice", "reviewer")
	e.register("bob", "reviewer")
	var sent []*api.SendResponse
	for i, p := range []string{"urgent", "normal", "urgent", "low"} {
		m := msg("", "codex", "review", fmt.Sprintf("review %d", i), "role:reviewer")
		m.Priority = api.Priority(p)
		if i == 3 {
			m.From, m.Type = "claude", "status"
		}
		sent = append(sent, e.send(m))
	}

	page, err := e.client.Inbox(ctx, "alice", api.InboxQuery{}, api.Strong)
	if err != nil || len(page.Messages) != 4 || page.Agent != "alice" || page.HasMore {
		t.Fatalf("inbox = %+v, %v", page, err)
	}
	if m := page.Messages[0]; m.ID != sent[0].ID || m.Read || !slices.Equal(m.Recipients, []string{"alice", "bob"}) || !slices.Equal(m.To, []string{"role:reviewer"}) {
		t.Errorf("first entry = %+v", m)
	}
	// The wire shape: a message object with "read" beside its fields.
	var raw struct {
		Messages []map[string]any `json:"messages"`
	}
	wantOK(t, e.do("GET", "/v1/agents/alice/inbox?priority=urgent&unread=true", ""), &raw)
	if len(raw.Messages) != 2 || raw.Messages[0]["read"] != false || raw.Messages[0]["id"] != sent[0].ID {
		t.Errorf("urgent unread = %v", raw.Messages)
	}
	for _, tt := range []struct {
		path string
		want []string
	}{
		{"?from=claude", []string{sent[3].ID}},
		{"?type=status", []string{sent[3].ID}},
		{"?after=" + fmt.Sprint(sent[1].Seq), []string{sent[2].ID, sent[3].ID}},
		{"?limit=1", []string{sent[0].ID}},
	} {
		var p api.InboxPage
		wantOK(t, e.do("GET", "/v1/agents/alice/inbox"+tt.path, ""), &p)
		var ids []string
		for _, m := range p.Messages {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("inbox%s = %v, want %v", tt.path, ids, tt.want)
		}
	}

	c, err := e.client.InboxCounts(ctx, "alice", api.Local)
	if err != nil || c.Total != 4 || c.Unread != 4 || c.UnreadByPriority["urgent"] != 2 || c.UnreadByPriority["low"] != 1 || c.UnreadByPriority["high"] != 0 {
		t.Errorf("counts = %+v, %v", c, err)
	}
	res, err := e.client.MarkRead(ctx, "alice", sent[0].ID, 0)
	if err != nil || res.Marked != 1 || res.Counts.Unread != 3 || res.Counts.UnreadByPriority["urgent"] != 1 {
		t.Errorf("mark one = %+v, %v", res, err)
	}
	var mr api.MarkReadResult
	wantOK(t, e.do("POST", "/v1/agents/alice/read", fmt.Sprintf(`{"upto":%d}`, sent[2].Seq)), &mr)
	if mr.Marked != 2 || mr.Counts.Unread != 1 || mr.Counts.ReadUpto != sent[2].Seq {
		t.Errorf("mark upto = %+v", mr)
	}
	if c, _ := e.client.InboxCounts(ctx, "bob", api.Local); c.Unread != 4 {
		t.Errorf("bob's unread = %d after alice read, want 4", c.Unread)
	}

	// Receipts and threads.
	rc, err := e.client.Receipts(ctx, sent[0].ID, api.Local)
	if err != nil || len(rc.Receipts) != 2 || rc.Receipts[0].Agent != "alice" || rc.Receipts[0].State != api.ReceiptRead ||
		rc.Receipts[1].State != api.ReceiptDelivered || rc.From != "codex" {
		t.Errorf("receipts = %+v, %v", rc, err)
	}
	reply := msg("", "bob", "review", "done", "codex")
	reply.InReplyTo = sent[0].ID
	rr := e.send(reply)
	rc, _ = e.client.Receipts(ctx, sent[0].ID, api.Local)
	if rc.Receipts[1].State != api.ReceiptAnswered || rc.Receipts[1].ReplyID != rr.ID {
		t.Errorf("bob's receipt after the reply = %+v", rc.Receipts[1])
	}
	th, err := e.client.Thread(ctx, rr.ID, 0, 0, api.Local)
	if err != nil || th.ThreadID != sent[0].ID || len(th.Messages) != 2 || th.Messages[1].ID != rr.ID || th.Messages[1].ThreadID != sent[0].ID {
		t.Errorf("thread = %+v, %v", th, err)
	}
}

// TestMailboxBadInput: each bad request answers a clear 4xx naming what to
// fix, and changes nothing.
func TestMailboxBadInput(t *testing.T) {
	e := newMailEnv(t)
	e.register("alice", "reviewer")
	first := e.send(msg("", "codex", "review", "hello", "alice"))
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		want                     string
	}{
		{"register bad id", "POST", "/v1/agents", `{"id":"Alice"}`, 400, api.CodeInvalid, "id: must match"},
		{"register without id", "POST", "/v1/agents", `{"role":"x"}`, 400, api.CodeInvalid, "id: required"},
		{"register bad capability", "POST", "/v1/agents", `{"id":"x","capabilities":["ok","No Way"]}`, 400, api.CodeInvalid, "capabilities[1]"},
		{"register long description", "POST", "/v1/agents", `{"id":"x","description":"` + strings.Repeat("d", api.MaxDescriptionLen+1) + `"}`, 400, api.CodeInvalid, "description: 4097 bytes, at most 4096"},
		{"register unknown field", "POST", "/v1/agents", `{"id":"x","rol":"y"}`, 400, api.CodeUnknownField, "rol"},
		{"unregister unknown", "DELETE", "/v1/agents/zed", "", 404, api.CodeNotFound, "agent zed"},
		{"agent bad id", "GET", "/v1/agents/Zed", "", 400, api.CodeInvalid, `agent: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Zed")`},
		{"agents bad role", "GET", "/v1/agents?role=Role", "", 400, api.CodeInvalid, "role: must match"},
		{"agents bad limit", "GET", "/v1/agents?limit=0", "", 400, api.CodeBadRequest, "limit"},
		{"agents unknown param", "GET", "/v1/agents?rol=x", "", 400, api.CodeBadRequest, `unknown query parameter "rol"`},
		{"inbox unknown agent", "GET", "/v1/agents/zed/inbox", "", 404, api.CodeNotFound, "agent zed: not registered"},
		{"inbox bad priority", "GET", "/v1/agents/alice/inbox?priority=asap", "", 400, api.CodeInvalid, "priority: must be one of"},
		{"inbox bad unread", "GET", "/v1/agents/alice/inbox?unread=maybe", "", 400, api.CodeBadRequest, "unread"},
		{"inbox bad after", "GET", "/v1/agents/alice/inbox?after=-1", "", 400, api.CodeBadRequest, "after"},
		{"inbox limit too big", "GET", "/v1/agents/alice/inbox?limit=1001", "", 400, api.CodeBadRequest, "limit"},
		{"inbox misspelt filter", "GET", "/v1/agents/alice/inbox?prority=urgent", "", 400, api.CodeBadRequest, `"prority"`},
		{"counts unknown agent", "GET", "/v1/agents/zed/inbox/counts", "", 404, api.CodeNotFound, "agent zed"},
		{"read unknown agent", "POST", "/v1/agents/zed/read", `{"upto":5}`, 404, api.CodeNotFound, "agent zed"},
		{"read unknown message", "POST", "/v1/agents/alice/read", `{"id":"msg-nope"}`, 404, api.CodeNotFound, "msg-nope"},
		{"read nothing", "POST", "/v1/agents/alice/read", `{}`, 400, api.CodeInvalid, "give a message id, or upto"},
		{"read both", "POST", "/v1/agents/alice/read", `{"id":"` + first.ID + `","upto":3}`, 400, api.CodeInvalid, "not both"},
		{"read agent in body", "POST", "/v1/agents/alice/read", `{"agent":"bob","upto":3}`, 400, api.CodeUnknownField, "agent"},
		{"receipt state bad state", "PUT", "/v1/agents/alice/receipts/" + first.ID, `{"state":"read"}`, 400, api.CodeInvalid, "state: \"read\": want queued, delivered or interrupted"},
		{"receipt state not in the inbox", "PUT", "/v1/agents/codex/receipts/" + first.ID, `{"state":"queued"}`, 404, api.CodeNotFound, "is not in codex's inbox"},
		{"receipt state unknown message", "PUT", "/v1/agents/alice/receipts/msg-nope", `{"state":"queued"}`, 404, api.CodeNotFound, "msg-nope"},
		{"receipt state unknown field", "PUT", "/v1/agents/alice/receipts/" + first.ID, `{"state":"queued","at":1}`, 400, api.CodeUnknownField, "at"},
		{"thread unknown", "GET", "/v1/threads/msg-nope", "", 404, api.CodeNotFound, "msg-nope"},
		{"thread bad limit", "GET", "/v1/threads/" + first.ID + "?limit=x", "", 400, api.CodeBadRequest, "limit"},
		{"receipts unknown", "GET", "/v1/messages/msg-nope/receipts", "", 404, api.CodeNotFound, "msg-nope"},
		{"send bad glob", "POST", "/v1/messages", `{"from":"codex","channel":"c","to":["eng[x"],"content":{"text":"x"}}`, 400, api.CodeInvalid, `to[0]: "eng[x" is not a valid glob`},
		{"send role nobody", "POST", "/v1/messages", `{"from":"codex","channel":"c","to":["role:nobody"],"content":{"text":"x"}}`, 404, api.CodeNotFound, `to: role "nobody" (no agent has it): not found; register`},
		{"send glob nobody", "POST", "/v1/messages", `{"from":"codex","channel":"c","to":["x*"],"content":{"text":"x"}}`, 400, api.CodeInvalid, `"x*" matches no agent`},
		{"send oversized title", "POST", "/v1/messages", `{"from":"codex","channel":"c","to":["alice"],"title":"` + strings.Repeat("t", api.MaxTitleLen+1) + `","content":{"text":"x"}}`, 400, api.CodeInvalid, "title: 1025 bytes, at most 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.dump()
			msg := wantError(t, e.do(tt.method, tt.path, tt.body), tt.status, tt.code)
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message %q lacks %q", msg, tt.want)
			}
			if e.dump() != before {
				t.Errorf("the refused request changed the state")
			}
		})
	}
}

// Every name a request carries (path, query or body) is refused in the
// one wording of api.NameError: the field, the rule and the value given.
func TestBadNamesQuoteTheRuleAndTheValue(t *testing.T) {
	e := newMailEnv(t)
	rule := func(field, value string) string {
		return field + ": must match " + api.NamePattern + " (got " + strconv.Quote(value) + ")"
	}
	for _, tt := range []struct {
		method, path, body string
		code, want         string
	}{
		{"GET", "/v1/agents/Zed", "", api.CodeInvalid, rule("agent", "Zed")},
		{"GET", "/v1/agents/Zed/cursor", "", api.CodeInvalid, rule("id", "Zed")},
		{"GET", "/v1/stream?agent=Zed", "", api.CodeInvalid, rule("agent", "Zed")},
		{"GET", "/v1/stream?channel=C%20D", "", api.CodeInvalid, rule("channel", "C D")},
		{"POST", "/v1/channels/Bad/trim", "", api.CodeInvalid, rule("channel", "Bad")},
		{"GET", "/v1/overview?channel=Bad", "", api.CodeBadRequest, rule("channel", "Bad")},
		{"POST", "/v1/rules/check", `{"from":"a","to":"B B"}`, api.CodeInvalid, rule("to", "B B")},
		{"POST", "/v1/cluster/join", `{"node_id":"N1","raft_addr":"127.0.0.1:7071","api_addr":"127.0.0.1:7070"}`, api.CodeInvalid, rule("node_id", "N1")},
		{"PUT", "/v1/presence/Zed", `{"state":"AWAKE"}`, api.CodeInvalid, rule("agent_id", "Zed")},
		{"PUT", "/v1/presence/alice", `{"state":"AWAKE","node":"N2"}`, api.CodeInvalid, rule("node", "N2")},
		{"PUT", "/v1/presence/alice", `{"state":"AWAKE","channel":"Dev"}`, api.CodeInvalid, rule("channel", "Dev")},
		{"POST", "/v1/agents/Zed/interrupt", `{"from":"master","reason":"x"}`, api.CodeInvalid, rule("id", "Zed")},
	} {
		msg := wantError(t, e.do(tt.method, tt.path, tt.body), http.StatusBadRequest, tt.code)
		if !strings.Contains(msg, tt.want) {
			t.Errorf("%s %s: %q, want %q", tt.method, tt.path, msg, tt.want)
		}
	}
}

func TestMailboxStrictSendersAndBlocked(t *testing.T) {
	e := newMailEnv(t)
	ctx := context.Background()
	e.register("tina", "tester")
	e.register("rex", "reviewer")
	e.register("dev", "developer")

	// strict_senders: an unknown sender is refused with 403 naming it.
	if _, err := e.client.SetConfig(ctx, "strict_senders", true); err != nil {
		t.Fatal(err)
	}
	msg403 := wantError(t, e.do("POST", "/v1/messages", `{"from":"mallory","channel":"c","to":["rex"],"content":{"text":"x"}}`),
		http.StatusForbidden, api.CodeForbidden)
	if !strings.Contains(msg403, "mallory") || !strings.Contains(msg403, "strict_senders") {
		t.Errorf("403 message %q does not name the sender and the setting", msg403)
	}
	if _, err := e.client.Agent(ctx, "mallory", api.Local); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a refused sender got registered: %v", err)
	}

	// Rules: a partly blocked send answers the blocked list; a fully
	// blocked one is a 403 with the reason.
	if _, err := e.svc.ApplyCommand(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden: []rules.ForbiddenRule{{From: "role:tester", To: "role:reviewer", Reason: "testers go through the developer"}},
	}}); err != nil {
		t.Fatal(err)
	}
	var res api.SendResponse
	wantOK(t, e.do("POST", "/v1/messages", `{"from":"tina","channel":"c","to":["rex","dev"],"content":{"text":"results"}}`), &res)
	if want := []api.BlockedRecipient{{ID: "rex", Reason: "testers go through the developer"}}; !slices.Equal(res.Blocked, want) {
		t.Errorf("blocked = %+v, want %+v", res.Blocked, want)
	}
	msg403 = wantError(t, e.do("POST", "/v1/messages", `{"from":"tina","channel":"c","to":["rex"],"content":{"text":"again"}}`),
		http.StatusForbidden, api.CodeForbidden)
	if !strings.Contains(msg403, "testers go through the developer") {
		t.Errorf("403 message %q lacks the rule's reason", msg403)
	}
}

// order=newest pages an inbox backwards with before=; bad values are 400s
// naming the parameter. The summary serves counters and bulletin together.
func TestInboxNewestAndSummary(t *testing.T) {
	e := newMailEnv(t)
	e.register("alice", "reviewer")
	var seqs []uint64
	for i := range 3 {
		seqs = append(seqs, e.send(&api.Message{From: "bob", To: api.Recipients{"alice"}, Channel: "c", Content: api.Content{Text: fmt.Sprint(i)}}).Seq)
	}
	ctx := context.Background()
	page, err := e.client.Inbox(ctx, "alice", api.InboxQuery{Newest: true, Limit: 2}, api.Local)
	if err != nil || len(page.Messages) != 2 || page.Messages[0].Seq != seqs[2] || page.Messages[1].Seq != seqs[1] || !page.HasMore {
		t.Fatalf("newest page = %+v, %v", page, err)
	}
	page, err = e.client.Inbox(ctx, "alice", api.InboxQuery{Newest: true, Limit: 2, Before: page.NextBefore}, api.Local)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Seq != seqs[0] || page.HasMore {
		t.Fatalf("second newest page = %+v, %v", page, err)
	}
	for _, tc := range []struct{ query, code, field string }{
		{"order=sideways", api.CodeBadRequest, "order"},
		{"before=3", api.CodeInvalid, "before"},
		{"order=newest&before=x", api.CodeBadRequest, "before"},
	} {
		msg := wantError(t, e.do("GET", "/v1/agents/alice/inbox?"+tc.query, ""), http.StatusBadRequest, tc.code)
		if !strings.Contains(msg, tc.field) {
			t.Errorf("?%s: %q does not name %s", tc.query, msg, tc.field)
		}
	}

	sum, err := e.client.AgentSummary(ctx, "alice", api.Local)
	if err != nil || !sum.HasInbox || sum.Counts.Unread != 3 || sum.Agent != "alice" {
		t.Errorf("summary of alice = %+v, %v", sum, err)
	}
	sum, err = e.client.AgentSummary(ctx, "nobody", api.Local)
	if err != nil || sum.HasInbox || sum.Counts.Unread != 0 {
		t.Errorf("summary of an agent without an inbox = %+v, %v; want has_inbox false", sum, err)
	}
}

// TestReceiptStateRoute: a watcher's report moves the receipt the
// receipts route shows, through the client.
func TestReceiptStateRoute(t *testing.T) {
	e := newMailEnv(t)
	e.register("alice", "reviewer")
	m := e.send(msg("", "codex", "review", "hello", "alice"))
	var r api.Receipt
	wantOK(t, e.do("PUT", "/v1/agents/alice/receipts/"+m.ID, `{"state":"queued"}`), &r)
	if r.Agent != "alice" || r.State != api.ReceiptQueued || r.QueuedAt.IsZero() {
		t.Errorf("queued answered %+v", r)
	}
	var rc api.Receipts
	wantOK(t, e.do("GET", "/v1/messages/"+m.ID+"/receipts", ""), &rc)
	if len(rc.Receipts) != 1 || rc.Receipts[0].State != api.ReceiptQueued {
		t.Errorf("receipts after queued = %+v", rc)
	}
	wantOK(t, e.do("PUT", "/v1/agents/alice/receipts/"+m.ID, `{"state":"interrupted"}`), &r)
	if r.State != api.ReceiptInterrupted || r.TypedAt.IsZero() || !r.Reached(api.ReceiptDelivered) {
		t.Errorf("interrupted answered %+v", r)
	}
}
