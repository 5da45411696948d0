package transport_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

const validBody = `{"from":"alice","channel":"general","to":["bob"],"content":{"text":"hello"}}`

// bodyOfSize returns a valid send body of exactly n bytes (n ≥ 80).
func bodyOfSize(n int) string {
	const head, tail = `{"from":"alice","channel":"general","to":["bob"],"content":{"text":"`, `"}}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

func TestSendSuccess(t *testing.T) {
	// A clock outside UTC: the generated id must carry the UTC time.
	now := time.Date(2026, 11, 21, 11, 30, 0, 0, time.FixedZone("CET", 3600))
	genID := regexp.MustCompile(`^msg-20261121-103000-alice-[0-9a-f]{8}$`)
	cases := []struct {
		name  string
		body  string
		max   int64
		check func(t *testing.T, m *api.Message)
	}{
		{
			name: "defaults filled",
			body: validBody,
			check: func(t *testing.T, m *api.Message) {
				if !genID.MatchString(m.ID) {
					t.Errorf("generated id %q does not match %s", m.ID, genID)
				}
				if m.Priority != "normal" || m.Type != "chat" || m.Visibility != "public" {
					t.Errorf("priority/type/visibility = %q/%q/%q, want normal/chat/public", m.Priority, m.Type, m.Visibility)
				}
				if !slices.Equal(m.To, []string{"bob"}) || m.From != "alice" || m.Channel != "general" || m.Content.Text != "hello" {
					t.Errorf("stored %+v, want the fields sent", m)
				}
			},
		},
		{
			name: "to as a single string",
			body: `{"from":"alice","channel":"general","to":"bob","content":{"text":"hello"}}`,
			check: func(t *testing.T, m *api.Message) {
				if !slices.Equal(m.To, []string{"bob"}) {
					t.Errorf("to = %q, want [bob]", m.To)
				}
			},
		},
		{
			name: "client id and fields kept",
			body: `{"id":"msg_001","from":"alice","channel":"general","to":["bob","role:reviewer"],"type":"request","priority":"urgent",
				"content":{"text":"review"},"tags":["review"],"metadata":{ "k" : [1, 2] }}`,
			check: func(t *testing.T, m *api.Message) {
				if m.ID != "msg_001" || m.Type != "request" || m.Priority != "urgent" {
					t.Errorf("id/type/priority = %q/%q/%q, want msg_001/request/urgent", m.ID, m.Type, m.Priority)
				}
				if !slices.Equal(m.To, []string{"bob", "role:reviewer"}) || !slices.Equal(m.Tags, []string{"review"}) {
					t.Errorf("to %q tags %q", m.To, m.Tags)
				}
				if string(m.Metadata) != `{"k":[1,2]}` {
					t.Errorf("metadata %s, want it compacted", m.Metadata)
				}
			},
		},
		{
			name: "body exactly at the limit",
			body: bodyOfSize(512),
			max:  512,
			check: func(t *testing.T, m *api.Message) {
				if len(m.Content.Text) != 512-len(`{"from":"alice","channel":"general","to":["bob"],"content":{"text":""}}`) {
					t.Errorf("text of %d bytes stored", len(m.Content.Text))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := transporttest.New(t)
			// Entry 1: the agent "role:reviewer" resolves to; entry 2:
			// bob, whom the messages are to.
			if _, err := f.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "rita", Role: "reviewer"}); err != nil {
				t.Fatal(err)
			}
			f.Register(t, "bob")
			srv := serve(t, f, transport.ServerOptions{Now: func() time.Time { return now }, MaxMessageBytes: tc.max})
			r := do(t, "POST", srv.URL+"/v1/messages", tc.body, nil)
			var raw map[string]json.RawMessage
			wantOK(t, r, &raw)
			if got := keys(raw); !slices.Equal(got, []string{"id", "seq", "timestamp"}) {
				t.Fatalf("answer keys %v, want [id seq timestamp]: %s", got, r.body)
			}
			var res api.SendResponse
			if err := json.Unmarshal(r.body, &res); err != nil {
				t.Fatal(err)
			}
			if res.Seq != 3 {
				t.Errorf("seq %d, want 3", res.Seq)
			}
			if n := sendCalls(f); n != 1 {
				t.Fatalf("service saw %d sends, want 1", n)
			}
			m := f.StoredSeq(3)
			if m == nil {
				t.Fatal("nothing stored")
			}
			if res.ID != m.ID || !res.Timestamp.Equal(m.Timestamp) {
				t.Errorf("answer %+v, stored id %q timestamp %v", res, m.ID, m.Timestamp)
			}
			tc.check(t, m)
		})
	}
}

func TestSendSeqAndIdempotency(t *testing.T) {
	f := transporttest.New(t)
	base := f.Register(t, "bob")
	srv := serve(t, f, transport.ServerOptions{})
	send := func(body string) reply { return do(t, "POST", srv.URL+"/v1/messages", body, nil) }

	for n := uint64(1); n <= 3; n++ {
		var res api.SendResponse
		wantOK(t, send(fmt.Sprintf(`{"id":"m%d","from":"alice","channel":"general","to":"bob","content":{"text":"n"}}`, n)), &res)
		if want := base + n; res.Seq != want || res.ID != fmt.Sprintf("m%d", n) {
			t.Fatalf("send %d answered %+v", want, res)
		}
	}
	// A retry of the same send: same seq, nothing new stored.
	var again api.SendResponse
	wantOK(t, send(`{"id":"m2","from":"alice","channel":"general","to":"bob","content":{"text":"n"}}`), &again)
	if again.Seq != base+2 || again.ID != "m2" {
		t.Errorf("retry answered %+v, want m2 at seq %d", again, base+2)
	}
	// The same id with other content: 409.
	msg := wantError(t, send(`{"id":"m2","from":"alice","channel":"general","to":"bob","content":{"text":"other"}}`), http.StatusConflict, api.CodeConflict)
	if !strings.Contains(msg, "m2") {
		t.Errorf("conflict message %q does not name the id", msg)
	}
	if n := f.NumStored(); n != 3 {
		t.Errorf("%d messages stored, want 3", n)
	}
}

func TestSendRejected(t *testing.T) {
	const overDefault = api.DefaultMaxBytes + 1
	cases := []struct {
		name    string
		body    string
		max     int64
		status  int
		code    string
		message string // a substring the message must hold
		prefix  string // the message must start with it (the field)
	}{
		{name: "malformed JSON", body: `{"from":`, status: 400, code: "bad_request", message: "malformed JSON"},
		{name: "not JSON", body: `hello`, status: 400, code: "bad_request", message: "malformed JSON"},
		{name: "array", body: `[1,2]`, status: 400, code: "bad_request"},
		{name: "to of the wrong type", body: `{"from":"alice","channel":"general","to":5,"content":{"text":"x"}}`, status: 400, code: "bad_request", message: "to"},
		{name: "unknown field", body: `{"from":"alice","channel":"general","to":["bob"],"content":{"text":"x"},"bogus":1}`, status: 400, code: "unknown_field", message: `"bogus"`},
		{name: "unknown nested field", body: `{"from":"alice","channel":"general","to":["bob"],"content":{"text":"x","colour":"red"}}`, status: 400, code: "unknown_field", message: `"colour"`},
		{name: "trailing object", body: validBody + `{}`, status: 400, code: "bad_request", message: "trailing"},
		{name: "trailing garbage", body: validBody + ` x`, status: 400, code: "bad_request", message: "trailing"},
		{name: "trailing brace", body: validBody + `}`, status: 400, code: "bad_request", message: "trailing"},
		{name: "trailing bracket", body: validBody + "\n]", status: 400, code: "bad_request", message: "trailing"},
		{name: "trailing half object", body: validBody + `{"a":`, status: 400, code: "bad_request", message: "trailing"},
		{name: "empty body", body: ``, status: 400, code: "bad_request", message: "empty body"},
		{name: "white space only", body: " \n\t", status: 400, code: "bad_request", message: "empty body"},
		{name: "missing from", body: `{"channel":"general","to":["bob"],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "from:"},
		{name: "missing from with id", body: `{"id":"m1","channel":"general","to":["bob"],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "from:"},
		{name: "bad from", body: `{"from":"Bad Name","channel":"general","to":["bob"],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "from:"},
		{name: "missing to", body: `{"from":"alice","channel":"general","content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "to:"},
		{name: "empty to", body: `{"from":"alice","channel":"general","to":[],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "to:"},
		{name: "bad recipient", body: `{"from":"alice","channel":"general","to":["ok","NO WAY"],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "to[1]:"},
		{name: "missing channel", body: `{"from":"alice","to":["bob"],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "channel:"},
		{name: "missing content", body: `{"from":"alice","channel":"general","to":["bob"]}`, status: 400, code: "invalid", prefix: "content.text:"},
		{name: "blank content.text", body: `{"from":"alice","channel":"general","to":["bob"],"content":{"text":"  \n"}}`, status: 400, code: "invalid", prefix: "content.text:"},
		{name: "seq set", body: `{"seq":7,"from":"alice","channel":"general","to":["bob"],"content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "seq:"},
		{name: "bad priority", body: `{"from":"alice","channel":"general","to":["bob"],"priority":"asap","content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "priority:"},
		{name: "null body", body: `null`, status: 400, code: "invalid", prefix: "from:"},
		// A body with a seed's marker field is mapped as that dialect:
		// its refusals name the field too.
		{name: "dialect without a sender", body: `{"session_id":"general","to":"bob","content":{"text":"x"}}`, status: 400, code: "invalid", prefix: "from:"},
		{name: "dialect with a bad content", body: `{"session_id":"general","from":"a","to":"b","content":7}`, status: 400, code: "invalid", prefix: "content:"},
		{name: "dialect with a bad timestamp", body: `{"subject":"s","from":"a","to":"b","channel":"c","body":"x","timestamp":"soon"}`, status: 400, code: "invalid", prefix: "timestamp:"},
		{name: "dialect, trailing data", body: `{"session_id":"general","from":"a","to":"b","content":"x"} x`, status: 400, code: "bad_request", message: "trailing"},
		{name: "over a small limit", body: bodyOfSize(513), max: 512, status: 413, code: "too_large", message: "512"},
		{name: "over the default limit", body: bodyOfSize(overDefault), status: 413, code: "too_large", message: fmt.Sprint(api.DefaultMaxBytes)},
		{name: "trailing data over the limit", body: bodyOfSize(500) + strings.Repeat(" ", 20) + "{}", max: 512, status: 413, code: "too_large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := transporttest.New(t)
			srv := serve(t, f, transport.ServerOptions{MaxMessageBytes: tc.max})
			msg := wantError(t, do(t, "POST", srv.URL+"/v1/messages", tc.body, nil), tc.status, tc.code)
			if !strings.Contains(msg, tc.message) {
				t.Errorf("message %q does not contain %q", msg, tc.message)
			}
			if !strings.HasPrefix(msg, tc.prefix) {
				t.Errorf("message %q does not start with %q", msg, tc.prefix)
			}
			if n := f.Count(); n != 0 {
				t.Errorf("the service got %d calls for a rejected send, want 0", n)
			}
		})
	}
}

func TestSendServiceErrors(t *testing.T) {
	unknown := fmt.Errorf("cluster: send msg-1: leader lost after 3 tries: %w", api.ErrOutcomeUnknown)
	cases := []struct {
		name    string
		err     error
		status  int
		code    string
		message string // the exact message, when set
	}{
		{name: "no leader", err: fmt.Errorf("cluster: %w", api.ErrNoLeader), status: 503, code: "no_leader", message: "cluster: no leader"},
		{name: "outcome unknown", err: unknown, status: 503, code: "outcome_unknown", message: unknown.Error()},
		{name: "outcome unknown beats no leader", err: fmt.Errorf("%w: %w", api.ErrOutcomeUnknown, api.ErrNoLeader), status: 503, code: "outcome_unknown"},
		{name: "not leader", err: api.ErrNotLeader, status: 503, code: "not_leader", message: "not the leader"},
		{name: "not ready", err: fmt.Errorf("catching up: %w", api.ErrNotReady), status: 503, code: "not_ready"},
		{name: "conflict", err: fmt.Errorf("fsm: apply send: %w", api.ErrConflict), status: 409, code: "conflict"},
		{name: "field error", err: fmt.Errorf("fsm: apply send: %w", &api.FieldError{Field: "to[0]", Reason: "no such agent"}), status: 400, code: "invalid", message: "to[0]: no such agent"},
		{name: "not found", err: api.ErrNotFound, status: 404, code: "not_found"},
		{name: "not found, in fsm's words", err: fmt.Errorf("fsm: apply send: %w", fsm.MessageNotFound("msg-x")), status: 404, code: "not_found", message: "message msg-x: not found"},
		{name: "relayed APIError", err: &api.APIError{Status: 409, Code: "conflict", Message: "x"}, status: 409, code: "conflict", message: "x"},
		{name: "relayed APIError wrapped", err: fmt.Errorf("forward to n2: %w", &api.APIError{Status: 503, Code: "no_leader", Message: "leader said so"}), status: 503, code: "no_leader", message: "leader said so"},
		{name: "relayed APIError without status", err: &api.APIError{Code: "not_found", Message: "gone"}, status: 404, code: "not_found", message: "gone"},
		{name: "APIError of an unknown code without status", err: &api.APIError{Code: "teapot", Message: "short and stout"}, status: 500, code: "teapot", message: "short and stout"},
		{name: "other error", err: errors.New("disk on fire"), status: 500, code: "internal", message: "disk on fire"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := transporttest.New(t)
			f.Fail("Apply", tc.err)
			srv := serve(t, f, transport.ServerOptions{})
			msg := wantError(t, do(t, "POST", srv.URL+"/v1/messages", validBody, nil), tc.status, tc.code)
			if tc.message != "" && msg != tc.message {
				t.Errorf("message %q, want %q", msg, tc.message)
			}
			if n := sendCalls(f); n != 1 {
				t.Errorf("service saw %d sends, want 1", n)
			}
		})
	}
}

func TestGetMessage(t *testing.T) {
	f := transporttest.New(t)
	stored := store(t, f, msg("msg-20261121-103000-alice-0a1b2c3d", "alice", "general", "hi", "bob"))
	srv := serve(t, f, transport.ServerOptions{})

	t.Run("found", func(t *testing.T) {
		var m api.Message
		wantOK(t, do(t, "GET", srv.URL+"/v1/messages/"+stored.ID, "", nil), &m)
		if m.ID != stored.ID || m.Seq != stored.Seq || m.Content.Text != "hi" || !m.Timestamp.Equal(stored.Timestamp) {
			t.Errorf("got %+v, want the stored message %+v", m, stored)
		}
		c := f.CallsTo("Linearize")
		if len(c) == 0 {
			t.Fatal("service not called")
		}
		if last := c[len(c)-1]; last.Cons != api.Local {
			t.Errorf("read linearized with %+v, want local", last)
		}
	})
	t.Run("strong", func(t *testing.T) {
		wantOK(t, do(t, "GET", srv.URL+"/v1/messages/"+stored.ID+"?consistency=strong", "", nil), nil)
		c := f.CallsTo("Linearize")
		if len(c) == 0 {
			t.Fatal("service not called")
		}
		if last := c[len(c)-1]; last.Cons != api.Strong {
			t.Errorf("consistency %q reached the service, want strong", last.Cons)
		}
	})
	t.Run("not found", func(t *testing.T) {
		msg := wantError(t, do(t, "GET", srv.URL+"/v1/messages/msg_404", "", nil), 404, "not_found")
		if !strings.Contains(msg, "msg_404") {
			t.Errorf("message %q does not name the id", msg)
		}
	})
	t.Run("bad consistency", func(t *testing.T) {
		before := f.Count()
		msg := wantError(t, do(t, "GET", srv.URL+"/v1/messages/"+stored.ID+"?consistency=bogus", "", nil), 400, "bad_request")
		if !strings.Contains(msg, "bogus") {
			t.Errorf("message %q does not name the value", msg)
		}
		if after := f.Count(); after != before {
			t.Errorf("service called for a bad request")
		}
	})
	t.Run("no leader for a strong read", func(t *testing.T) {
		f.Fail("Linearize", api.ErrNoLeader)
		defer f.Fail("Linearize", nil)
		wantError(t, do(t, "GET", srv.URL+"/v1/messages/"+stored.ID+"?consistency=strong", "", nil), 503, "no_leader")
	})
}

func TestChannels(t *testing.T) {
	f := transporttest.New(t)
	for i, ch := range []string{"general", "ops", "general"} {
		store(t, f, msg(fmt.Sprintf("m%d", i), "alice", ch, "x", "bob"))
	}
	srv := serve(t, f, transport.ServerOptions{})
	var got api.ChannelsResponse
	wantOK(t, do(t, "GET", srv.URL+"/v1/channels", "", nil), &got)
	want := []api.ChannelInfo{{Name: "general", Count: 2, FirstSeq: 1, LastSeq: 3}, {Name: "ops", Count: 1, FirstSeq: 2, LastSeq: 2}}
	if !slices.Equal(got.Channels, want) {
		t.Errorf("channels %+v, want %+v", got.Channels, want)
	}

	wantOK(t, do(t, "GET", srv.URL+"/v1/channels?consistency=strong", "", nil), nil)
	c := f.CallsTo("Linearize")
	if len(c) != 2 || c[0].Cons != api.Local || c[1].Cons != api.Strong {
		t.Errorf("service calls %+v, want local then strong", c)
	}
	wantError(t, do(t, "GET", srv.URL+"/v1/channels?consistency=eventual", "", nil), 400, "bad_request")
	if n := f.Count(); n != 2 {
		t.Errorf("service got %d calls, want 2: the bad request must not reach it", n)
	}
}

func TestChannelMessages(t *testing.T) {
	f := transporttest.New(t)
	for i := range 5 {
		store(t, f, msg(fmt.Sprintf("m%d", i+1), "alice", "general", "x", "bob"))
	}
	b, pages := recordPages(f)
	srv := serve(t, b, transport.ServerOptions{})
	cases := []struct {
		name      string
		query     string
		after     uint64
		limit     int
		cons      api.Consistency
		seqs      []uint64
		hasMore   bool
		errStatus int
		errWords  string
	}{
		{name: "defaults", query: "", after: 0, limit: api.DefaultPageLimit, cons: api.Local, seqs: []uint64{1, 2, 3, 4, 5}},
		{name: "after and limit", query: "after=2&limit=2", after: 2, limit: 2, cons: api.Local, seqs: []uint64{3, 4}, hasMore: true},
		{name: "last page", query: "after=3&limit=2", after: 3, limit: 2, cons: api.Local, seqs: []uint64{4, 5}},
		{name: "max limit", query: "limit=1000", limit: 1000, cons: api.Local, seqs: []uint64{1, 2, 3, 4, 5}},
		{name: "strong", query: "consistency=strong&limit=1", limit: 1, cons: api.Strong, seqs: []uint64{1}, hasMore: true},
		{name: "local", query: "consistency=local", limit: api.DefaultPageLimit, cons: api.Local, seqs: []uint64{1, 2, 3, 4, 5}},
		{name: "limit 0", query: "limit=0", errStatus: 400, errWords: "limit"},
		{name: "limit 1001", query: "limit=1001", errStatus: 400, errWords: "limit"},
		{name: "negative limit", query: "limit=-1", errStatus: 400, errWords: "limit"},
		{name: "after abc", query: "after=abc", errStatus: 400, errWords: "after"},
		{name: "negative after", query: "after=-1", errStatus: 400, errWords: "after"},
		{name: "consistency bogus", query: "consistency=bogus", errStatus: 400, errWords: "consistency"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, linBefore := len(pages()), len(f.CallsTo("Linearize"))
			r := do(t, "GET", srv.URL+"/v1/channels/general/messages?"+tc.query, "", nil)
			calls, lin := pages(), f.CallsTo("Linearize")
			if tc.errStatus != 0 {
				msg := wantError(t, r, tc.errStatus, "bad_request")
				if !strings.Contains(msg, tc.errWords) {
					t.Errorf("message %q does not name %q", msg, tc.errWords)
				}
				if len(calls) != before || len(lin) != linBefore {
					t.Errorf("a bad request reached the service")
				}
				return
			}
			var page api.Page
			wantOK(t, r, &page)
			if len(calls) != before+1 || len(lin) != linBefore+1 {
				t.Fatalf("state read %d times after %d Linearize calls, want 1 and 1", len(calls)-before, len(lin)-linBefore)
			}
			c := calls[len(calls)-1]
			if c.Channel != "general" || c.After != tc.after || c.Limit != tc.limit || lin[len(lin)-1].Cons != tc.cons {
				t.Errorf("state read %+v at %s, want general after %d limit %d %s", c, lin[len(lin)-1].Cons, tc.after, tc.limit, tc.cons)
			}
			var seqs []uint64
			for _, m := range page.Messages {
				seqs = append(seqs, m.Seq)
			}
			if !slices.Equal(seqs, tc.seqs) || page.HasMore != tc.hasMore {
				t.Errorf("page seqs %v has_more %v, want %v %v", seqs, page.HasMore, tc.seqs, tc.hasMore)
			}
		})
	}
}

func TestClusterStatus(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	var st api.Status
	wantOK(t, do(t, "GET", srv.URL+"/v1/cluster/status", "", nil), &st)
	want, _ := f.Status(t.Context())
	if st.NodeID != want.NodeID || st.State != want.State || st.Term != want.Term || st.LeaderAPIAddr != want.LeaderAPIAddr ||
		st.AppliedIndex != want.AppliedIndex || !slices.Equal(st.Voters, want.Voters) {
		t.Errorf("status %+v, want %+v", st, want)
	}
	f.Fail("Status", errors.New("raft is shut down"))
	wantError(t, do(t, "GET", srv.URL+"/v1/cluster/status", "", nil), 500, "internal")
}

func TestJoin(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		svcErr error
		status int
		code   string
		prefix string
	}{
		{name: "ok", body: `{"node_id":"n4","raft_addr":"127.0.0.1:8004","api_addr":"127.0.0.1:7004"}`, status: 200},
		{name: "missing node_id", body: `{"raft_addr":"127.0.0.1:8004","api_addr":"127.0.0.1:7004"}`, status: 400, code: "invalid", prefix: "node_id:"},
		{name: "missing raft_addr", body: `{"node_id":"n4","api_addr":"127.0.0.1:7004"}`, status: 400, code: "invalid", prefix: "raft_addr:"},
		{name: "missing api_addr", body: `{"node_id":"n4","raft_addr":"127.0.0.1:8004"}`, status: 400, code: "invalid", prefix: "api_addr:"},
		{name: "bad node_id", body: `{"node_id":"Node 4","raft_addr":"127.0.0.1:8004","api_addr":"127.0.0.1:7004"}`, status: 400, code: "invalid", prefix: "node_id:"},
		{name: "raft_addr not host:port", body: `{"node_id":"n4","raft_addr":"127.0.0.1","api_addr":"127.0.0.1:7004"}`, status: 400, code: "invalid", prefix: "raft_addr:"},
		{name: "raft_addr port 0", body: `{"node_id":"n4","raft_addr":"127.0.0.1:0","api_addr":"127.0.0.1:7004"}`, status: 400, code: "invalid", prefix: "raft_addr:"},
		{name: "raft_addr port out of range", body: `{"node_id":"n4","raft_addr":"127.0.0.1:65536","api_addr":"127.0.0.1:7004"}`, status: 400, code: "invalid", prefix: "raft_addr:"},
		{name: "api_addr wildcard", body: `{"node_id":"n4","raft_addr":"127.0.0.1:8004","api_addr":"0.0.0.0:7004"}`, status: 400, code: "invalid", prefix: "api_addr:"},
		{name: "api_addr no host", body: `{"node_id":"n4","raft_addr":"127.0.0.1:8004","api_addr":":7004"}`, status: 400, code: "invalid", prefix: "api_addr:"},
		{name: "unknown field", body: `{"node_id":"n4","raft_addr":"a:1","api_addr":"a:2","voter":true}`, status: 400, code: "unknown_field", prefix: `unknown field "voter"`},
		{name: "empty body", body: ``, status: 400, code: "bad_request"},
		{name: "too large", body: `{"node_id":"` + strings.Repeat("n", 64<<10) + `"}`, status: 413, code: "too_large"},
		{name: "no leader", body: `{"node_id":"n4","raft_addr":"127.0.0.1:8004","api_addr":"127.0.0.1:7004"}`, svcErr: api.ErrNoLeader, status: 503, code: "no_leader"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := transporttest.New(t)
			f.Fail("Join", tc.svcErr)
			srv := serve(t, f, transport.ServerOptions{})
			r := do(t, "POST", srv.URL+"/v1/cluster/join", tc.body, nil)
			if tc.status == 200 {
				var got map[string]string
				wantOK(t, r, &got)
				if got["joined"] != "n4" {
					t.Errorf("answer %v, want joined n4", got)
				}
				want := api.JoinRequest{NodeID: "n4", RaftAddr: "127.0.0.1:8004", APIAddr: "127.0.0.1:7004"}
				if j := f.Joined(); len(j) != 1 || j[0] != want {
					t.Errorf("service joined %+v, want %+v", j, want)
				}
				return
			}
			msg := wantError(t, r, tc.status, tc.code)
			if !strings.HasPrefix(msg, tc.prefix) {
				t.Errorf("message %q does not start with %q", msg, tc.prefix)
			}
			wantCalls := 0
			if tc.svcErr != nil {
				wantCalls = 1
			}
			if n := f.Count(); n != wantCalls {
				t.Errorf("service got %d calls, want %d", n, wantCalls)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	var got map[string]string
	wantOK(t, do(t, "DELETE", srv.URL+"/v1/cluster/nodes/n3", "", nil), &got)
	if got["removed"] != "n3" || !slices.Equal(f.Removed(), []string{"n3"}) {
		t.Errorf("answer %v, service removed %v; want n3", got, f.Removed())
	}
	f.Fail("Remove", fmt.Errorf("node n9: %w", api.ErrNotFound))
	wantError(t, do(t, "DELETE", srv.URL+"/v1/cluster/nodes/n9", "", nil), 404, "not_found")
	f.Fail("Remove", api.ErrNotLeader)
	wantError(t, do(t, "DELETE", srv.URL+"/v1/cluster/nodes/n9", "", nil), 503, "not_leader")
}

func TestSnapshot(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	var got api.SnapshotResponse
	wantOK(t, do(t, "POST", srv.URL+"/v1/cluster/snapshot", "", nil), &got)
	want := api.SnapshotResponse{NodeID: "n1", ID: "3-42-1700000000000", Index: 42, Term: 3}
	if got != want {
		t.Errorf("snapshot %+v, want %+v", got, want)
	}
	f.Fail("Snapshot", errors.New("nothing new to snapshot"))
	msg := wantError(t, do(t, "POST", srv.URL+"/v1/cluster/snapshot", "", nil), 500, "internal")
	if msg != "nothing new to snapshot" {
		t.Errorf("message %q", msg)
	}
}

func TestTransferLeadership(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		to     string // what the service must see
		leader string
		status int
		code   string
	}{
		{name: "no body", body: "", to: "", leader: "n2", status: 200},
		{name: "empty object", body: `{}`, to: "", leader: "n2", status: 200},
		{name: "to a node", body: `{"node_id":"n3"}`, to: "n3", leader: "n3", status: 200},
		{name: "malformed", body: `{"node_id":`, status: 400, code: "bad_request"},
		{name: "unknown field", body: `{"node":"n3"}`, status: 400, code: "unknown_field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := transporttest.New(t)
			srv := serve(t, f, transport.ServerOptions{})
			r := do(t, "POST", srv.URL+"/v1/cluster/transfer-leadership", tc.body, nil)
			if tc.status != 200 {
				wantError(t, r, tc.status, tc.code)
				if f.Count() != 0 {
					t.Errorf("a bad request reached the service")
				}
				return
			}
			var got api.TransferResponse
			wantOK(t, r, &got)
			if got.LeaderID != tc.leader || !slices.Equal(f.Transfers(), []string{tc.to}) {
				t.Errorf("answer %+v, service saw %q; want leader %q, to %q", got, f.Transfers(), tc.leader, tc.to)
			}
		})
	}
}

func TestHealthAndReady(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})

	var h map[string]string
	wantOK(t, do(t, "GET", srv.URL+"/healthz", "", nil), &h)
	if h["status"] != "ok" {
		t.Errorf("healthz %v", h)
	}

	cases := []struct {
		name   string
		err    error
		status int
		code   string
		words  string
	}{
		{name: "ready", status: 200},
		{name: "plain error", err: errors.New("catching up: applied 3 of 9"), status: 503, code: "not_ready", words: "catching up: applied 3 of 9"},
		{name: "not ready", err: fmt.Errorf("starting: %w", api.ErrNotReady), status: 503, code: "not_ready", words: "starting"},
		{name: "no leader", err: api.ErrNoLeader, status: 503, code: "no_leader", words: "no leader"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.Fail("Ready", tc.err)
			r := do(t, "GET", srv.URL+"/readyz", "", nil)
			if tc.status == 200 {
				var got map[string]string
				wantOK(t, r, &got)
				if got["status"] != "ready" {
					t.Errorf("readyz %v", got)
				}
				return
			}
			msg := wantError(t, r, tc.status, tc.code)
			if !strings.Contains(msg, tc.words) {
				t.Errorf("message %q does not say %q", msg, tc.words)
			}
		})
	}
}

func TestUnknownEndpoint(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/v1/nope"},
		{"POST", "/v2/messages"},
		{"GET", "/v1/cluster/nodes/n1/extra"},
		// Not canonical: a 404 in JSON, not the mux's redirect in HTML.
		{"GET", "/v1/channels//messages"},
		{"GET", "/v1/channels/../messages"},
		{"GET", "/v1/messages/."},
		{"POST", "/v1//messages"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			msg := wantError(t, do(t, tc.method, srv.URL+tc.path, "", nil), 404, "not_found")
			if !strings.Contains(msg, tc.path) {
				t.Errorf("message %q does not name the path", msg)
			}
		})
	}
	if f.Count() != 0 {
		t.Errorf("unknown endpoints reached the service")
	}
}

// TestForwardedHeader checks that HeaderForwarded reaches the service as
// IsForwarded(ctx), on every endpoint that calls it, and only when set.
func TestForwardedHeader(t *testing.T) {
	reqs := []struct {
		method, path, body, svc string
	}{
		{"POST", "/v1/messages", validBody, "Apply"},
		{"GET", "/v1/messages/m1", "", "Linearize"},
		{"GET", "/v1/channels", "", "Linearize"},
		{"GET", "/v1/channels/general/messages", "", "Linearize"},
		{"GET", "/v1/cluster/status", "", "Status"},
		{"GET", "/readyz", "", "Ready"},
		{"POST", "/v1/cluster/join", `{"node_id":"n4","raft_addr":"a:1","api_addr":"a:2"}`, "Join"},
		{"DELETE", "/v1/cluster/nodes/n4", "", "Remove"},
		{"POST", "/v1/cluster/snapshot", "", "Snapshot"},
		{"POST", "/v1/cluster/transfer-leadership", "", "TransferLeadership"},
	}
	for _, header := range []http.Header{nil, {api.HeaderForwarded: {"1"}}} {
		want := header != nil
		for _, rq := range reqs {
			t.Run(fmt.Sprintf("%s%s/forwarded=%v", rq.method, rq.path, want), func(t *testing.T) {
				f := transporttest.New(t)
				srv := serve(t, f, transport.ServerOptions{})
				do(t, rq.method, srv.URL+rq.path, rq.body, header)
				c := f.CallsTo(rq.svc)
				if len(c) != 1 {
					t.Fatalf("service got %d %s calls, want 1", len(c), rq.svc)
				}
				if c[0].Forwarded != want {
					t.Errorf("IsForwarded = %v, want %v", c[0].Forwarded, want)
				}
			})
		}
	}
}
