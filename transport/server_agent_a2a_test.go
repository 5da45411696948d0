package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

const a2aSecret = "remote-bearer-0123456789abcdef"

// TestAgentA2ARegistryKeepsTheCredentialToAdmins: an admin registers a
// remote A2A agent with a credential; the plain read, the list and the
// audit never carry it, only GET /v1/agents/{id}/a2a does, and only for an
// admin token (an agent's or a moderator's gets 403); an agent's token may
// not register an A2A remote, not even for itself.
func TestAgentA2ARegistryKeepsTheCredentialToAdmins(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	body := `{"id":"ext","a2a":{"url":"http://127.0.0.1:9/agent","credential":"` + a2aSecret + `"}}`
	if r := e.as(adminSecret, "POST", "/v1/agents", body); r.status != 200 {
		t.Fatalf("admin register with a2a: %d %s", r.status, r.body)
	} else if strings.Contains(string(r.body), a2aSecret) || !strings.Contains(string(r.body), `"a2a":{"url":"http://127.0.0.1:9/agent","credential":true}`) {
		t.Fatalf("register answer %s: want the URL and credential true, never the credential", r.body)
	}
	for _, path := range []string{"/v1/agents/ext", "/v1/agents", "/v1/audit"} {
		r := e.as(adminSecret, "GET", path, "")
		if r.status != 200 || strings.Contains(string(r.body), a2aSecret) {
			t.Errorf("GET %s: %d, carries the credential: %v", path, r.status, strings.Contains(string(r.body), a2aSecret))
		}
	}
	got, err := e.client(adminSecret).AgentA2A(context.Background(), "ext", api.Local)
	if err != nil || got.Credential != a2aSecret || got.URL != "http://127.0.0.1:9/agent" {
		t.Fatalf("admin AgentA2A = %+v, %v; want the URL and the credential", got, err)
	}
	for _, secret := range []string{aliceSecret, rexSecret} {
		if r := e.as(secret, "GET", "/v1/agents/ext/a2a", ""); r.status != 403 || strings.Contains(string(r.body), a2aSecret) {
			t.Errorf("GET /v1/agents/ext/a2a with a non-admin token: %d %s, want 403", r.status, r.body)
		}
	}
	if _, err := e.client(aliceSecret).AgentA2A(context.Background(), "ext", api.Local); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("client AgentA2A as alice = %v, want forbidden", err)
	}
	if r := e.as(adminSecret, "GET", "/v1/agents/alice/a2a", ""); r.status != 404 {
		t.Errorf("GET /v1/agents/alice/a2a (a plain agent): %d, want 404", r.status)
	}
	self := `{"id":"alice","role":"engineer","a2a":{"url":"http://127.0.0.1:9/"}}`
	if r := e.as(aliceSecret, "POST", "/v1/agents", self); r.status != 403 || !strings.Contains(string(r.body), "a2a") {
		t.Errorf("alice registers herself as an A2A remote: %d %s, want 403 naming a2a", r.status, r.body)
	}
}

// TestAgentA2AValidation: a bad URL or credential is a 400 naming the
// field and the limit, and nothing is stored.
func TestAgentA2AValidation(t *testing.T) {
	e := newAuthEnv(t, nil)
	long := strings.Repeat("a", api.MaxA2AURLLen)
	for _, tc := range []struct{ body, want string }{
		{`{"id":"ext","a2a":{}}`, "a2a.url: required"},
		{`{"id":"ext","a2a":{"url":"ftp://host/x"}}`, "a2a.url: must be an absolute http or https URL"},
		{`{"id":"ext","a2a":{"url":"/relative"}}`, "a2a.url: must be an absolute http or https URL"},
		{`{"id":"ext","a2a":{"url":"http://u:p@host/"}}`, "a2a.url: must be an absolute http or https URL without user info"},
		{`{"id":"ext","a2a":{"url":"http://host/` + long + `"}}`, "a2a.url: 2060 bytes, at most 2048"},
		{`{"id":"ext","a2a":{"url":"http://host/","credential":"two words"}}`, "a2a.credential: must be one token"},
		{`{"id":"ext","a2a":{"url":"http://host/","credential":"` + strings.Repeat("x", api.MaxA2ACredentialLen+1) + `"}}`, "a2a.credential: 4097 bytes, at most 4096"},
	} {
		r := e.as("", "POST", "/v1/agents", tc.body)
		if code, msg := errorOf(t, r.body); r.status != http.StatusBadRequest || code != "invalid" || !strings.HasPrefix(msg, tc.want) {
			t.Errorf("register %.80s: %d %s %q, want 400 invalid %q", tc.body, r.status, code, msg, tc.want)
		}
	}
	if r := e.as("", "GET", "/v1/agents/ext", ""); r.status != 404 {
		t.Errorf("after refused registrations, GET /v1/agents/ext: %d, want 404", r.status)
	}
	// The credential is a secret on purpose: the guard does not scan it.
	ok := `{"id":"ext","a2a":{"url":"https://remote.example/a2a","credential":"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}}`
	if r := e.as("", "POST", "/v1/agents", ok); r.status != 200 {
		t.Errorf("register with a token-looking credential: %d %s, want 200", r.status, r.body)
	}
}
