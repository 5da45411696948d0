package maosctl

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// testAdminToken is the admin bootstrap token of newAuthEnv.
const testAdminToken = "cli-test-admin-token-0123456789abcdef"

// clearTokenEnv keeps the caller's token variables out of a test.
func clearTokenEnv(t *testing.T) {
	for _, k := range []string{envToken, envTokenFile} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// newAuthEnv is newTestEnv with a real state machine and auth on: the
// API wants bearer tokens and testAdminToken is the admin one.
func newAuthEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newTestEnv(t)
	clearTokenEnv(t)
	srv := httptest.NewServer(transport.NewServer(e.svc, transport.ServerOptions{
		Auth: &transport.AuthConfig{AdminToken: testAdminToken},
	}))
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	return e
}

// as runs args with --token tok.
func (e *testEnv) as(tok string, args ...string) runResult {
	return e.run("", append([]string{"--token", tok}, args...)...)
}

// createToken makes a token for agent with role through the admin token
// and returns what --json printed.
func (e *testEnv) createToken(agent, role string) api.TokenCreated {
	e.t.Helper()
	r := e.as(testAdminToken, "--json", "token", "create", "--agent", agent, "--role", role)
	if r.err != nil {
		e.t.Fatalf("token create --agent %s: %v stderr=%q", agent, r.err, r.errOut)
	}
	var tok api.TokenCreated
	if err := json.Unmarshal([]byte(r.out), &tok); err != nil {
		e.t.Fatalf("token create --json printed %q: %v", r.out, err)
	}
	if tok.ID == "" || tok.Token == "" || tok.Agent != agent || string(tok.Role) != role {
		e.t.Fatalf("token create --agent %s --role %s = %+v", agent, role, tok)
	}
	return tok
}

// create prints the secret alone on stdout and the id and the
// cannot-be-shown-again notice on stderr; the secret then works; list shows
// the token without its secret; revoke makes the node refuse it.
func TestTokenCreateListRevoke(t *testing.T) {
	e := newAuthEnv(t)
	r := e.as(testAdminToken, "token", "create", "--agent", "codex")
	if r.err != nil {
		t.Fatalf("token create: %v stderr=%q", r.err, r.errOut)
	}
	secret := strings.TrimSuffix(r.out, "\n")
	if secret == "" || strings.ContainsAny(secret, " \n\t") {
		t.Fatalf("token create stdout = %q; want the secret alone on one line", r.out)
	}
	if !strings.Contains(r.errOut, "cannot be shown") || !strings.Contains(r.errOut, "only its hash is stored") ||
		!strings.Contains(r.errOut, "codex") || strings.Contains(r.errOut, secret) {
		t.Errorf("token create stderr = %q; want the notice that the secret cannot be shown again, without the secret", r.errOut)
	}
	mod := e.createToken("supervisor", "moderator")

	if r := e.as(secret, "send", "--from", "codex", "--to", "all", "--channel", "general", "--text", "hi"); r.err != nil {
		t.Fatalf("send with the new token: %v stderr=%q", r.err, r.errOut)
	}

	r = e.as(testAdminToken, "token", "list")
	if r.err != nil {
		t.Fatalf("token list: %v stderr=%q", r.err, r.errOut)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "REVOKED") {
		t.Fatalf("token list = %q; want a header and two tokens", r.out)
	}
	if strings.Contains(r.out, secret) || strings.Contains(r.out, mod.Token) {
		t.Errorf("token list shows a secret:\n%s", r.out)
	}
	var codexID string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 5 || f[4] != "-" {
			t.Errorf("token list line %q: want id, agent, role, created and revoked '-'", l)
			continue
		}
		switch f[1] {
		case "codex":
			codexID = f[0]
			if f[2] != "agent" {
				t.Errorf("codex's token has role %q; want agent", f[2])
			}
		case "supervisor":
			if f[0] != mod.ID || f[2] != "moderator" {
				t.Errorf("supervisor's token line %q; want id %s, role moderator", l, mod.ID)
			}
		default:
			t.Errorf("token list line %q: unknown agent", l)
		}
	}

	r = e.as(testAdminToken, "token", "revoke", codexID)
	if r.err != nil || r.out != "revoked "+codexID+"\n" {
		t.Fatalf("token revoke %s: out=%q err=%v stderr=%q", codexID, r.out, r.err, r.errOut)
	}
	r = e.as(testAdminToken, "--json", "token", "list")
	var list []api.Token
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || r.err != nil {
		t.Fatalf("token list --json = %q, %v: %v", r.out, r.err, err)
	}
	for _, tk := range list {
		if revoked := !tk.RevokedAt.IsZero(); revoked != (tk.ID == codexID) {
			t.Errorf("token %s (%s): revoked=%v after revoking %s", tk.ID, tk.Agent, revoked, codexID)
		}
	}
	r = e.as(secret, "channels")
	if r.err == nil || !strings.Contains(r.err.Error(), "401") || !strings.Contains(r.err.Error(), "refused") {
		t.Errorf("channels with the revoked token: err=%v; want 401 with a hint that the token was refused", r.err)
	}
}

// Bad command lines fail before calling the node, naming the flag.
func TestTokenUsageErrors(t *testing.T) {
	e := newAuthEnv(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"token", "create"}, []string{"--agent"}},
		{[]string{"token", "create", "--agent", "codex", "--role", "boss"}, []string{"--role", `"boss"`, "agent, moderator, admin"}},
		{[]string{"token", "revoke"}, []string{"missing ID"}},
		{[]string{"token", "revoke", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"token", "list", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"token", "frobnicate"}, []string{`unknown command "frobnicate"`}},
		{[]string{"channels", "--token", "x"}, []string{"--token is a global flag"}},
	} {
		r := e.as(testAdminToken, tc.args...)
		for _, w := range tc.want {
			if r.err == nil || !strings.Contains(r.err.Error(), w) {
				t.Errorf("maosctl %v: err=%v; want it to say %q", tc.args, r.err, w)
			}
		}
	}
	if r := e.as(testAdminToken, "--json", "token", "list"); r.err != nil || strings.TrimSpace(r.out) != "[]" {
		t.Errorf("token list after refused commands = %q, %v; want none created", r.out, r.err)
	}
}

// A 401 says what to do: without a token, set MAOS_TOKEN; with a bad one,
// that it was refused. An agent's token cannot manage tokens (403).
func TestUnauthorizedHints(t *testing.T) {
	e := newAuthEnv(t)
	r := e.run("", "channels")
	if r.err == nil || !strings.Contains(r.err.Error(), "401") || !strings.Contains(r.err.Error(), "set MAOS_TOKEN") ||
		!strings.Contains(r.errOut, "maosctl token create") {
		t.Errorf("channels without a token: err=%v stderr=%q; want 401 and a hint to set MAOS_TOKEN", r.err, r.errOut)
	}
	r = e.as("not-a-token", "channels")
	if r.err == nil || !strings.Contains(r.err.Error(), "401") || !strings.Contains(r.err.Error(), "was refused") {
		t.Errorf("channels with a wrong token: err=%v; want 401 saying the token was refused", r.err)
	}
	agent := e.createToken("codex", "agent")
	r = e.as(agent.Token, "token", "create", "--agent", "codex", "--role", "admin")
	if r.err == nil || !strings.Contains(r.err.Error(), "403") || strings.Contains(r.err.Error(), "MAOS_TOKEN") {
		t.Errorf("token create with an agent token: err=%v; want 403 without the 401 hint", r.err)
	}
}

// The token comes from --token, $MAOS_TOKEN, --token-file or
// $MAOS_TOKEN_FILE; --token wins over a file, which is then not read; a
// bad file is refused naming --token-file.
func TestTokenSources(t *testing.T) {
	e := newAuthEnv(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(good, []byte("  "+testAdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.token")
	if err := os.WriteFile(empty, []byte("\n \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listOK := func(what string, args ...string) {
		t.Helper()
		if r := e.run("", append(args, "token", "list")...); r.err != nil {
			t.Errorf("%s: token list: %v stderr=%q", what, r.err, r.errOut)
		}
	}
	listOK("--token-file", "--token-file", good)
	listOK("--token over a missing --token-file", "--token", testAdminToken, "--token-file", filepath.Join(dir, "missing"))

	t.Setenv(envTokenFile, good)
	listOK("$MAOS_TOKEN_FILE")
	t.Setenv(envTokenFile, "")
	t.Setenv(envToken, testAdminToken)
	listOK("$MAOS_TOKEN")
	t.Setenv(envToken, "")

	for _, tc := range []struct{ file, want string }{
		{empty, "is empty"},
		{filepath.Join(dir, "missing"), "no such file"},
		{dir, "not a regular file"},
	} {
		r := e.run("", "--token-file", tc.file, "token", "list")
		if r.err == nil || !strings.Contains(r.err.Error(), "--token-file") || !strings.Contains(r.err.Error(), tc.want) ||
			!strings.HasPrefix(r.errOut, "maosctl: --token-file") {
			t.Errorf("--token-file %s: err=%v stderr=%q; want an error naming --token-file saying %q", tc.file, r.err, r.errOut, tc.want)
		}
	}
	// An agent's token is made by the cluster: the hint for an empty file
	// says how, not the random bytes of an admin token.
	r := e.run("", "--token-file", empty, "token", "list")
	if r.err == nil || !strings.Contains(r.err.Error(), "maosctl token create --agent ID > "+empty) || strings.Contains(r.err.Error(), "openssl") {
		t.Errorf("--token-file of an empty file: %v; want the hint 'maosctl token create --agent ID > FILE' and no openssl", r.err)
	}
}

// headerRecorder serves the fake node and records the Authorization
// header of every request.
type headerRecorder struct {
	mu   sync.Mutex
	seen map[string]string // path -> Authorization
	next http.Handler
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen[r.URL.Path] = r.Header.Get("Authorization")
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

// take returns what was recorded since the last take and forgets it.
func (h *headerRecorder) take() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.seen
	h.seen = map[string]string{}
	return out
}

// Every client maosctl builds carries the global token: the shared one
// (send, status-line, and watch, hook and the others through it), bench's
// and mcp's.
func TestTokenReachesEveryClient(t *testing.T) {
	e := newTestEnv(t)
	clearTokenEnv(t)
	rec := &headerRecorder{seen: map[string]string{}, next: transport.NewServer(e.svc, transport.ServerOptions{})}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	const tok = "tok-secret-for-every-client"
	check := func(what string) {
		t.Helper()
		seen := rec.take()
		if len(seen) == 0 {
			t.Errorf("%s: no request reached the node", what)
		}
		for path, h := range seen {
			if h != "Bearer "+tok {
				t.Errorf("%s: %s carried Authorization %q; want the --token", what, path, h)
			}
		}
	}
	run := func(args ...string) {
		t.Helper()
		if r := runApp(addr, "", append([]string{"--token", tok}, args...)...); r.err != nil {
			t.Fatalf("maosctl %v: %v stderr=%q", args, r.err, r.errOut)
		}
	}
	run("send", "--from", "codex", "--to", "all", "--channel", "general", "--text", "hi")
	check("send")
	run("status-line", "--agent", "codex")
	check("status-line")
	run("bench", "send", "--count", "2", "--concurrency", "1", "--size", "16")
	check("bench send")

	// mcp builds its own client: one tool call must carry the token too.
	inR, inW := io.Pipe()
	app := App()
	app.Reader, app.Writer, app.ErrWriter = inR, io.Discard, io.Discard
	done := make(chan error, 1)
	go func() {
		done <- app.Run([]string{"maosctl", "--addr", addr, "--token", tok, "mcp", "--agent", "claude"})
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"id":"msg-unknown"}}}`,
	} {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	var seen map[string]string
	deadline := testenv.Deadline(t)
	for len(seen) == 0 && time.Now().Before(deadline) {
		rec.mu.Lock()
		seen = map[string]string{}
		for k, v := range rec.seen {
			seen[k] = v
		}
		rec.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	inW.Close()
	select {
	case <-done:
	case <-time.After(time.Until(testenv.Deadline(t))):
		t.Fatal("mcp did not end after its input closed")
	}
	check("mcp")
}

// --role supervisor is the moderator role under the name the issue and
// the seed systems use.
func TestTokenSupervisorIsModerator(t *testing.T) {
	e := newAuthEnv(t)
	r := e.as(testAdminToken, "--json", "token", "create", "--agent", "lead", "--role", "supervisor")
	var tok api.TokenCreated
	if r.err != nil || json.Unmarshal([]byte(r.out), &tok) != nil || tok.Role != string(api.RoleModerator) {
		t.Fatalf("token create --role supervisor = %q, %v; want a moderator token", r.out, r.err)
	}
	if r := e.as(testAdminToken, "token", "create", "--agent", "lead", "--role", "boss"); r.err == nil || !strings.Contains(r.err.Error(), `--role "boss"`) {
		t.Errorf("token create --role boss: %v; want a usage error naming the role", r.err)
	}
}

// token whoami names the token's agent and role; maosctl mcp refuses to
// start with another agent's token instead of failing every tool call.
func TestTokenWhoamiAndMCPCheck(t *testing.T) {
	e := newAuthEnv(t)
	codex := e.createToken("codex", "agent")
	if r := e.as(codex.Token, "token", "whoami"); r.err != nil || r.out != "agent codex, role agent, token "+codex.ID+"\n" {
		t.Errorf("whoami with codex's token: %q, %v", r.out, r.err)
	}
	if r := e.as(testAdminToken, "token", "whoami"); r.err != nil || !strings.HasPrefix(r.out, "admin bootstrap token (role admin") {
		t.Errorf("whoami with the admin token: %q, %v", r.out, r.err)
	}
	var me api.WhoAmI
	if r := e.as(codex.Token, "--json", "token", "whoami"); r.err != nil || json.Unmarshal([]byte(r.out), &me) != nil ||
		me != (api.WhoAmI{Auth: true, Agent: "codex", Role: api.RoleAgent, TokenID: codex.ID}) {
		t.Errorf("whoami --json: %q, %v", r.out, r.err)
	}
	if r := e.as("maos_nope", "token", "whoami"); r.err == nil || !strings.Contains(r.err.Error(), "401") {
		t.Errorf("whoami with an unknown token: %v; want 401", r.err)
	}
	if r := e.as(codex.Token, "mcp", "--agent", "claude"); r.err == nil || !strings.Contains(r.err.Error(), "agent codex's") {
		t.Errorf("mcp --agent claude with codex's token: %v; want a refusal naming whose token it is", r.err)
	}
}

// Without --auth whoami says so.
func TestTokenWhoamiAuthOff(t *testing.T) {
	e := newTestEnv(t)
	if out := e.ok("token", "whoami"); !strings.HasPrefix(out, "auth off") {
		t.Errorf("whoami without auth: %q", out)
	}
}
