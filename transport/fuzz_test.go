package transport_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// FuzzSendBody posts arbitrary bytes to POST /v1/messages. The handler must
// never panic and must answer 200 with {"id","seq","timestamp"}, or an error
// status of the send endpoint (400, 409, 413) with the error envelope; only a
// 200, a 409, or the state machine's refusal of a recipient that resolves
// to no agent (done at apply, against the registry) may have reached the
// node: every other 400 is the handler's.
func FuzzSendBody(f *testing.F) {
	const maxBytes = 2048
	for _, seed := range []string{
		validBody,
		`{"from":"alice","channel":"general","to":"bob","content":{"text":"hi"}}`,
		`{"id":"dup","from":"alice","channel":"general","to":["bob"],"content":{"text":"same"}}`,
		`{"id":"dup","from":"alice","channel":"general","to":["bob"],"content":{"text":"other"}}`,
		`{"id":"msg-20261121-103000-codex-9f3a61c2","seq":0,"timestamp":"2026-11-21T10:30:00.123Z","channel":"agent-os-paper",
		  "from":"codex","to":["claude"],"type":"request","title":"Review","priority":"high",
		  "content":{"text":"@claude please review","code":"x := 1","artifacts":["plan.md"]},"tags":["review"],
		  "in_reply_to":"msg-1","thread_id":"msg-0","correlation_id":"task_123","requires_response":true,
		  "visibility":"private","metadata":{"a":[1,{"b":null}]}}`,
		``,
		`null`,
		`{}`,
		`[]`,
		`{"from":`,
		validBody + `}`,
		validBody + ` {}`,
		`{"bogus":1}`,
		`{"to":7}`,
		`{"timestamp":"yesterday"}`,
		`{"metadata":{"a":` + strings.Repeat("[", 100) + `}}`,
		bodyOfSize(maxBytes + 1),
		"\xff\xfe{}",
	} {
		f.Add([]byte(seed))
	}
	// One node for every input (a state machine is a file to open): "dup"
	// is stored, so a send reusing it with other content is a 409, and so
	// is one reusing the id of an earlier input's send.
	svc := transporttest.New(f)
	store(f, svc, msg("dup", "alice", "general", "same", "bob"))
	h := transport.NewServer(svc, transport.ServerOptions{MaxMessageBytes: maxBytes, Logger: discard})
	f.Fuzz(func(t *testing.T, body []byte) {
		before := svc.Count()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body)))

		out := rec.Body.Bytes()
		if !json.Valid(out) {
			t.Fatalf("status %d with a body that is not JSON: %q", rec.Code, out)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		reached := svc.Count() - before
		switch rec.Code {
		case http.StatusOK:
			var res api.SendResponse
			if err := json.Unmarshal(out, &res); err != nil || res.ID == "" || res.Seq == 0 {
				t.Fatalf("200 with %s (%v)", out, err)
			}
			if reached != 1 {
				t.Fatalf("200 after %d service calls", reached)
			}
			if len(body) > maxBytes {
				t.Fatalf("accepted %d bytes, over the limit of %d", len(body), maxBytes)
			}
			// What the service got passes the state machine's own validation.
			m := svc.StoredSeq(res.Seq)
			if m == nil || m.ID != res.ID {
				t.Fatalf("answer %+v but stored %+v", res, m)
			}
			m.Seq = 0
			if err := m.Validate(); err != nil {
				t.Fatalf("the service got an invalid message: %v", err)
			}
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			code, message := errorOf(t, out)
			want := map[int][]string{
				400: {api.CodeBadRequest, api.CodeUnknownField, api.CodeInvalid},
				409: {api.CodeConflict},
				413: {api.CodeTooLarge},
			}[rec.Code]
			if !slices.Contains(want, code) {
				t.Fatalf("status %d with code %q", rec.Code, code)
			}
			resolved := code == api.CodeInvalid && strings.HasPrefix(message, "to[") && strings.Contains(message, "matches no agent")
			if wantReached := btoi(rec.Code == http.StatusConflict || resolved); reached != wantReached {
				t.Fatalf("status %d (%s) after %d service calls, want %d", rec.Code, message, reached, wantReached)
			}
			if rec.Code == http.StatusRequestEntityTooLarge && len(body) <= maxBytes {
				t.Fatalf("413 for %d bytes, limit %d", len(body), maxBytes)
			}
		case http.StatusNotFound:
			// The state machine refused names no one answers to.
			if code, message := errorOf(t, out); code != api.CodeNotFound || !strings.HasPrefix(message, "to: ") || reached != 1 {
				t.Fatalf("404 %s %q after %d service calls, want not_found naming \"to\" after 1", code, message, reached)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, out)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzJoinBody posts arbitrary bytes to POST /v1/cluster/join. The handler
// must never panic and must answer 200 {"joined": id} having passed the
// service exactly the request the body holds -- a node id that is a valid
// name and two addresses a peer can dial -- or 400/413 with the error
// envelope and without calling the service.
func FuzzJoinBody(f *testing.F) {
	for _, seed := range []string{
		`{"node_id":"n4","raft_addr":"127.0.0.1:8004","api_addr":"127.0.0.1:7004"}`,
		`{"node_id":"n4","raft_addr":"[::1]:8004","api_addr":"node4.example:7004"}`,
		`{"node_id":"n4","raft_addr":"127.0.0.1","api_addr":"127.0.0.1:7004"}`,
		`{"node_id":"n4","raft_addr":"127.0.0.1:0","api_addr":"127.0.0.1:7004"}`,
		`{"node_id":"n4","raft_addr":"127.0.0.1:8004","api_addr":"0.0.0.0:7004"}`,
		`{"node_id":"n4","raft_addr":":8004","api_addr":"127.0.0.1:7004"}`,
		`{"node_id":"N4","raft_addr":"a:1","api_addr":"a:2"}`,
		`{"node_id":"n4","raft_addr":"a:1","api_addr":"a:2","voter":true}`,
		`{"node_id":"n4"}`,
		`{"node_id":null,"raft_addr":1,"api_addr":[]}`,
		`{"node_id":"n4","raft_addr":"a:1","api_addr":"a:2"} {}`,
		``,
		`null`,
		`{"node_id":"` + strings.Repeat("n", 70<<10) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	svc := transporttest.New(f) // one node for every input; counts are differences
	h := transport.NewServer(svc, transport.ServerOptions{Logger: discard})
	f.Fuzz(func(t *testing.T, body []byte) {
		calls, joins := svc.Count(), len(svc.Joined())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/cluster/join", bytes.NewReader(body)))
		out := rec.Body.Bytes()
		if !json.Valid(out) {
			t.Fatalf("status %d with a body that is not JSON: %q", rec.Code, out)
		}
		joined, reached := svc.Joined()[joins:], svc.Count()-calls
		switch rec.Code {
		case http.StatusOK:
			var ans map[string]string
			if err := json.Unmarshal(out, &ans); err != nil || len(ans) != 1 {
				t.Fatalf("200 with %s (%v)", out, err)
			}
			if len(joined) != 1 || reached != 1 {
				t.Fatalf("200 after %d service calls, %d joins", reached, len(joined))
			}
			req := joined[0]
			if ans["joined"] != req.NodeID {
				t.Fatalf("answer %s for a join of %q", out, req.NodeID)
			}
			var want api.JoinRequest
			if err := json.Unmarshal(body, &want); err != nil || req != want {
				t.Fatalf("the service got %+v; the body holds %+v (%v)", req, want, err)
			}
			if !api.ValidName(req.NodeID) {
				t.Fatalf("joined node id %q is not a valid name", req.NodeID)
			}
			for _, a := range []string{req.RaftAddr, req.APIAddr} {
				host, port, err := net.SplitHostPort(a)
				p, perr := strconv.ParseUint(port, 10, 16)
				if ip := net.ParseIP(host); err != nil || perr != nil || p == 0 || host == "" || (ip != nil && ip.IsUnspecified()) {
					t.Fatalf("joined with address %q, which peers cannot dial", a)
				}
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			code, _ := errorOf(t, out)
			want := map[int][]string{
				400: {api.CodeBadRequest, api.CodeUnknownField, api.CodeInvalid},
				413: {api.CodeTooLarge},
			}[rec.Code]
			if !slices.Contains(want, code) {
				t.Fatalf("status %d with code %q", rec.Code, code)
			}
			if reached != 0 {
				t.Fatalf("status %d after %d service calls", rec.Code, reached)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, out)
		}
	})
}

// FuzzQueryParams reads GET /v1/channels/{channel}/messages with arbitrary
// strings for the channel (path-escaped) and for after, limit and
// consistency -- query-escaped, or, when raw is set, pasted into the query
// as they are. The handler must never panic and answers 200, 400 or 404
// with a JSON body. With escaped values the answer is exact: 200 if and
// only if after is empty or a whole number up to 2^63, limit empty or
// 1..1000 and consistency empty, "local" or "strong", and then the service
// got exactly those values (defaults filled in) and the channel unescaped;
// a 400 never reaches the service; a channel "", ".", ".." or "/" (not
// a path segment ServeMux routes) is a 404.
func FuzzQueryParams(f *testing.F) {
	for _, s := range []struct {
		ch, after, limit, cons string
		raw                    bool
	}{
		{"general", "", "", "", false},
		{"general", "0", "1", "local", false},
		{"general", "2", "1000", "strong", false},
		{"agent-os-paper", "9223372036854775808", "100", "", false},
		{"general", "9223372036854775809", "1001", "", false},
		{"general", "-1", "0", "eventual", false},
		{"general", "1e3", " 5", "STRONG", false},
		{"a/b", "+1", "0x10", "local ", false},
		{"ünïcode ?#%", "", "", "", false},
		{"", "", "", "", false},
		{"..", "", "", "", false},
		{"general", "1&limit=5", "2;x", "strong&consistency=local", true},
		{"general", "%zz", "%31%30", "%", true},
	} {
		f.Add(s.ch, s.after, s.limit, s.cons, s.raw)
	}
	svc := transporttest.New(f) // one node for every input; counts are differences
	b, pages := recordPages(svc)
	h := transport.NewServer(b, transport.ServerOptions{Logger: discard})
	f.Fuzz(func(t *testing.T, ch, after, limit, cons string, raw bool) {
		esc := url.QueryEscape
		if raw {
			esc = func(s string) string { return s }
		}
		target := "/v1/channels/" + url.PathEscape(ch) + "/messages?after=" + esc(after) + "&limit=" + esc(limit) + "&consistency=" + esc(cons)
		u, err := url.ParseRequestURI(target)
		if err != nil {
			if !raw {
				t.Fatalf("escaped target %q does not parse: %v", target, err)
			}
			return // not a request a client could send
		}
		reads, calls, lins := len(pages()), svc.Count(), len(svc.CallsTo("Linearize"))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL, req.RequestURI = u, target
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		if !json.Valid(out) {
			t.Fatalf("%s: status %d with a body that is not JSON: %q", target, rec.Code, out)
		}
		pageReads, lin, reached := pages()[reads:], svc.CallsTo("Linearize")[lins:], svc.Count()-calls
		switch rec.Code {
		case http.StatusOK:
			var page api.Page
			if err := json.Unmarshal(out, &page); err != nil || page.Messages == nil {
				t.Fatalf("%s: 200 with %s (%v)", target, out, err)
			}
			if len(pageReads) != 1 || len(lin) != 1 {
				t.Fatalf("%s: 200 after %d ChannelPage reads, %d Linearize calls", target, len(pageReads), len(lin))
			}
			c := pageReads[0]
			if c.Limit < 1 || c.Limit > api.MaxPageLimit || c.After > 1<<63 || (lin[0].Cons != api.Local && lin[0].Cons != api.Strong) {
				t.Fatalf("%s: the state was read after %d limit %d consistency %q", target, c.After, c.Limit, lin[0].Cons)
			}
		case http.StatusBadRequest:
			if code, _ := errorOf(t, out); code != api.CodeBadRequest {
				t.Fatalf("%s: 400 with code %q", target, code)
			}
			if reached != 0 || len(pageReads) != 0 {
				t.Fatalf("%s: 400 after %d service calls, %d reads", target, reached, len(pageReads))
			}
		case http.StatusNotFound:
			if code, _ := errorOf(t, out); code != api.CodeNotFound {
				t.Fatalf("%s: 404 with code %q", target, code)
			}
		default:
			t.Fatalf("%s: status %d: %s", target, rec.Code, out)
		}
		if raw {
			return
		}

		// Escaped values reach the handler as they are: the answer is exact.
		wantAfter, okAfter := uint64(0), after == ""
		if v, err := strconv.ParseUint(after, 10, 64); err == nil && v <= 1<<63 {
			wantAfter, okAfter = v, true
		}
		wantLimit, okLimit := api.DefaultPageLimit, limit == ""
		if v, err := strconv.ParseUint(limit, 10, 64); err == nil && v >= 1 && v <= api.MaxPageLimit {
			wantLimit, okLimit = int(v), true
		}
		wantCons, okCons := api.Local, cons == "" || cons == "local"
		if cons == "strong" {
			wantCons, okCons = api.Strong, true
		}
		switch {
		case ch == "" || ch == "." || ch == "..", ch == "/":
			// "", "." and "..": not a path segment, the path is not
			// canonical. "/": ServeMux unescapes %2F to "/", which it
			// takes for a trailing slash, and no {channel} matches. None
			// is a channel name; no endpoint.
			if rec.Code != http.StatusNotFound || reached != 0 || len(pageReads) != 0 {
				t.Fatalf("%s: status %d after %d service calls, want 404 and none", target, rec.Code, reached)
			}
		case okAfter && okLimit && okCons:
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: status %d for valid parameters: %s", target, rec.Code, out)
			}
			c := pageReads[0]
			if c.Channel != ch || c.After != wantAfter || c.Limit != wantLimit || lin[0].Cons != wantCons {
				t.Fatalf("%s: the state was read at channel %q after %d limit %d consistency %q; want %q %d %d %q",
					target, c.Channel, c.After, c.Limit, lin[0].Cons, ch, wantAfter, wantLimit, wantCons)
			}
		case rec.Code != http.StatusBadRequest:
			t.Fatalf("%s: status %d for after %q limit %q consistency %q, want 400", target, rec.Code, after, limit, cons)
		}
	})
}
