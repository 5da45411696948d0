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

// An agent sets, reads and clears its own policy through the client;
// set_by is its token's agent whatever the body says.
func TestPolicyRoundTrip(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	alice := e.client(aliceSecret)
	p, err := alice.SetPolicy(ctx, "alice", api.PolicyRequest{Mode: api.PolicyQuiet, ForSeconds: 600, SetBy: "bob"})
	if err != nil || p.Mode != api.PolicyQuiet || p.SetBy != "alice" || p.Until.Sub(p.SetAt).Seconds() != 600 {
		t.Fatalf("SetPolicy = %+v, %v; want quiet set by alice for 600 s", p, err)
	}
	if _, err := alice.SetPolicy(ctx, "alice", api.PolicyRequest{Mode: api.PolicyInterrupt, From: "bob"}); err != nil {
		t.Fatal(err)
	}
	// Any token reads it, a sender's too.
	set, err := e.client(bobSecret).Policy(ctx, "alice", api.Strong)
	if err != nil || len(set.Policies) != 2 || set.Policies[0].Mode != api.PolicyQuiet || set.Policies[1].From != "bob" {
		t.Fatalf("Policy = %+v, %v", set, err)
	}
	c, err := alice.ClearPolicy(ctx, "alice", "bob")
	if err != nil || !c.Cleared {
		t.Fatalf("ClearPolicy(bob) = %+v, %v; want cleared", c, err)
	}
	if c, err := alice.ClearPolicy(ctx, "alice", ""); err != nil || !c.Cleared {
		t.Fatalf("ClearPolicy = %+v, %v; want cleared", c, err)
	}
	if set, err := alice.Policy(ctx, "alice", api.Strong); err != nil || len(set.Policies) != 0 || set.Policies == nil {
		t.Fatalf("Policy after the clears = %+v, %v; want an empty list", set, err)
	}
}

func TestPolicyAuth(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	// Another agent, and a moderator, may not change bob's policy.
	for _, secret := range []string{aliceSecret, rexSecret} {
		msg := wantError(t, e.as(secret, "PUT", "/v1/agents/bob/policy", `{"mode":"quiet"}`), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(msg, "acts as agent bob") {
			t.Errorf("403 %q does not say it acts as bob", msg)
		}
		wantError(t, e.as(secret, "DELETE", "/v1/agents/bob/policy", ""), http.StatusForbidden, api.CodeForbidden)
	}
	if writes, _ := e.writes(); writes != 0 {
		t.Errorf("refused policy writes reached the log: %d", writes)
	}
	// Without a token nothing is read.
	wantError(t, e.as("", "GET", "/v1/agents/bob/policy", ""), http.StatusUnauthorized, api.CodeUnauthorized)
	// An admin may set it, in another's name.
	var p api.Policy
	wantOK(t, e.as(opsSecret, "PUT", "/v1/agents/bob/policy", `{"mode":"fork","from":"alice"}`), &p)
	if p.SetBy != "ops" || p.From != "alice" {
		t.Errorf("admin set = %+v, want set by ops (the token's agent) for alice's mail", p)
	}
	wantOK(t, e.as(adminSecret, "PUT", "/v1/agents/bob/policy", `{"mode":"queue","set_by":"lead"}`), &p)
	if p.SetBy != "lead" {
		t.Errorf("bootstrap admin set = %+v, want set_by lead from the body", p)
	}
}

func TestPolicyRefusals(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	for _, tt := range []struct{ method, path, body, want string }{
		{"PUT", "/v1/agents/bob/policy", `{}`, "mode: required"},
		{"PUT", "/v1/agents/bob/policy", `{"mode":"loud"}`, `mode: "loud" is not a mode`},
		{"PUT", "/v1/agents/bob/policy", `{"mode":"quiet","for_seconds":9999999}`, "for_seconds: 9999999 is out of range: 0 (no end) to 2592000"},
		{"PUT", "/v1/agents/bob/policy", `{"mode":"quiet","from":"Bad"}`, "from"},
		{"DELETE", "/v1/agents/bob/policy?from=Bad", "", "from"},
		{"GET", "/v1/agents/Bob/policy", "", "id"},
	} {
		msg := wantError(t, e.as(adminSecret, tt.method, tt.path, tt.body), http.StatusBadRequest, api.CodeInvalid)
		if !strings.Contains(msg, tt.want) {
			t.Errorf("%s %s %s: %q, want it to say %q", tt.method, tt.path, tt.body, msg, tt.want)
		}
	}
	wantError(t, e.as(adminSecret, "PUT", "/v1/agents/bob/policy", `{"mode":"quiet","speed":1}`), http.StatusBadRequest, "unknown_field")
	_, err := e.client(bobSecret).SetPolicy(context.Background(), "bob", api.PolicyRequest{Mode: "loud"})
	if !errors.Is(err, api.ErrInvalid) {
		t.Errorf("client SetPolicy(loud) = %v, want api.ErrInvalid", err)
	}
}
