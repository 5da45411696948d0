package transport

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/secrets"
)

// configReader is a state holding the cluster settings and nothing else.
type configReader struct {
	Reader
	cfg api.ClusterConfig
	err error
}

func (r configReader) Config() (api.ClusterConfig, error) { return r.cfg, r.err }

// guardServer serves guardSecrets alone at POST /x over a state with cfg,
// and counts the texts it let through.
func guardServer(cfg configReader, passed *int) *Server {
	s := &Server{opts: ServerOptions{MaxMessageBytes: api.DefaultMaxBytes, Logger: slog.New(slog.DiscardHandler)},
		state: cfg, denials: newDenialCoalescer()}
	s.denials.running = true // keep denials queued: no node to propose them to
	s.register([]route{{pattern: "POST /x", rule: ruleAny, handle: func(w http.ResponseWriter, r *http.Request) {
		text := "a clean text"
		if err := s.guardSecrets(r, "alice", []secrets.Field{{Name: "content.text", Text: &text}}, func() error { return nil }); err != nil {
			s.writeError(w, r, err)
			return
		}
		*passed++
		writeJSON(w, http.StatusOK, map[string]string{"text": text})
	}}})
	return s
}

// A rule set that cannot load, or settings that cannot be read, refuse the
// text (500) rather than let it through unchecked; "off" never scans.
func TestSecretGuardFailsClosed(t *testing.T) {
	defer func(f func(...secrets.Field) ([]secrets.Finding, error)) { scanSecrets = f }(scanSecrets)
	scanned := 0
	scanSecrets = func(...secrets.Field) ([]secrets.Finding, error) {
		scanned++
		return nil, errors.New("secrets: load the gitleaks rules: broken")
	}
	for _, tc := range []struct {
		name   string
		cfg    configReader
		status int
		says   string
		scans  int
	}{
		{"broken rules", configReader{cfg: api.ClusterConfig{SecretGuard: api.SecretGuardRefuse}}, http.StatusInternalServerError, "nothing was stored unchecked", 1},
		{"broken rules, redact", configReader{cfg: api.ClusterConfig{SecretGuard: api.SecretGuardRedact}}, http.StatusInternalServerError, "gitleaks rules: broken", 1},
		{"unreadable settings", configReader{err: errors.New("bbolt: closed")}, http.StatusInternalServerError, "read secret_guard", 0},
		{"off", configReader{cfg: api.ClusterConfig{SecretGuard: api.SecretGuardOff}}, http.StatusOK, "a clean text", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scanned = 0
			passed := 0
			w := httptest.NewRecorder()
			guardServer(tc.cfg, &passed).ServeHTTP(w, httptest.NewRequest("POST", "/x", nil))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.says) {
				t.Errorf("answer %d %s, want %d saying %q", w.Code, w.Body, tc.status, tc.says)
			}
			if want := map[bool]int{true: 1}[tc.status == http.StatusOK]; passed != want {
				t.Errorf("the handler went on %d times, want %d", passed, want)
			}
			if scanned != tc.scans {
				t.Errorf("%d scans, want %d", scanned, tc.scans)
			}
		})
	}
}

// The refusal and its audit line name each field and rule once.
func TestDescribeFindings(t *testing.T) {
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	text, title := pat+" and "+pat, "see "+pat
	found, err := secrets.Scan(secrets.Field{Name: "title", Text: &title}, secrets.Field{Name: "content.text", Text: &text})
	if err != nil {
		t.Fatal(err)
	}
	got := describeFindings(found)
	want := "title holds a secret (gitleaks rule github-pat); content.text holds a secret (gitleaks rule github-pat)"
	if got != want {
		t.Errorf("describeFindings = %q, want %q", got, want)
	}
	b, _ := json.Marshal(found)
	if strings.Contains(got, pat) || strings.Contains(string(b), pat) {
		t.Errorf("the description or a finding's JSON holds the secret: %q %s", got, b)
	}
}
