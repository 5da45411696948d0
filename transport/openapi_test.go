package transport_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/openapitest"
	"github.com/maos-project/maos/transport/transporttest"
)

// openAPIOperations reads the document's operations: "METHOD /path" →
// the operation.
func openAPIOperations(t *testing.T) map[string]map[string]any {
	t.Helper()
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(transport.OpenAPI(), &doc); err != nil {
		t.Fatalf("parse the OpenAPI document: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	out := map[string]map[string]any{}
	for path, item := range doc.Paths {
		for method, op := range item {
			out[strings.ToUpper(method)+" "+path] = op
		}
	}
	return out
}

// TestOpenAPIMatchesRoutes holds the document to the route table both
// ways: every route the server registers is an operation with the route's
// access (x-maos-access, and no security requirement exactly when it is
// public), and every operation is a route (HEAD: the GET route serves it).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ops := openAPIOperations(t)
	routes := map[string]transport.Route{}
	for _, rt := range newServer(t).Routes() {
		if !strings.Contains(rt.Pattern, " ") {
			// A path alone is the JSON 404 of what no other route matches
			// ("/", a browser's /favicon.ico, and the probes' paths for
			// other methods): no endpoint.
			if rt.Pattern != "/" && rt.Pattern != "/favicon.ico" && !slices.ContainsFunc(newServer(t).Routes(), func(o transport.Route) bool { return o.Pattern == "GET "+rt.Pattern }) {
				t.Errorf("route %q has no method and is not a path another route serves with GET", rt.Pattern)
			}
			continue
		}
		routes[rt.Pattern] = rt
		op, ok := ops[rt.Pattern]
		if !ok {
			t.Errorf("route %s is not in the OpenAPI document (openapi_gen_test.go's ops)", rt.Pattern)
			continue
		}
		if got := op["x-maos-access"]; got != rt.Access {
			t.Errorf("%s: x-maos-access = %v, the route table says %q", rt.Pattern, got, rt.Access)
		}
		if got, _ := op["x-maos-access-param"].(string); got != rt.AccessParam {
			t.Errorf("%s: x-maos-access-param = %q, the route table says %q", rt.Pattern, got, rt.AccessParam)
		}
		sec, has := op["security"].([]any)
		if public := rt.Access == "public"; public != (has && len(sec) == 0) {
			t.Errorf("%s: security = %v (present %v), want none exactly when the route is public (it is %s)", rt.Pattern, op["security"], has, rt.Access)
		}
		if _, ok := op["responses"].(map[string]any)["401"]; ok == (rt.Access == "public") {
			t.Errorf("%s: a 401 answer is documented: %v, want it for every route but the public ones", rt.Pattern, ok)
		}
	}
	for pattern := range ops {
		if method, path, _ := strings.Cut(pattern, " "); method == http.MethodHead {
			pattern = "GET " + path
		}
		if _, ok := routes[pattern]; !ok {
			t.Errorf("the OpenAPI document has %s, which no route serves", pattern)
		}
	}
}

// TestOpenAPIDocumentIsValid checks the document against the OpenAPI 3.1
// schema.
func TestOpenAPIDocumentIsValid(t *testing.T) { openapitest.Document(t) }

// openAPIEnv is a server with auth and artifacts on a one-node fake, and
// an HTTP client that checks every exchange against the document.
type openAPIEnv struct {
	t   *testing.T
	url string
	hc  *http.Client
}

func newOpenAPIEnv(t *testing.T) *openAPIEnv {
	svc := transporttest.New(t)
	for _, tok := range []struct{ id, agent, role, secret string }{
		{"tok-alice", "alice", api.TokenRoleAgent, aliceSecret},
		{"tok-bob", "bob", api.TokenRoleAgent, bobSecret},
	} {
		if _, err := svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: tok.id, Agent: tok.agent, Role: tok.role, Hash: fsm.HashToken(tok.secret)}); err != nil {
			t.Fatal(err)
		}
	}
	srv := transport.NewServer(svc, transport.ServerOptions{Logger: discard, Blobs: svc,
		Auth: &transport.AuthConfig{AdminToken: adminSecret}, Limits: transport.Limits{MaxArtifactBytes: 1 << 10}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &openAPIEnv{t: t, url: hs.URL, hc: openapitest.Client(t, nil)}
}

// call sends one request as secret ("" for none) and requires the status;
// the body is answered as text. The client checked the exchange.
func (e *openAPIEnv) call(secret, method, path, body string, want int, header ...string) string {
	e.t.Helper()
	return e.do(false, secret, method, path, body, want, header...)
}

// bad is call for a request deliberately off the document (a malformed
// body): only its answer is checked.
func (e *openAPIEnv) bad(secret, method, path, body string, want int) string {
	e.t.Helper()
	return e.do(true, secret, method, path, body, want)
}

func (e *openAPIEnv) do(off bool, secret, method, path, body string, want int, header ...string) string {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if off {
		req = openapitest.OffDocument(req)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Errorf("%s %s → %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	return string(b)
}

// field reads one string field of a JSON answer.
func field(t *testing.T, body, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	s, _ := m[name].(string)
	return s
}

// TestOpenAPIValidatesResponses drives the main flows through a real
// server and checks every request and answer against the document with
// libopenapi-validator (openapitest): a misfit in either fails the test.
func TestOpenAPIValidatesResponses(t *testing.T) {
	e := newOpenAPIEnv(t)
	const a, b, adm = aliceSecret, bobSecret, adminSecret

	// Public: the probes and the document.
	e.call("", "GET", "/healthz", "", 200)
	e.call("", "GET", "/v1/openapi.json", "", 200)
	e.call(a, "GET", "/v1/whoami", "", 200)

	// Agents, messages, inboxes.
	// Roles and capabilities are an admin's to grant.
	e.call(adm, "POST", "/v1/agents", `{"id":"alice","role":"engineer","capabilities":["go"]}`, 200)
	e.call(adm, "POST", "/v1/agents", `{"id":"bob","role":"reviewer"}`, 200)
	e.call(b, "POST", "/v1/agents", `{"id":"bob-fork-1"}`, 200)
	e.call(a, "GET", "/v1/agents?limit=10", "", 200)
	e.call(a, "GET", "/v1/agents/bob", "", 200)
	e.call(a, "GET", "/v1/roles", "", 200)
	sent := e.call(a, "POST", "/v1/messages", `{"id":"msg-1","from":"alice","to":"bob","channel":"dev","title":"hi","content":{"text":"@bob please review"},"tags":["review"]}`, 200)
	if field(t, sent, "id") != "msg-1" {
		t.Errorf("send answered %s", sent)
	}
	e.call(b, "POST", "/v1/messages", `{"id":"msg-2","from":"bob","to":["alice"],"channel":"dev","in_reply_to":"msg-1","content":{"text":"done","artifacts":["shared/plan.md"]}}`, 200)
	e.call(a, "GET", "/v1/messages/msg-1?consistency=strong", "", 200)
	e.call(a, "GET", "/v1/messages/msg-1/receipts", "", 200)
	e.call(a, "GET", "/v1/channels", "", 200)
	e.call(a, "GET", "/v1/channels/dev/messages?after=0&limit=10", "", 200)
	e.call(a, "GET", "/v1/threads/msg-2", "", 200)
	e.call(b, "GET", "/v1/agents/bob/inbox?unread=true", "", 200)
	e.call(b, "GET", "/v1/agents/bob/inbox/counts", "", 200)
	e.call(b, "GET", "/v1/agents/bob/summary", "", 200)
	e.call(b, "POST", "/v1/agents/bob/read", `{"id":"msg-1"}`, 200)
	e.call(b, "PUT", "/v1/agents/bob/receipts/msg-1", `{"state":"delivered"}`, 200)
	e.call(b, "PUT", "/v1/agents/bob/cursor", `{"seq":1}`, 200)
	e.call(b, "GET", "/v1/agents/bob/cursor", "", 200)
	e.call(a, "GET", "/v1/overview?channel=dev", "", 200)
	e.call(a, "GET", "/v1/audit?limit=5", "", 200)

	// Tasks.
	e.call(a, "POST", "/v1/tasks", `{"id":"task-1","from":"alice","to":"bob","title":"review","description":"the retry logic","priority":"high"}`, 200)
	e.call(a, "GET", "/v1/tasks?to=bob", "", 200)
	claim := e.call(b, "POST", "/v1/tasks/task-1/claim", `{"agent":"bob"}`, 200)
	var c struct{ Fence uint64 }
	_ = json.Unmarshal([]byte(claim), &c)
	fence := strings.TrimSpace(string(must(json.Marshal(c.Fence))))
	e.call(b, "POST", "/v1/tasks/task-1/progress", `{"agent":"bob","fence":`+fence+`,"message":"half","progress":0.5}`, 200)
	e.call(b, "POST", "/v1/tasks/task-1/complete", `{"agent":"bob","fence":`+fence+`,"completion":{"status":"success","result":"looks good","confidence_score":0.9}}`, 200)
	e.call(a, "GET", "/v1/tasks/task-1", "", 200)
	e.call(a, "POST", "/v1/tasks", `{"id":"task-2","from":"alice","to":"bob","title":"later"}`, 200)
	e.call(a, "POST", "/v1/tasks/task-2/cancel", `{"from":"alice","reason":"not needed"}`, 200)

	// Approvals.
	appr := e.call(a, "POST", "/v1/approvals", `{"id":"appr-1","from":"alice","approvers":["bob"],"title":"deploy","action":{"cmd":"deploy"},"timeout":"10m"}`, 200)
	e.call(a, "GET", "/v1/approvals?approver=bob", "", 200)
	e.call(b, "POST", "/v1/approvals/appr-1/decide", `{"approver":"bob","decision":"approve","action_hash":"`+field(t, appr, "action_hash")+`"}`, 200)
	e.call(a, "GET", "/v1/approvals/appr-1", "", 200)

	// Artifacts: raw bytes in, raw bytes and ranges out.
	art := e.call(a, "PUT", "/v1/artifacts?name=plan.md", "# the plan\n", 201, "Content-Type", "text/markdown")
	id := field(t, art, "id")
	e.call(a, "PUT", "/v1/artifacts?name=plan.md", "# the plan\n", 200, "Content-Type", "text/markdown")
	e.call(a, "GET", "/v1/artifacts/"+id, "", 200)
	e.call(a, "GET", "/v1/artifacts/"+id, "", 206, "Range", "bytes=0-4")
	e.call(a, "HEAD", "/v1/artifacts/"+id, "", 200)
	e.call(a, "GET", "/v1/artifacts/"+id+"/info", "", 200)
	e.call(a, "GET", "/v1/artifacts?from=alice", "", 200)

	// Policies, presence, coordination, rules, settings, cluster.
	e.call(b, "PUT", "/v1/agents/bob/policy", `{"mode":"queue","for_seconds":60}`, 200)
	e.call(a, "GET", "/v1/agents/bob/policy", "", 200)
	e.call(b, "DELETE", "/v1/agents/bob/policy", "", 200)
	e.call(a, "PUT", "/v1/presence/alice", `{"state":"AWAKE","substate":"WORKING"}`, 200)
	e.call(a, "GET", "/v1/presence", "", 200)
	e.call(a, "PUT", "/v1/bulletin?by=alice", `{"goal":"ship"}`, 200)
	e.call(a, "PATCH", "/v1/bulletin?by=alice", `{"goal":null,"status":"green"}`, 200)
	e.call(a, "GET", "/v1/bulletin", "", 200)
	e.call(a, "POST", "/v1/locks", `{"path":"src/a.go","holder":"alice","ttl":"1m"}`, 200)
	e.call(b, "POST", "/v1/locks", `{"path":"src/a.go","holder":"bob","ttl":30}`, 409)
	e.call(a, "GET", "/v1/locks?prefix=src/", "", 200)
	e.call(a, "GET", "/v1/rules", "", 200)
	e.call(a, "POST", "/v1/rules/check", `{"from":"alice","to":"bob"}`, 200)
	e.call(a, "GET", "/v1/cluster/config", "", 200)
	e.call(a, "GET", "/v1/cluster/status", "", 200)
	e.call(a, "GET", "/v1/channels/dev/retention", "", 404)
	e.call(adm, "PUT", "/v1/channels/dev/retention", `{"max_messages":100}`, 200)
	e.call(a, "GET", "/v1/channels/dev/retention", "", 200)
	e.call(a, "GET", "/v1/agents/alice/health", "", 200)
	e.call(a, "GET", "/v1/cluster/members", "", 200)
	e.call(adm, "POST", "/v1/tokens", `{"agent":"carol"}`, 200)
	e.call(adm, "GET", "/v1/tokens", "", 200)

	// Errors: each in the one error schema, on a status the document gives.
	e.bad(a, "POST", "/v1/messages", `{"from":"alice",`, 400)                                        // malformed
	e.call(a, "POST", "/v1/messages", `{"from":"alice","to":"bob","channel":"dev","colour":1}`, 400) // unknown field
	e.call("", "GET", "/v1/channels", "", 401)
	e.call("maos_nobody", "GET", "/v1/channels", "", 401)
	e.call(a, "GET", "/v1/tokens", "", 403)
	e.call(a, "GET", "/v1/agents/bob/inbox", "", 403)
	e.call(a, "POST", "/v1/messages", `{"from":"bob","to":"alice","channel":"dev","content":{"text":"forged"}}`, 403)
	e.call(a, "GET", "/v1/messages/msg-none", "", 404)
	e.call(a, "GET", "/v1/tasks/task-none", "", 404)
	e.call(a, "POST", "/v1/messages", `{"id":"msg-1","from":"alice","to":"bob","channel":"dev","content":{"text":"other"}}`, 409)
	e.call(b, "POST", "/v1/tasks/task-1/claim", `{"agent":"bob"}`, 409)   // it ended
	e.call(a, "POST", "/v1/tasks/task-1/claim", `{"agent":"alice"}`, 403) // not its queue
	e.call(a, "PUT", "/v1/artifacts?name=big.bin", strings.Repeat("x", 2<<10), 413, "Content-Type", "application/octet-stream")
	e.call(a, "POST", "/v1/tasks", `{"from":"alice","to":"bob","title":"`+strings.Repeat("x", 300<<10)+`"}`, 413)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestOpenAPIServed: the document is served without a token, as embedded.
func TestOpenAPIServed(t *testing.T) {
	e := newOpenAPIEnv(t)
	if got := e.call("", "GET", "/v1/openapi.json", "", 200); got != string(transport.OpenAPI()) {
		t.Errorf("GET /v1/openapi.json is not the embedded document")
	}
}
