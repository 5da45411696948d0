package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// The secrets of the auth tests' tokens.
const (
	adminSecret = "admin-bootstrap-0123456789abcdef"
	aliceSecret = "maos_alice-0123456789"
	bobSecret   = "maos_bob-0123456789"
	rexSecret   = "maos_rex-moderator-0123456789" // rex moderates
	opsSecret   = "maos_ops-admin-0123456789"     // ops has an admin token
)

type authEnv struct {
	t   testing.TB
	svc *transporttest.Service // sends and writes on a real state machine
	srv *transport.Server
	url string
}

// newAuthEnv serves the API with auth (nil: off) in front of a real state
// holding the tokens of alice and bob (agents), rex (moderator) and ops
// (admin), and the agents alice, bob and carol.
func newAuthEnv(t testing.TB, auth *transport.AuthConfig) *authEnv {
	t.Helper()
	// The setup is applied directly: the calls the tests count are theirs.
	svc := transporttest.New(t)
	// alice's and bob's tokens grant the role they are registered with.
	for _, tok := range []struct{ id, agent, role, agentRole, secret string }{
		{"tok-alice", "alice", api.TokenRoleAgent, "engineer", aliceSecret},
		{"tok-bob", "bob", api.TokenRoleAgent, "engineer", bobSecret},
		{"tok-rex", "rex", api.TokenRoleModerator, "", rexSecret},
		{"tok-ops", "ops", api.TokenRoleAdmin, "", opsSecret},
	} {
		if _, err := svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: tok.id, Agent: tok.agent, Role: tok.role, AgentRole: tok.agentRole, Hash: fsm.HashToken(tok.secret)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"alice", "bob", "carol"} {
		if _, err := svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: a, Role: "engineer"}); err != nil {
			t.Fatal(err)
		}
	}
	srv := transport.NewServer(svc, transport.ServerOptions{Logger: discard, Auth: auth})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &authEnv{t: t, svc: svc, srv: srv, url: hs.URL}
}

// writes is how many commands other than audit_denial and send reached
// Apply (refused ones too), and sends how many messages were sent.
func (e *authEnv) writes() (writes, sends int) {
	for _, c := range e.svc.CallsTo("Apply") {
		if op := api.Op(c.Arg); op != api.OpAuditDenial && op != api.OpSend {
			writes++
		}
	}
	return writes, sendCalls(e.svc)
}

// as sends one request with the bearer secret ("" for none).
func (e *authEnv) as(secret, method, path, body string) reply {
	e.t.Helper()
	h := http.Header{}
	if secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	return do(e.t, method, e.url+path, body, h)
}

func (e *authEnv) client(secret string) *client.Client {
	return client.NewClient(e.url, nil).WithToken(secret)
}

// denials is the DENIED part of the audit trail.
func (e *authEnv) denials() []api.AuditEvent {
	e.t.Helper()
	p, err := e.svc.State().Audit(0, api.MaxPageLimit)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []api.AuditEvent
	for _, ev := range p.Events {
		if ev.Kind == fsm.AuditDenied {
			out = append(out, ev)
		}
	}
	return out
}

// deniedCount sums the requests the DENIED lines matching match count
// ("N times" on a line folding several).
func deniedCount(evs []api.AuditEvent, match string) int {
	n := 0
	for _, ev := range evs {
		if !strings.Contains(ev.Line(), match) {
			continue
		}
		c := 1
		if i := strings.LastIndex(ev.Text, " times)"); i > 0 {
			j := strings.LastIndex(ev.Text[:i], " ")
			fmt.Sscan(ev.Text[j+1:i], &c)
		}
		n += c
	}
	return n
}

// waitDenied polls the trail until the DENIED lines matching match count
// want requests, and fails if they count more or never get there.
func (e *authEnv) waitDenied(match string, want int) []api.AuditEvent {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := e.denials()
		got := deniedCount(evs, match)
		if got > want {
			e.t.Fatalf("%d denied requests matching %q audited, want %d: %v", got, match, want, evs)
		}
		if got == want {
			return evs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d denied requests matching %q audited after 10 s, want %d: %v", got, match, want, evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantUnauthorized(t *testing.T, r reply, invalidToken bool) string {
	t.Helper()
	msg := wantError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
	h := r.header.Get("WWW-Authenticate")
	if !strings.HasPrefix(h, "Bearer ") || strings.Contains(h, `error="invalid_token"`) != invalidToken {
		t.Errorf("WWW-Authenticate %q (invalid token: %t)", h, invalidToken)
	}
	return msg
}

func TestAuthOffIsUnrestricted(t *testing.T) {
	e := newAuthEnv(t, nil)
	// No token, a garbage token: both as before auth existed.
	for _, secret := range []string{"", "not a token"} {
		wantOK(t, e.as(secret, "POST", "/v1/cluster/snapshot", ""), nil)
		wantOK(t, e.as(secret, "GET", "/v1/agents/bob/inbox", ""), nil)
		wantOK(t, e.as(secret, "POST", "/v1/messages", `{"from":"bob","to":["alice"],"channel":"general","content":{"text":"hi"}}`), nil)
		wantOK(t, e.as(secret, "GET", "/v1/tokens", ""), nil)
	}
	if _, sends := e.writes(); sends != 2 {
		t.Errorf("%d sends, want 2", sends)
	}
	if d := e.denials(); len(d) != 0 {
		t.Errorf("denials audited without auth: %v", d)
	}
}

func TestAuthRefusesMissingAndBadTokens(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	// The probes need no token; their paths answer another method with
	// the JSON 404, without a token either.
	wantOK(t, e.as("", "GET", "/healthz", ""), nil)
	wantOK(t, e.as("", "GET", "/readyz", ""), nil)
	wantError(t, e.as("", "POST", "/healthz", ""), http.StatusNotFound, api.CodeNotFound)
	wantError(t, e.as("", "DELETE", "/readyz", ""), http.StatusNotFound, api.CodeNotFound)

	msg := wantUnauthorized(t, e.as("", "GET", "/v1/channels", ""), false)
	if !strings.Contains(msg, "Authorization: Bearer") {
		t.Errorf("401 message %q does not say what to send", msg)
	}
	// Not even an unknown endpoint answers without a token.
	wantUnauthorized(t, e.as("", "GET", "/v1/nothing-here", ""), false)
	// A forwarded request is authenticated like any other, and only a
	// node (an admin token) may mark one: it skips checks done upstream.
	wantUnauthorized(t, do(t, "GET", e.url+"/v1/channels", "", http.Header{api.HeaderForwarded: {"1"}}), false)
	fwd := func(secret string) reply {
		return do(t, "GET", e.url+"/v1/channels", "", http.Header{api.HeaderForwarded: {"1"}, "Authorization": {"Bearer " + secret}})
	}
	if msg := wantError(t, fwd(aliceSecret), http.StatusForbidden, api.CodeForbidden); !strings.Contains(msg, api.HeaderForwarded) {
		t.Errorf("403 message %q does not name the header", msg)
	}
	wantOK(t, fwd(adminSecret), nil)
	wantOK(t, fwd(opsSecret), nil)
	e.waitDenied("X-Maos-Forwarded", 1)

	for _, tt := range []struct {
		name   string
		header []string
		token  bool // a well-formed token that is not valid
	}{
		{"basic scheme", []string{"Basic YWxpY2U6cHc="}, false},
		{"no credential", []string{"Bearer"}, false},
		{"empty credential", []string{"Bearer   "}, false},
		{"space inside", []string{"Bearer maos_a maos_b"}, false},
		{"non-token characters", []string{"Bearer maos_\u00e9t\u00e9"}, false},
		{"padding in the middle", []string{"Bearer ab=cd"}, false},
		{"too long", []string{"Bearer " + strings.Repeat("A", transport.MaxTokenLen+1)}, false},
		{"two headers", []string{"Bearer " + aliceSecret, "Bearer " + aliceSecret}, false},
		{"unknown token", []string{"Bearer maos_never-issued"}, true},
		{"admin token with a typo", []string{"Bearer " + adminSecret + "x"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantUnauthorized(t, do(t, "GET", e.url+"/v1/channels", "", http.Header{"Authorization": tt.header}), tt.token)
		})
	}
	// The scheme is case-insensitive (RFC 7235).
	wantOK(t, do(t, "GET", e.url+"/v1/channels", "", http.Header{"Authorization": {"bEaReR " + aliceSecret}}), nil)

	// A revoked token is refused at once (no cache), and the trail names it.
	wantOK(t, e.as(bobSecret, "GET", "/v1/channels", ""), nil)
	wantOK(t, e.as(adminSecret, "DELETE", "/v1/tokens/tok-bob", ""), nil)
	wantUnauthorized(t, e.as(bobSecret, "GET", "/v1/channels", ""), true)

	// Every refusal was audited: three requests without a token, eight
	// malformed headers, two unknown tokens, one revoked; and the
	// forwarded mark of an agent.
	e.waitDenied("missing bearer token", 3)
	e.waitDenied("DENIED", 15)
	evs := e.waitDenied("revoked token", 1)
	if n := deniedCount(evs, "token tok-bob"); n != 1 {
		t.Errorf("the revoked token's line does not name tok-bob: %v", evs)
	}
	if n := deniedCount(evs, "unknown token (sha256 "); n != 2 {
		t.Errorf("%d unknown-token denials, want 2: %v", n, evs)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Text, aliceSecret) || strings.Contains(ev.Text, "never-issued") || strings.Contains(ev.Text, adminSecret) {
			t.Errorf("a denial line shows a secret: %s", ev.Line())
		}
		if !strings.Contains(ev.Text, "node n1") {
			t.Errorf("a denial line does not name the node: %s", ev.Line())
		}
	}
}

func TestAuthImpersonationRefused(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	// alice's token, each write naming bob as the acting agent.
	for _, tt := range []struct{ method, path, body, field string }{
		{"POST", "/v1/messages", `{"from":"bob","to":["carol"],"channel":"general","content":{"text":"hi"}}`, `from "bob"`},
		{"POST", "/v1/agents", `{"id":"bob","role":"engineer"}`, `id "bob"`},
		{"DELETE", "/v1/agents/bob", "", "acts as agent bob"},
		{"POST", "/v1/agents/bob/read", `{"upto":1}`, "acts as agent bob"},
		{"PUT", "/v1/agents/bob/cursor", `{"seq":1}`, "acts as agent bob"},
		{"PUT", "/v1/presence/bob", `{"status":"AWAKE"}`, "acts as agent bob"},
		{"POST", "/v1/agents/carol/interrupt", `{"from":"bob","reason":"stop"}`, `from "bob"`},
		{"POST", "/v1/locks", `{"path":"src/a.go","holder":"bob","ttl":"1m"}`, `holder "bob"`},
		{"POST", "/v1/locks/renew", `{"path":"src/a.go","holder":"bob","token":1,"ttl":"1m"}`, `holder "bob"`},
		{"POST", "/v1/locks/release", `{"path":"src/a.go","holder":"bob","token":1}`, `holder "bob"`},
		{"POST", "/v1/locks/release", `{"path":"src/a.go","force":true,"by":"bob"}`, `by "bob"`},
		{"PUT", "/v1/bulletin?by=bob", `{"system_status":"normal"}`, "acts as agent bob"},
		{"PATCH", "/v1/bulletin?by=bob", `{"system_status":"normal"}`, "acts as agent bob"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			msg := wantError(t, e.as(aliceSecret, tt.method, tt.path, tt.body), http.StatusForbidden, api.CodeForbidden)
			if !strings.Contains(msg, tt.field) || !strings.Contains(msg, "tok-alice") {
				t.Errorf("403 message %q does not name %s and the token", msg, tt.field)
			}
		})
	}
	if writes, sends := e.writes(); writes != 0 || sends != 0 {
		t.Errorf("refused requests reached the log: %d writes, %d sends", writes, sends)
	}
	evs := e.waitDenied("[alice] DENIED", 13)
	if n := deniedCount(evs, `POST /v1/messages: from "bob" is not this token's agent`); n != 1 {
		t.Errorf("the impersonated send is not on the trail as such: %v", evs)
	}

	// The same writes as herself go through; an admin may act as anyone.
	wantOK(t, e.as(aliceSecret, "POST", "/v1/messages", `{"from":"alice","to":["carol"],"channel":"general","content":{"text":"hi"}}`), nil)
	wantOK(t, e.as(aliceSecret, "POST", "/v1/locks", `{"path":"src/a.go","holder":"alice","ttl":"1m"}`), nil)
	wantOK(t, e.as(aliceSecret, "PUT", "/v1/bulletin?by=alice", `{"system_status":"normal"}`), nil)
	wantOK(t, e.as(aliceSecret, "PUT", "/v1/bulletin", `{"system_status":"normal"}`), nil)
	wantOK(t, e.as(opsSecret, "POST", "/v1/messages", `{"from":"bob","to":["carol"],"channel":"general","content":{"text":"import"}}`), nil)
	wantOK(t, e.as(adminSecret, "PUT", "/v1/agents/bob/cursor", `{"seq":1}`), nil)
	// A moderator reads everything but speaks only for itself.
	wantError(t, e.as(rexSecret, "POST", "/v1/messages", `{"from":"bob","to":["carol"],"channel":"general","content":{"text":"hi"}}`), http.StatusForbidden, api.CodeForbidden)
	if _, sends := e.writes(); sends != 2 {
		t.Errorf("%d sends, want 2", sends)
	}
}

func TestAuthInboxReads(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	wantOK(t, e.as(adminSecret, "POST", "/v1/messages", `{"from":"alice","to":["bob"],"channel":"general","content":{"text":"for bob"}}`), nil)
	paths := []string{"/v1/agents/bob/inbox", "/v1/agents/bob/inbox/counts", "/v1/agents/bob/cursor"}
	for _, p := range paths {
		msg := wantError(t, e.as(aliceSecret, "GET", p, ""), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(msg, "reads agent bob's inbox") || !strings.Contains(msg, "moderator") {
			t.Errorf("GET %s: 403 message %q does not say what is needed", p, msg)
		}
		for _, secret := range []string{bobSecret, rexSecret, opsSecret, adminSecret} {
			wantOK(t, e.as(secret, "GET", p, ""), nil)
		}
	}
	var page api.InboxPage
	wantOK(t, e.as(rexSecret, "GET", "/v1/agents/bob/inbox", ""), &page)
	if len(page.Messages) != 1 {
		t.Errorf("the moderator sees %d messages in bob's inbox, want 1", len(page.Messages))
	}
	// A stream of bob's inbox is an inbox read too; a stream of
	// everything needs only a token.
	err := e.client(aliceSecret).Stream(context.Background(), api.StreamQuery{Agent: "bob"}, func(api.StreamEvent) error { return nil })
	if !errors.Is(err, api.ErrForbidden) {
		t.Errorf("alice streaming bob's inbox: %v, want 403", err)
	}
	for _, secret := range []string{aliceSecret, bobSecret} {
		q := api.StreamQuery{Agent: "bob"}
		if secret == aliceSecret {
			q = api.StreamQuery{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stop := errors.New("stop")
		err := e.client(secret).Stream(ctx, q, func(ev api.StreamEvent) error {
			if ev.Ready {
				return stop
			}
			return nil
		})
		cancel()
		if !errors.Is(err, stop) {
			t.Errorf("stream %+v with a valid token: %v, want it to reach ready", q, err)
		}
	}
	e.waitDenied("reads agent bob's inbox", 4)
}

func TestAuthAdminOnlyEndpoints(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	admin := []struct{ method, path, body string }{
		{"POST", "/v1/cluster/join", `{"node_id":"n3","raft_addr":"127.0.0.1:8003","api_addr":"127.0.0.1:7003"}`},
		{"DELETE", "/v1/cluster/nodes/n2", ""},
		{"POST", "/v1/cluster/snapshot", ""},
		{"POST", "/v1/cluster/transfer-leadership", ""},
		{"PUT", "/v1/cluster/config", `{"key":"strict_senders","value":false}`},
		{"PUT", "/v1/rules", `{"rules":[]}`},
		{"DELETE", "/v1/rules", ""},
		{"PUT", "/v1/channels/general/retention", `{"max_messages":10}`},
		{"POST", "/v1/channels/general/trim", ""},
		{"POST", "/v1/tokens", `{"agent":"carol"}`},
		{"GET", "/v1/tokens", ""},
		{"DELETE", "/v1/tokens/tok-bob", ""},
		{"POST", "/v1/internal/entry", "x"},
		{"POST", "/v1/internal/entries", "\x01x"},
		{"GET", "/v1/internal/read-index", ""},
	}
	for _, secret := range []string{aliceSecret, rexSecret} {
		for _, ep := range admin {
			msg := wantError(t, e.as(secret, ep.method, ep.path, ep.body), http.StatusForbidden, api.CodeForbidden)
			if !strings.Contains(msg, "an admin token") {
				t.Errorf("%s %s: 403 message %q does not say an admin token is needed", ep.method, ep.path, msg)
			}
		}
	}
	// The node credential passes the node-to-node routes, and no other
	// admin route.
	node := transport.NodeCredential(adminSecret)
	for _, ep := range admin {
		if strings.HasPrefix(ep.path, "/v1/internal/") || ep.path == "/v1/cluster/join" ||
			ep.path == "/v1/cluster/nodes/n2" || ep.path == "/v1/cluster/transfer-leadership" {
			continue
		}
		msg := wantError(t, e.as(node, ep.method, ep.path, ep.body), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(msg, "needs an admin token") || !strings.Contains(msg, "the node credential") {
			t.Errorf("%s %s with the node credential: 403 message %q", ep.method, ep.path, msg)
		}
	}
	if writes, _ := e.writes(); writes != 0 {
		t.Errorf("refused admin requests applied %d commands", writes)
	}
	if n := len(e.svc.CallsTo("Join")) + len(e.svc.CallsTo("Remove")) + len(e.svc.CallsTo("Snapshot")) + len(e.svc.CallsTo("TransferLeadership")); n != 0 {
		t.Errorf("refused cluster operations reached the service %d times", n)
	}
	// Every refusal is counted on the trail, folded or not.
	e.waitDenied("[alice] DENIED", len(admin))
	e.waitDenied("[rex] DENIED", len(admin))

	for _, secret := range []string{adminSecret, opsSecret} {
		for _, ep := range admin {
			r := e.as(secret, ep.method, ep.path, ep.body)
			if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden || r.status >= 500 {
				t.Errorf("%s %s with an admin token: %d %s", ep.method, ep.path, r.status, r.body)
			}
		}
	}
	if len(e.svc.CallsTo("Join")) != 2 || len(e.svc.CallsTo("Snapshot")) != 2 {
		t.Errorf("admin cluster operations did not reach the service")
	}
}

func TestAuthTokensAPI(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	admin := e.client(adminSecret)

	created, err := admin.CreateToken(ctx, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	if created.Agent != "carol" || created.Role != api.TokenRoleAgent || !strings.HasPrefix(created.ID, "tok-") ||
		!strings.HasPrefix(created.Token, transport.TokenSecretPrefix) || len(created.Token) != 48 || created.CreatedAt.IsZero() {
		t.Fatalf("created %+v", created)
	}
	// Only the hash was proposed.
	var proposed string
	for _, a := range e.svc.Applied() {
		if a.Op == api.OpCreateToken {
			proposed = string(a.Body)
		}
	}
	if strings.Contains(proposed, created.Token) || !strings.Contains(proposed, fsm.HashToken(created.Token)) {
		t.Errorf("the proposed command %s carries the secret, or not its hash", proposed)
	}

	// The secret works at once, for carol only.
	carol := e.client(created.Token)
	if _, err := carol.Send(ctx, msg("", "carol", "general", "hello", "alice")); err != nil {
		t.Errorf("send as carol with her new token: %v", err)
	}
	if _, err := carol.Send(ctx, msg("", "alice", "general", "hello", "bob")); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("send as alice with carol's token: %v, want 403", err)
	}

	// The listing shows it and never a secret or a hash.
	list, err := admin.Tokens(ctx)
	if err != nil || len(list) != 5 {
		t.Fatalf("Tokens() = %+v, %v; want 5", list, err)
	}
	raw := e.as(adminSecret, "GET", "/v1/tokens", "")
	if strings.Contains(string(raw.body), created.Token) || strings.Contains(string(raw.body), fsm.HashToken(created.Token)) ||
		strings.Contains(string(raw.body), "hash") {
		t.Errorf("GET /v1/tokens shows a secret or hash: %s", raw.body)
	}
	r := e.as(adminSecret, "POST", "/v1/tokens", `{"agent":"carol","role":"moderator"}`)
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("POST /v1/tokens Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}

	// Revoke: refused on the next request, revoking again is fine.
	if err := admin.RevokeToken(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Channels(ctx, api.Local); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("revoked token: %v, want ErrUnauthorized", err)
	}
	err = carol.Stream(ctx, api.StreamQuery{}, func(api.StreamEvent) error { return nil })
	if !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("stream with a revoked token: %v, want ErrUnauthorized", err)
	}
	if err := admin.RevokeToken(ctx, created.ID); err != nil {
		t.Errorf("second revoke: %v", err)
	}
	if err := admin.RevokeToken(ctx, "tok-nope"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("revoke of an unknown id: %v, want ErrNotFound", err)
	}
	list, _ = admin.Tokens(ctx)
	for _, tok := range list {
		if tok.ID == created.ID && !tok.Revoked() {
			t.Errorf("the listing shows %s live after its revoke", tok.ID)
		}
	}

	// Bad requests name the field; an agent token may not create tokens.
	for body, field := range map[string]string{
		`{"agent":"carol","role":"root"}`: "role",
		`{"agent":"Carol Smith"}`:         "agent",
		`{}`:                              "agent",
	} {
		msg := wantError(t, e.as(adminSecret, "POST", "/v1/tokens", body), http.StatusBadRequest, api.CodeInvalid)
		if !strings.HasPrefix(msg, field+":") {
			t.Errorf("POST %s: message %q does not name %s", body, msg, field)
		}
	}
	if _, err := e.client(aliceSecret).CreateToken(ctx, "alice", api.TokenRoleAdmin); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("an agent creating an admin token: %v, want 403", err)
	}
	// Without a token the client says so.
	if _, err := client.NewClient(e.url, nil).Tokens(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("no token: %v, want ErrUnauthorized", err)
	}
}

func TestAuthConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		token string
		ok    bool
	}{
		{"", true},
		{adminSecret, true},
		{"0123456789abcdef0123456789abcdef", true},
		{"short", false},
		{strings.Repeat("a", transport.MaxTokenLen+1), false},
		{"has spaces in it, sixteen+", false},
		{"line\nbreak-0123456789", false},
	} {
		err := (&transport.AuthConfig{AdminToken: tt.token}).Validate()
		var fe *api.FieldError
		if (err == nil) != tt.ok || (err != nil && (!errors.As(err, &fe) || fe.Field != "admin_token")) {
			t.Errorf("Validate(%q) = %v, want ok %t", tt.token, err, tt.ok)
		}
	}
}

// tokenCounter is a state that counts its token lookups.
type tokenCounter struct {
	transport.Reader
	n atomic.Int64
}

func (c *tokenCounter) TokenByHash(hash string) (*api.Token, error) {
	c.n.Add(1)
	return c.Reader.TokenByHash(hash)
}

// countingTokens is a node whose state counts token lookups.
type countingTokens struct {
	*transporttest.Service
	state *tokenCounter
}

func (b countingTokens) State() transport.Reader { return b.state }

// A request's identity is resolved once, however many checks use it: the
// route's rule, the agent the body names, the send limit, the reads.
func TestAuthIdentityResolvedOnce(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	state := &tokenCounter{Reader: e.svc.State()}
	srv := httptest.NewServer(transport.NewServer(countingTokens{Service: e.svc, state: state}, transport.ServerOptions{
		Logger: discard, Auth: &transport.AuthConfig{AdminToken: adminSecret},
		Limits: transport.Limits{SendRate: 100, MaxRecipients: 10}}))
	t.Cleanup(srv.Close)
	h := http.Header{"Authorization": {"Bearer " + aliceSecret}}
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/messages", `{"from":"alice","to":["bob"],"channel":"general","content":{"text":"hi"}}`, http.StatusOK},
		{"POST", "/v1/messages", `{"from":"bob","to":["alice"],"channel":"general","content":{"text":"hi"}}`, http.StatusForbidden},
		{"GET", "/v1/agents/alice/inbox", "", http.StatusOK},
		{"GET", "/v1/agents/bob/inbox", "", http.StatusForbidden},
		{"POST", "/v1/locks", `{"path":"src/a.go","holder":"alice","ttl":"1m"}`, http.StatusOK},
	} {
		before := state.n.Load()
		r := do(t, tc.method, srv.URL+tc.path, tc.body, h)
		if r.status != tc.status {
			t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, r.status, r.body, tc.status)
		}
		if n := state.n.Load() - before; n != 1 {
			t.Errorf("%s %s: %d token lookups, want 1", tc.method, tc.path, n)
		}
	}
}

// A token acts for its agent's forks ("alice-fork-N", seed 003's fork
// policy: the watcher runs them with alice's token) and for no other
// agent's, nor for a name that only looks like one of hers.
func TestAuthTokenActsForItsForks(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	for _, path := range []string{"/v1/agents", "/v1/presence/alice-fork-1", "/v1/messages"} {
		body := map[string]string{
			"/v1/agents":                `{"id":"alice-fork-1","role":"engineer"}`,
			"/v1/presence/alice-fork-1": `{"state":"AWAKE"}`,
			"/v1/messages":              `{"from":"alice-fork-1","to":["carol"],"channel":"general","content":{"text":"hi"}}`,
		}[path]
		method := map[bool]string{true: "PUT", false: "POST"}[strings.HasPrefix(path, "/v1/presence/")]
		wantOK(t, e.as(aliceSecret, method, path, body), nil)
	}
	for _, from := range []string{"bob-fork-1", "alicex-fork-1", "alice-fork-0", "alice-forks-1"} {
		msg := wantError(t, e.as(aliceSecret, "POST", "/v1/messages",
			`{"from":"`+from+`","to":["carol"],"channel":"general","content":{"text":"hi"}}`), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(msg, `from "`+from+`"`) {
			t.Errorf("403 for %s: %q", from, msg)
		}
	}
	wantError(t, e.as(aliceSecret, "PUT", "/v1/presence/bob-fork-1", `{"state":"AWAKE"}`), http.StatusForbidden, api.CodeForbidden)
}

// A token registers its agent (or a fork) only with the default role or
// the role its grant names, and only the capabilities its grant lists: a
// role (lead, supervisor, orchestrator: approvals, interrupts, role
// queues) is granted by an admin, not taken.
func TestAuthRolesCannotBeSelfGranted(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	for _, tt := range []struct{ secret, body, want string }{
		{aliceSecret, `{"id":"alice","role":"lead"}`, `role "lead", which this token grants role engineer`},
		{aliceSecret, `{"id":"alice-fork-1","role":"orchestrator"}`, `role "orchestrator"`},
		{aliceSecret, `{"id":"alice","role":"engineer","capabilities":["deploy"]}`, `capability "deploy", which this token does not grant`},
		{rexSecret, `{"id":"rex","role":"supervisor"}`, `role "supervisor", which this token grants no role`},
	} {
		msg := wantError(t, e.as(tt.secret, "POST", "/v1/agents", tt.body), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "admin") {
			t.Errorf("%s: 403 %q does not say %q and who grants it", tt.body, msg, tt.want)
		}
	}
	if writes, _ := e.writes(); writes != 0 {
		t.Fatalf("refused registrations reached the log: %d writes", writes)
	}
	e.waitDenied("DENIED", 4)
	role := func(id string) string {
		t.Helper()
		a, err := e.svc.State().Agent(id)
		if err != nil {
			t.Fatal(err)
		}
		return a.Role
	}
	if r := role("alice"); r != "engineer" {
		t.Fatalf("alice's role is %q after refused self-grants, want engineer", r)
	}

	// What the token grants goes through: an omitted role is the grant's,
	// the default role is always allowed.
	var a api.Agent
	wantOK(t, e.as(aliceSecret, "POST", "/v1/agents", `{"id":"alice-fork-2"}`), &a)
	if a.Role != "engineer" {
		t.Errorf("alice-fork-2 registered with no role has role %q, want her grant engineer", a.Role)
	}
	wantOK(t, e.as(rexSecret, "POST", "/v1/agents", `{"id":"rex"}`), &a)
	if a.Role != api.DefaultRole {
		t.Errorf("rex registered with no role and no grant has role %q, want %s", a.Role, api.DefaultRole)
	}
	// An admin grants anything; a token created with a grant carries it.
	wantOK(t, e.as(adminSecret, "POST", "/v1/agents", `{"id":"bob","role":"lead","capabilities":["deploy"]}`), nil)
	if r := role("bob"); r != "lead" {
		t.Errorf("bob's role is %q after an admin's registration, want lead", r)
	}
	tok, err := e.client(adminSecret).CreateTokenFor(context.Background(), api.TokenRequest{Agent: "dave", AgentRole: "lead", Capabilities: []string{"deploy"}})
	if err != nil {
		t.Fatal(err)
	}
	if tok.AgentRole != "lead" || len(tok.Capabilities) != 1 {
		t.Fatalf("created token %+v lacks its grant", tok)
	}
	wantOK(t, e.as(tok.Token, "POST", "/v1/agents", `{"id":"dave","role":"lead","capabilities":["deploy"]}`), nil)
	if r := role("dave"); r != "lead" {
		t.Errorf("dave's role is %q, want the lead his token grants", r)
	}
}

// A lock belongs to its holder: breaking it (force) needs a moderator or an
// admin. The bulletin, which every agent's status line shows, is never
// written anonymously: a write names its author, ?by= or the token's agent.
func TestAuthLocksAndBulletinHaveOwners(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	wantOK(t, e.as(aliceSecret, "POST", "/v1/locks", `{"path":"src/a.go","holder":"alice","ttl":"1m"}`), nil)
	before, _ := e.writes()
	msg := wantError(t, e.as(bobSecret, "POST", "/v1/locks/release", `{"path":"src/a.go","force":true,"by":"bob"}`), http.StatusForbidden, api.CodeForbidden)
	if !strings.Contains(msg, `force-releases lock "src/a.go"`) || !strings.Contains(msg, "moderator") {
		t.Errorf("bob's forced release: 403 %q does not say what it needs", msg)
	}
	if after, _ := e.writes(); after != before {
		t.Fatalf("the refused force reached the log (%d writes, %d before)", after, before)
	}
	e.waitDenied("[bob] DENIED", 1)
	locks, err := e.svc.State().Locks(api.LockQuery{})
	if err != nil || len(locks.Locks) != 1 || locks.Locks[0].Holder != "alice" {
		t.Fatalf("alice's lock after a refused force: %+v, %v", locks, err)
	}
	var res api.LockResult
	wantOK(t, e.as(rexSecret, "POST", "/v1/locks/release", `{"path":"src/a.go","force":true,"by":"rex"}`), &res)
	if res.Outcome != api.LockReleased {
		t.Errorf("the moderator's forced release: %+v", res)
	}

	// Without ?by the author is the token's agent; the bootstrap admin
	// token has none and must name one.
	wantOK(t, e.as(aliceSecret, "PUT", "/v1/bulletin", `{"system_status":"normal"}`), nil)
	b, err := e.svc.State().Bulletin()
	if err != nil || b.UpdatedBy != "alice" {
		t.Fatalf("bulletin written by alice's token without ?by: updated_by %q (%v)", b.UpdatedBy, err)
	}
	msg = wantError(t, e.as(adminSecret, "PATCH", "/v1/bulletin", `{"system_status":"degraded"}`), http.StatusBadRequest, api.CodeInvalid)
	if !strings.Contains(msg, "by: required") {
		t.Errorf("an anonymous bulletin write: 400 %q does not name by", msg)
	}
	wantOK(t, e.as(adminSecret, "PATCH", "/v1/bulletin?by=ops", `{"system_status":"degraded"}`), nil)
	if b, _ := e.svc.State().Bulletin(); b.UpdatedBy != "ops" {
		t.Errorf("updated_by %q, want ops", b.UpdatedBy)
	}

	// Without auth nobody is known: the write must name its author.
	open := newAuthEnv(t, nil)
	wantError(t, open.as("", "PUT", "/v1/bulletin", `{"system_status":"normal"}`), http.StatusBadRequest, api.CodeInvalid)
	wantOK(t, open.as("", "PUT", "/v1/bulletin?by=alice", `{"system_status":"normal"}`), nil)
}

// A browser asks for /favicon.ico wherever it goes: a public 404, not a
// 401 and not a DENIED audit line.
func TestFaviconIsNotAudited(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	for range 3 {
		wantError(t, e.as("", "GET", "/favicon.ico", ""), http.StatusNotFound, api.CodeNotFound)
	}
	// A request that is audited, after them: once its line is there, the
	// favicon's would be too.
	wantUnauthorized(t, e.as("", "GET", "/v1/channels", ""), false)
	for _, d := range e.waitDenied("missing bearer token", 1) {
		if strings.Contains(d.Line(), "favicon") {
			t.Errorf("favicon.ico audited: %s", d.Line())
		}
	}
}
