package maosctl

import (
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// A send holding a secret fails with the API's words (the field and the
// rule, 422), never printing the secret; secret_guard is set and checked
// through cluster config, and with redact the message is stored redacted.
func TestSendWithSecret(t *testing.T) {
	e := newTestEnv(t, "claude")
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	r := e.run("", "send", "--from", "codex", "--to", "claude", "--channel", "ops", "--text", "push with "+pat)
	if r.err == nil || ExitCode(r.err) != 1 || !strings.Contains(r.errOut, "content.text holds a secret (gitleaks rule github-pat)") ||
		!strings.Contains(r.errOut, "422") || strings.Contains(r.errOut+r.out, pat) {
		t.Fatalf("send with a secret: err %v, stderr %q, stdout %q; want exit 1 naming the field and rule, not the secret", r.err, r.errOut, r.out)
	}
	for _, c := range e.svc.CallsTo("Apply") {
		if c.Arg == string(api.OpSend) {
			t.Errorf("a send was proposed: %+v", c)
		}
	}

	e.fail([]string{"cluster", "config", "set", "secret_guard", "warn"}, "value", `secret_guard: want "refuse", "redact" or "off"`, "400")
	if out := e.ok("cluster", "config", "set", "secret_guard", "redact"); !strings.Contains(out, "secret_guard: \"redact\"\n") {
		t.Errorf("config set printed %q", out)
	}
	if out := e.ok("cluster", "config", "get", "secret_guard"); out != "\"redact\"\n" {
		t.Errorf("config get secret_guard printed %q", out)
	}
	id := e.send("ops", "codex", "claude", "push with "+pat)
	if m := e.svc.Stored(id); m == nil || m.Content.Text != "push with [REDACTED:github-pat]" {
		t.Errorf("stored %+v, want the text redacted", m)
	}
	if cfg, _ := e.svc.State().Config(); cfg.SecretGuard != api.SecretGuardRedact {
		t.Errorf("config = %+v", cfg)
	}
}
