package watcher

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// ritaRun runs a watcher of the one agent rita, configured by agentYAML
// (an agents: entry, without its token_file), speaking with its own
// agent token (tok-rita) to a node with auth. It returns the node, Run's
// result (it returns only when rita stops: its context is never
// cancelled) and the watcher's log.
func ritaRun(t *testing.T, agentYAML string) (*transporttest.Service, <-chan error, *lockedBuffer) {
	t.Helper()
	svc := transporttest.New(t)
	const secret = "maos_secret-of-rita-0123456789"
	if _, err := svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: "tok-rita", Agent: "rita", Role: api.TokenRoleAgent, Hash: fsm.HashToken(secret)}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Logger: slog.New(slog.DiscardHandler),
		Auth: &transport.AuthConfig{AdminToken: "maos_admin-secret-0123456789"}}))
	t.Cleanup(hs.Close)
	tokFile := filepath.Join(t.TempDir(), "rita.token")
	if err := os.WriteFile(tokFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Parse([]byte("agents:\n- {" + agentYAML + ", token_file: " + tokFile + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), f, Options{Client: client.NewClient(hs.URL, nil), Logger: slog.New(slog.NewTextHandler(logs, nil)),
			BackoffBase: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	}()
	return svc, done, logs
}

// waitStopped waits for Run to return by itself, failing with why if it
// still runs at the test's deadline.
func waitStopped(t *testing.T, done <-chan error, why string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-testDeadline(t):
		t.Fatal(why)
	}
}

// A watcher whose agent's token is revoked stops that agent with one
// clear log line, instead of retrying (each retry a DENIED audit line)
// until someone notices.
func TestRevokedTokenStopsTheAgent(t *testing.T) {
	svc, done, logs := ritaRun(t, "id: rita, command: [x]")
	// Running: the agent registered itself with its token.
	waitFor(t, "rita registered", func() bool { _, err := svc.State().Agent("rita"); return err == nil })
	if _, err := svc.ApplyCommand(api.OpRevokeToken, api.RevokeTokenCommand{ID: "tok-rita"}); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, done, "the watcher still runs its revoked agent")
	if n := logs.count("the cluster refuses this agent's token"); n != 1 {
		t.Errorf("%d log lines say the token is refused, want 1", n)
	}
}

// testDeadline fires shortly before the test binary's -timeout, so a hang
// fails this test by name instead of killing the run.
func testDeadline(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) - 5*time.Second)
}

// A registration the cluster refuses (a role the agent's token is not
// granted) stops that agent with one log line instead of retrying it.
func TestRefusedRegistrationStopsTheAgent(t *testing.T) {
	svc, done, logs := ritaRun(t, "id: rita, role: orchestrator, command: [x]")
	waitStopped(t, done, "the watcher still retries a refused registration")
	if n := logs.count("the cluster refuses to register this agent"); n != 1 {
		t.Errorf("%d log lines say the registration is refused, want 1", n)
	}
	if _, err := svc.State().Agent("rita"); err == nil {
		t.Errorf("rita registered as orchestrator with a token that grants no role")
	}
}
