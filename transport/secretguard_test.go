package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Fake credentials, built at run time so this file is not itself a finding
// for repository scanners; each has the shape its gitleaks rule wants.
var (
	fakeGitHubPAT = "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	fakeSlackBot  = "xoxb-" + "2746513809-1847362950-Kq8Rz3Wm7Tn2Xv5Lp9Bc4Hd1"
)

// setGuard sets secret_guard through the API, as an admin would.
func setGuard(t *testing.T, e *authEnv, secret string, v api.SecretGuard) {
	t.Helper()
	cfg, err := e.client(secret).SetConfig(context.Background(), "secret_guard", v)
	if err != nil || cfg.SecretGuard != v {
		t.Fatalf("set secret_guard %s: %+v, %v", v, cfg, err)
	}
}

// By default a send holding a secret is refused with 422 naming the field
// and the rule and never the secret; nothing is stored; the audit gets a
// DENIED line that names the sender, field and rule, and not the secret.
func TestSecretRefused(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-auth", true: "auth"}[auth], func(t *testing.T) {
			var cfg *transport.AuthConfig
			secret := ""
			if auth {
				cfg, secret = &transport.AuthConfig{AdminToken: adminSecret}, aliceSecret
			}
			e := newAuthEnv(t, cfg)
			body := `{"id":"msg-leak-1","from":"alice","to":"bob","channel":"ops","title":"deploy",` +
				`"content":{"text":"push with ` + fakeGitHubPAT + ` please","code":"token = \"` + fakeSlackBot + `\""}}`
			r := e.as(secret, "POST", "/v1/messages", body)
			msg := wantError(t, r, http.StatusUnprocessableEntity, api.CodeSecretFound)
			for _, want := range []string{"content.text holds a secret (gitleaks rule github-pat); content.code holds a secret (gitleaks rule slack-bot-token)", "secret_guard"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			for _, leak := range []string{fakeGitHubPAT, fakeSlackBot, "ghp_R8b", "Kq8Rz3"} {
				if strings.Contains(string(r.body), leak) {
					t.Errorf("the answer echoes the secret (%q): %s", leak, r.body)
				}
			}
			if _, sends := e.writes(); sends != 0 {
				t.Errorf("%d sends proposed, want none", sends)
			}
			if _, err := e.svc.State().Message("msg-leak-1"); !errors.Is(err, api.ErrNotFound) {
				t.Errorf("the refused message is stored: %v", err)
			}
			evs := e.waitDenied("content.text holds a secret (gitleaks rule github-pat)", 1)
			for _, ev := range evs {
				line := ev.Line()
				if strings.Contains(line, fakeGitHubPAT) || strings.Contains(line, fakeSlackBot) {
					t.Errorf("audit line echoes the secret: %s", line)
				}
				if ev.From != "alice" || !strings.Contains(line, "POST /v1/messages") || !strings.Contains(line, "content.code holds a secret") {
					t.Errorf("audit line %q (from %q), want alice's POST /v1/messages naming both fields", line, ev.From)
				}
				if auth && !strings.Contains(line, "token tok-alice") {
					t.Errorf("audit line %q does not name the token", line)
				}
			}
			// The same text without the secret goes through.
			wantOK(t, e.as(secret, "POST", "/v1/messages", `{"id":"msg-leak-2","from":"alice","to":"bob","channel":"ops","content":{"text":"push with the key from the vault"}}`), nil)
		})
	}
}

// A flood of refused sends adds a bounded number of audit lines, and
// every refusal is counted in one of them.
func TestSecretRefusalsFoldInTheAudit(t *testing.T) {
	e := newAuthEnv(t, nil)
	const n = 40
	for i := range n {
		body := `{"from":"alice","to":"bob","channel":"ops","title":"x` + string(rune('a'+i%26)) + `","content":{"text":"` + fakeGitHubPAT + `"}}`
		wantError(t, e.as("", "POST", "/v1/messages", body), http.StatusUnprocessableEntity, api.CodeSecretFound)
	}
	evs := e.waitDenied("content.text holds a secret", n)
	if len(evs) >= n {
		t.Errorf("%d audit lines for %d refusals: not folded", len(evs), n)
	}
}

// redact stores the message with every secret replaced by
// [REDACTED:rule]; a retry of the same send is the same message.
func TestSecretRedacted(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	setGuard(t, e, adminSecret, api.SecretGuardRedact)
	body := `{"id":"msg-red-1","from":"alice","to":"bob","channel":"ops","title":"key ` + fakeGitHubPAT + `",` +
		`"content":{"text":"use ` + fakeGitHubPAT + ` then ` + fakeGitHubPAT + `","code":"x = \"` + fakeSlackBot + `\""}}`
	var res api.SendResponse
	wantOK(t, e.as(aliceSecret, "POST", "/v1/messages", body), &res)
	m, err := e.svc.State().Message("msg-red-1")
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := json.Marshal(m)
	if strings.Contains(string(stored), fakeGitHubPAT) || strings.Contains(string(stored), fakeSlackBot) {
		t.Fatalf("stored message holds a secret: %s", stored)
	}
	if m.Title != "key [REDACTED:github-pat]" || m.Content.Text != "use [REDACTED:github-pat] then [REDACTED:github-pat]" ||
		m.Content.Code != `x = "[REDACTED:slack-bot-token]"` {
		t.Errorf("stored title %q, text %q, code %q", m.Title, m.Content.Text, m.Content.Code)
	}
	// The retry is the same message (the same redaction), not a conflict.
	var again api.SendResponse
	wantOK(t, e.as(aliceSecret, "POST", "/v1/messages", body), &again)
	if again.Seq != res.Seq {
		t.Errorf("retry stored at %d, first at %d", again.Seq, res.Seq)
	}
	if d := e.denials(); len(d) != 0 {
		t.Errorf("a redaction was audited as a denial: %v", d)
	}
	// A title the redaction makes too long is refused naming the title,
	// and nothing is stored.
	long := `{"id":"msg-red-2","from":"alice","to":"bob","channel":"ops","title":"` + strings.Repeat("k", api.MaxTitleLen-len(fakeGitHubPAT)) + " " + fakeGitHubPAT + `","content":{"text":"t"}}`
	msg := wantError(t, e.as(aliceSecret, "POST", "/v1/messages", long), http.StatusBadRequest, api.CodeInvalid)
	if !strings.HasPrefix(msg, "title:") {
		t.Errorf("too long after redaction: %q, want a title error", msg)
	}
	if _, err := e.svc.State().Message("msg-red-2"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("message stored: %v", err)
	}
}

// off stores the message as sent.
func TestSecretGuardOff(t *testing.T) {
	e := newAuthEnv(t, nil)
	setGuard(t, e, "", api.SecretGuardOff)
	wantOK(t, e.as("", "POST", "/v1/messages", `{"id":"msg-off-1","from":"alice","to":"bob","channel":"ops","content":{"text":"`+fakeGitHubPAT+`"}}`), nil)
	if m, err := e.svc.State().Message("msg-off-1"); err != nil || m.Content.Text != fakeGitHubPAT {
		t.Errorf("stored %+v, %v; want the text as sent", m, err)
	}
}

// secret_guard is set through PUT /v1/cluster/config by an admin only,
// and a bad value is refused naming the setting and its values.
func TestSecretGuardConfigAPI(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	r := e.as(adminSecret, "PUT", "/v1/cluster/config", `{"key":"secret_guard","value":"warn"}`)
	if msg := wantError(t, r, http.StatusBadRequest, api.CodeInvalid); !strings.Contains(msg, `secret_guard: want "refuse", "redact" or "off"`) {
		t.Errorf("bad value: %q", msg)
	}
	wantError(t, e.as(aliceSecret, "PUT", "/v1/cluster/config", `{"key":"secret_guard","value":"off"}`), http.StatusForbidden, api.CodeForbidden)
	var cfg api.ClusterConfig
	wantOK(t, e.as(aliceSecret, "GET", "/v1/cluster/config", ""), &cfg)
	if cfg.SecretGuard != api.SecretGuardRefuse {
		t.Errorf("config = %+v, want secret_guard refuse", cfg)
	}
}
