package maosd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

// clearAuthEnv keeps the caller's maosd auth variables out of a test.
func clearAuthEnv(t *testing.T) {
	for _, k := range []string{"MAOS_AUTH", "MAOS_ADMIN_TOKEN_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// writeTokenFile writes content to a new file with mode perm and returns
// its path.
func writeTokenFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// maosd refuses bad auth flags before touching the data dir, naming the
// flag and saying what it wants.
func TestRefusesBadAuthFlags(t *testing.T) {
	clearAuthEnv(t)
	dir := filepath.Join(t.TempDir(), "data")
	good := writeTokenFile(t, strings.Repeat("a", 44)+"\n", 0o600)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--auth"}, []string{"--auth needs --admin-token-file", "openssl rand"}},
		{[]string{"--admin-token-file", good}, []string{"--admin-token-file is only read with --auth"}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, "", 0o600)}, []string{"--admin-token-file", "is empty", "openssl rand -base64 32 > "}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, " \n\t\n", 0o600)}, []string{"--admin-token-file", "is empty"}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, "0123456789abcdef0\nsecond-line-here", 0o600)},
			[]string{"--admin-token-file", "more than one line"}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, "0123456789 abcdef0", 0o600)},
			[]string{"--admin-token-file", "blank or control character"}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, "short\n", 0o600)},
			[]string{"--admin-token-file", "5 bytes", "want 16..512"}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, "0123456789abcdef!<>\n", 0o600)},
			[]string{"--admin-token-file", "cannot carry"}},
		{[]string{"--auth", "--admin-token-file", writeTokenFile(t, strings.Repeat("a", 5000), 0o600)},
			[]string{"--admin-token-file", "larger than 4096 bytes"}},
		{[]string{"--auth", "--admin-token-file", filepath.Join(t.TempDir(), "missing")}, []string{"--admin-token-file", "no such file"}},
		{[]string{"--auth", "--admin-token-file", t.TempDir()}, []string{"--admin-token-file", "not a regular file"}},
	}
	for _, tt := range tests {
		err := startRefused(dir, tt.args...)
		checkSays(t, fmt.Sprintf("maosd %v", tt.args), err, tt.want...)
		checkStatus(t, fmt.Sprintf("maosd %v", tt.args), err, 2)
	}
	checkNoDataDir(t, dir)
}

// authFlagsLog runs authFlags on maosd's flags parsed from args and returns
// the token, the error and what it logged.
func authFlagsLog(t *testing.T, args ...string) (string, error, string) {
	t.Helper()
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	var (
		tok string
		err error
	)
	app := App()
	app.ErrWriter = io.Discard
	app.ExitErrHandler = func(*cli.Context, error) {}
	app.Action = func(c *cli.Context) error {
		tok, err = authFlags(c, logger)
		return nil
	}
	if rerr := app.Run(append([]string{"maosd"}, args...)); rerr != nil {
		t.Fatalf("maosd %v: %v", args, rerr)
	}
	return tok, err, log.String()
}

// The token is read trimmed from the file (or $MAOS_ADMIN_TOKEN_FILE with
// $MAOS_AUTH); a file other users can read gets a warning, a 0600 one none;
// auth off gets the warning that anyone can send as any agent.
func TestAuthFlagsWarn(t *testing.T) {
	clearAuthEnv(t)
	secret := strings.Repeat("s", 44)
	private := writeTokenFile(t, "  "+secret+"\r\n", 0o600)
	tok, err, log := authFlagsLog(t, "--auth", "--admin-token-file", private)
	if err != nil || tok != secret {
		t.Fatalf("--auth with a 0600 file: token %q, err %v; want %q", tok, err, secret)
	}
	if strings.Contains(log, "level=WARN") {
		t.Errorf("a 0600 token file and auth on logged a warning:\n%s", log)
	}

	shared := writeTokenFile(t, secret+"\n", 0o644)
	t.Setenv("MAOS_AUTH", "true")
	t.Setenv("MAOS_ADMIN_TOKEN_FILE", shared)
	tok, err, log = authFlagsLog(t)
	if err != nil || tok != secret {
		t.Fatalf("auth from the environment: token %q, err %v; want %q", tok, err, secret)
	}
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "chmod 600") || !strings.Contains(log, "mode=0644") {
		t.Errorf("a 0644 token file logged no warning naming chmod 600 and its mode:\n%s", log)
	}
	clearAuthEnv(t)

	tok, err, log = authFlagsLog(t)
	if err != nil || tok != "" {
		t.Fatalf("auth off: token %q, err %v; want none", tok, err)
	}
	for _, w := range []string{"level=WARN", "auth is off", "send as any agent", "read every inbox", "multi-host cluster", "--auth"} {
		if !strings.Contains(log, w) {
			t.Errorf("auth off: the log does not say %q:\n%s", w, log)
		}
	}
}

// maosd --auth end to end: the ready line says auth is on and there is no
// auth-off warning; without a token the API answers 401 (and maosctl hints
// at MAOS_TOKEN); the admin token file makes agent tokens; an agent's token
// sends as its agent only, and stops working once revoked.
func TestAuthEndToEnd(t *testing.T) {
	clearAuthEnv(t)
	clearMaosctlEnv(t)
	admin := writeTokenFile(t, strings.Repeat("k", 44)+"\n", 0o600)
	ready, log := runMaosdUntilReady(t, nil, "--auth", "--admin-token-file", admin)
	if ready["auth"] != true {
		t.Errorf("ready line auth = %v; want true", ready["auth"])
	}
	if strings.Contains(log, "auth is off") {
		t.Errorf("maosd --auth warned that auth is off:\n%s", log)
	}
	addr, _ := ready["api_addr"].(string)
	run := func(args ...string) maosctlResult { return runMaosctl(addr, args...) }

	if r := run("channels"); r.err == nil || !strings.Contains(r.err.Error(), "401") || !strings.Contains(r.err.Error(), "MAOS_TOKEN") {
		t.Fatalf("channels without a token: err=%v; want 401 with the MAOS_TOKEN hint", r.err)
	}
	r := run("--token-file", admin, "--json", "token", "create", "--agent", "codex")
	var tok api.TokenCreated
	if r.err != nil || json.Unmarshal([]byte(r.out), &tok) != nil || tok.Token == "" {
		t.Fatalf("token create with the admin token file: out=%q err=%v stderr=%q", r.out, r.err, r.errOut)
	}
	if r := run("--token", tok.Token, "send", "--from", "codex", "--to", "all", "--channel", "general", "--text", "hi"); r.err != nil {
		t.Fatalf("send as codex with codex's token: %v stderr=%q", r.err, r.errOut)
	}
	if r := run("--token", tok.Token, "send", "--from", "claude", "--to", "all", "--channel", "general", "--text", "hi"); r.err == nil ||
		!strings.Contains(r.err.Error(), "403") {
		t.Errorf("send as claude with codex's token: err=%v; want 403", r.err)
	}
	if r := run("--token-file", admin, "token", "revoke", tok.ID); r.err != nil {
		t.Fatalf("token revoke: %v stderr=%q", r.err, r.errOut)
	}
	if r := run("--token", tok.Token, "channels"); r.err == nil || !strings.Contains(r.err.Error(), "401") {
		t.Errorf("channels with the revoked token: err=%v; want 401", r.err)
	}
}

// A cluster started with --auth records auth_required; the same node
// restarted without --auth refuses to start and says how to fix it.
func TestRestartWithoutAuthRefused(t *testing.T) {
	clearAuthEnv(t)
	clearMaosctlEnv(t)
	secret := strings.Repeat("k", 44)
	admin := writeTokenFile(t, secret+"\n", 0o600)
	dir := filepath.Join(t.TempDir(), "data")
	start := func(ctx context.Context, log *lockedBuffer, args ...string) <-chan error {
		app := App()
		app.ErrWriter, app.Writer = log, log
		app.ExitErrHandler = func(*cli.Context, error) {}
		done := make(chan error, 1)
		go func() {
			done <- app.RunContext(ctx, append([]string{"maosd", "--data-dir", dir, "--http-addr", "127.0.0.1:0",
				"--raft-addr", "127.0.0.1:0", "--log-format", "json"}, args...))
		}()
		return done
	}

	var log1 lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := start(ctx, &log1, "--auth", "--admin-token-file", admin)
	deadline := testenv.Deadline(t)
	for !strings.Contains(log1.String(), "auth_required=true") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the leader did not record auth_required by the test's deadline; log:\n%s", log1.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Until(testenv.Deadline(t))):
		t.Fatal("maosd did not stop by the test's deadline")
	}

	var log2 lockedBuffer
	select {
	case err := <-start(context.Background(), &log2):
		if err == nil || !strings.Contains(err.Error(), "auth_required=true") || !strings.Contains(err.Error(), "--auth --admin-token-file") {
			t.Fatalf("restart without --auth: %v; want a refusal naming auth_required and --auth", err)
		}
		checkStatus(t, "restart without --auth", err, 1)
	case <-time.After(time.Until(testenv.Deadline(t))):
		t.Fatal("maosd without --auth on an auth cluster's data dir did not exit by the test's deadline")
	}
}

// Without --auth the API may listen on loopback only, unless the operator
// says --insecure-no-auth.
func TestRefusesOpenAPIWithoutAuth(t *testing.T) {
	clearAuthEnv(t)
	t.Setenv("MAOS_INSECURE_NO_AUTH", "")
	dir := filepath.Join(t.TempDir(), "data")
	err := startRefused(dir, "--http-addr", "0.0.0.0:0", "--http-advertise", "127.0.0.1:7070")
	checkSays(t, "maosd on 0.0.0.0 without --auth", err, "--http-addr", "reachable from other hosts", "--auth --admin-token-file", "--insecure-no-auth")
	checkStatus(t, "maosd on 0.0.0.0 without --auth", err, 2)
	checkNoDataDir(t, dir)

	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}
	wild := &net.TCPAddr{IP: net.IPv4zero, Port: 7070}
	lan := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7070}
	for _, tc := range []struct {
		addr           net.Addr
		auth, insecure bool
		wantErr        bool
	}{
		{loop, false, false, false},
		{wild, false, false, true},
		{lan, false, false, true},
		{lan, true, false, false},
		{lan, false, true, false},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 7070}, false, false, false},
	} {
		if err := checkOpenAPI(tc.addr, tc.auth, tc.insecure); (err != nil) != tc.wantErr {
			t.Errorf("checkOpenAPI(%s, auth=%v, insecure=%v) = %v, want error %v", tc.addr, tc.auth, tc.insecure, err, tc.wantErr)
		}
	}
}
