package transport_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// newPushEnv serves the API with auth, allow as --a2a-push-allow, alice's
// and bob's agent tokens and rex's moderator token, and task t-push from
// alice to bob.
func newPushEnv(t *testing.T, allow []string) (url string, admin, alice, bob, rex *client.Client) {
	t.Helper()
	svc := transporttest.New(t)
	for _, tok := range []struct{ id, agent, role, secret string }{
		{"tok-alice", "alice", api.TokenRoleAgent, aliceSecret}, {"tok-bob", "bob", api.TokenRoleAgent, bobSecret},
		{"tok-rex", "rex", api.TokenRoleModerator, rexSecret},
	} {
		if _, err := svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: tok.id, Agent: tok.agent, Role: tok.role, Hash: fsm.HashToken(tok.secret)}); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, svc, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}, PushAllow: allow})
	as := func(s string) *client.Client { return client.NewClient(srv.URL, nil).WithToken(s) }
	admin, alice, bob, rex = as(adminSecret), as(aliceSecret), as(bobSecret), as(rexSecret)
	if _, err := alice.CreateTask(context.Background(), api.TaskCreateCommand{ID: "t-push", From: "alice", To: "bob", Title: "t"}); err != nil {
		t.Fatal(err)
	}
	return srv.URL, admin, alice, bob, rex
}

// TestPushConfigRoutes: the creator sets a config on an allowed host
// (another host, and any host with push off, is 400 naming config.url);
// bob may neither set one as alice (403) nor as himself (403: not the
// creator) nor read them (404); alice and a moderator read it without
// credentials; only an admin reads the credentials and the cursor;
// alice deletes it.
func TestPushConfigRoutes(t *testing.T) {
	ctx := context.Background()
	_, admin, alice, bob, rex := newPushEnv(t, []string{"127.0.0.1"})
	const secret = "cred-abcdef0123456789"
	cfg := api.PushConfig{TaskID: "t-push", ID: "hook", URL: "http://127.0.0.1:9/hook", Token: "tok",
		Authentication: &api.PushAuthentication{Scheme: "Bearer", Credentials: secret}}
	set := func(cl *client.Client, from string, p api.PushConfig) error {
		_, err := cl.SetPushConfig(ctx, api.PushConfigSetCommand{From: from, Config: p})
		return err
	}
	other := cfg
	other.URL = "http://127.0.0.2:9/hook"
	if err := set(alice, "alice", other); apiStatus(err) != 400 || !strings.Contains(err.Error(), "config.url: host 127.0.0.2:9 is not one this node may call") {
		t.Errorf("a host off the allowlist: %v, want 400 naming config.url", err)
	}
	if err := set(bob, "alice", cfg); apiStatus(err) != 403 {
		t.Errorf("bob acting as alice: %v, want 403", err)
	}
	if err := set(bob, "bob", cfg); apiStatus(err) != 403 || !strings.Contains(err.Error(), "only its creator") {
		t.Errorf("bob, not the creator: %v, want 403", err)
	}
	if err := set(alice, "alice", cfg); err != nil {
		t.Fatal(err)
	}
	for name, cl := range map[string]*client.Client{"alice": alice, "rex": rex, "admin": admin} {
		page, err := cl.PushConfigs(ctx, "t-push", api.Strong)
		data, _ := json.Marshal(page)
		if err != nil || len(page.Configs) != 1 || strings.Contains(string(data), secret) {
			t.Errorf("%s reads %s, %v: want the config without credentials", name, data, err)
		}
	}
	if _, err := bob.PushConfigs(ctx, "t-push", api.Strong); apiStatus(err) != 404 {
		t.Errorf("bob reads alice's push configs: %v, want 404", err)
	}
	if _, err := alice.PushConfigsWithCredentials(ctx, "t-push"); apiStatus(err) != 403 {
		t.Errorf("alice reads the credentials: %v, want 403", err)
	}
	if _, err := alice.SetPushCursor(ctx, 5); apiStatus(err) != 403 {
		t.Errorf("alice moves the cursor: %v, want 403", err)
	}
	full, err := admin.PushConfigsWithCredentials(ctx, "t-push")
	if err != nil || len(full.Configs) != 1 || full.Configs[0].Authentication.Credentials != secret {
		t.Fatalf("the admin's read: %+v, %v", full, err)
	}
	if cur, err := admin.SetPushCursor(ctx, 7); err != nil || cur.Index != 7 || cur.Since == 0 {
		t.Errorf("cursor %+v, %v: want 7 and since the config's entry", cur, err)
	}
	if _, err := bob.DeletePushConfig(ctx, "t-push", "hook", "bob"); apiStatus(err) != 403 {
		t.Errorf("bob deletes: %v, want 403", err)
	}
	if _, err := alice.DeletePushConfig(ctx, "t-push", "hook", "alice"); err != nil {
		t.Fatal(err)
	}
	if page, err := alice.PushConfigs(ctx, "t-push", api.Strong); err != nil || len(page.Configs) != 0 {
		t.Errorf("after the delete: %+v, %v", page, err)
	}
}

// TestPushConfigOffWithoutAllowlist: a node without --a2a-push-allow
// refuses every push config.
func TestPushConfigOffWithoutAllowlist(t *testing.T) {
	_, _, alice, _, _ := newPushEnv(t, nil)
	_, err := alice.SetPushConfig(context.Background(), api.PushConfigSetCommand{From: "alice",
		Config: api.PushConfig{TaskID: "t-push", ID: "hook", URL: "http://127.0.0.1:9/"}})
	if apiStatus(err) != 400 || !strings.Contains(err.Error(), "push notifications are off on this node") {
		t.Errorf("set with push off: %v, want 400 saying push is off", err)
	}
}
