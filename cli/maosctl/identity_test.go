package maosctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// newCountingAuthEnv is newAuthEnv whose server counts the GET
// /v1/whoami requests it answers into *whoami.
func newCountingAuthEnv(t *testing.T) (*testEnv, *atomic.Int64) {
	t.Helper()
	e := newAuthEnv(t)
	var whoami atomic.Int64
	h := transport.NewServer(e.svc, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: testAdminToken}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/whoami" {
			whoami.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	return e, &whoami
}

// asOnce runs args with --token tok and fails the test unless the command
// succeeded having asked the node who the token is once: for the default,
// and not again.
func asOnce(t *testing.T, e *testEnv, whoami *atomic.Int64, tok string, args ...string) string {
	t.Helper()
	before := whoami.Load()
	r := e.as(tok, args...)
	if r.err != nil {
		t.Errorf("maosctl %s with an agent's token: %v stderr=%q", strings.Join(args, " "), r.err, r.errOut)
	}
	if n := whoami.Load() - before; n != 1 {
		t.Errorf("maosctl %s asked /v1/whoami %d times; want once", strings.Join(args, " "), n)
	}
	return r.out
}

// With an agent's token and no --from, --approver or --agent, send,
// approval approve and inbox act as the token's agent, asking the node
// who that is once per command.
func TestActingAgentFromToken(t *testing.T) {
	e, whoami := newCountingAuthEnv(t)
	codex := e.createToken("codex", "agent")
	alice := e.createToken("alice", "agent")
	// The message of (a), sent by the admin as codex when (a) fails, so
	// (c) is checked on its own.
	msgID := "msg-identity-1"

	t.Run("send", func(t *testing.T) {
		var sent api.SendResponse
		if err := json.Unmarshal([]byte(asOnce(t, e, whoami, codex.Token, "--json", "send", "--id", msgID, "--to", "alice", "--text", "hi")), &sent); err != nil {
			e.ok("--token", testAdminToken, "send", "--id", msgID, "--from", "codex", "--to", "alice", "--text", "hi")
			t.Fatalf("send --json: %v", err)
		}
		var m api.Message
		if r := e.as(testAdminToken, "--json", "get", sent.ID); r.err != nil || json.Unmarshal([]byte(r.out), &m) != nil || m.From != "codex" {
			t.Errorf("get %s = %q (%v): want a message from codex, the token's agent", sent.ID, r.out, r.err)
		}
	})

	t.Run("inbox", func(t *testing.T) {
		if out := asOnce(t, e, whoami, alice.Token, "--json", "inbox"); !strings.Contains(out, msgID) {
			t.Errorf("inbox with alice's token = %q; want alice's inbox, with %s", out, msgID)
		}
	})

	t.Run("approval approve", func(t *testing.T) {
		var a api.Approval
		r := e.run(`{"cmd":"deploy"}`, "--token", testAdminToken, "--json", "approval", "request", "--from", "codex", "--approver", "alice",
			"--title", "deploy", "--action", "-")
		if r.err != nil || json.Unmarshal([]byte(r.out), &a) != nil || a.ID == "" {
			t.Fatalf("approval request: %q %v stderr=%q", r.out, r.err, r.errOut)
		}
		var after api.Approval
		if err := json.Unmarshal([]byte(asOnce(t, e, whoami, alice.Token, "--json", "approval", "approve", a.ID)), &after); err != nil {
			t.Fatalf("approval approve --json: %v", err)
		}
		if after.State != api.ApprovalApproved || len(after.Decisions) != 1 || after.Decisions[0].Approver != "alice" {
			t.Errorf("after approve with alice's token: %+v; want approved by alice", after)
		}
	})

	// maosctl mcp acts as the token's agent too; its check that the
	// token speaks for that agent reuses the answer.
	t.Run("mcp", func(t *testing.T) { asOnce(t, e, whoami, codex.Token, "mcp") })

	// A flag still wins: the node, not the client, refuses another agent.
	if r := e.as(codex.Token, "send", "--from", "alice", "--to", "alice", "--text", "x"); r.err == nil || !strings.Contains(r.err.Error(), "403") {
		t.Errorf("send --from alice with codex's token: %v; want the node's 403", r.err)
	}
}

// (d) An admin token has no agent: no default, a usage error naming the
// flag and how to give it.
func TestActingAgentAdminTokenNoDefault(t *testing.T) {
	e, _ := newCountingAuthEnv(t)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"send", "--to", "all", "--text", "hi"}, "--from"},
		{[]string{"approval", "approve", "appr-x"}, "--approver"},
		{[]string{"inbox"}, "--agent"},
	} {
		r := e.as(testAdminToken, tc.args...)
		want := tc.flag + " is required: give it, set $MAOS_AGENT_ID, or use an agent's token"
		if r.err == nil || ExitCode(r.err) != 1 || !strings.Contains(r.errOut, want) {
			t.Errorf("maosctl %s with the admin token: err=%v stderr=%q; want %q", strings.Join(tc.args, " "), r.err, r.errOut, want)
		}
	}
}

// The hook and the status line, which an agent's CLI runs without flags
// of its own, take the agent from the token too.
func TestActingAgentFromTokenHooks(t *testing.T) {
	e, whoami := newCountingAuthEnv(t)
	codex := e.createToken("codex", "agent")
	before := whoami.Load()
	r := e.run(`{"hook_event_name":"SessionStart","source":"startup"}`, "--token", codex.Token, "hook", "claude-code")
	if r.err != nil || !strings.Contains(r.out, "You are maos agent codex") {
		t.Errorf("hook SessionStart with codex's token: err=%v out=%q stderr=%q; want codex's identity", r.err, r.out, r.errOut)
	}
	if n := whoami.Load() - before; n != 1 {
		t.Errorf("hook asked /v1/whoami %d times; want once", n)
	}
	if out := asOnce(t, e, whoami, codex.Token, "--json", "status-line"); !strings.Contains(out, `"agent": "codex"`) {
		t.Errorf("status-line --json with codex's token = %q; want codex's", out)
	}
}
