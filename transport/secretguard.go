package transport

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/secrets"
)

// Secrets on the write path. A message is copied to every node and kept
// until retention trims it, so the node that accepts a request scans the
// text it is about to propose (package secrets: gitleaks' rules) and does
// what the cluster setting secret_guard says: refuse (the default), redact
// or let it through. The scan runs here, before the proposal, never in
// apply: its result depends on the gitleaks version, and apply must be the
// same on every node whatever binary it runs. A redacted message is
// redacted before it is proposed, so its content hash is the redacted
// one, and a retry of the same send redacts to the same bytes.
//
// Any handler that stores text a client wrote calls guardSecrets once,
// with the fields it proposes (messageFields for a message; task and
// approval text will name theirs the same way).

// ErrSecretFound: the request holds a secret and secret_guard is refuse.
// 422; the message names each field and rule, never the secret.
var ErrSecretFound = errors.New("secret found")

// scanSecrets is secrets.Scan; a test replaces it to see a rule set that
// cannot load.
var scanSecrets = secrets.Scan

// messageFields are the fields of m a secret is looked for in, named as
// the API names them.
func messageFields(m *fsm.Message) []secrets.Field {
	return []secrets.Field{
		{Name: "title", Text: &m.Title},
		{Name: "content.text", Text: &m.Content.Text},
		{Name: "content.code", Text: &m.Content.Code},
	}
}

// guardSecrets applies the cluster's secret_guard to fields, text the
// request stores on behalf of agent (already admitted): with "refuse" and
// a secret found it answers 422 naming each field and rule, queues a
// DENIED audit line that says the same (Server.deny: folded and paced
// like the auth denials) and returns false; with "redact" it replaces
// each secret in place with "[REDACTED:rule]" and then calls recheck (a
// redacted field may be over its limit), whose error is the answer; with
// "off" it does nothing. A rule set that cannot load is a 500: the text
// is not stored unchecked. false means it has answered.
func (s *Server) guardSecrets(w http.ResponseWriter, r *http.Request, agent string, fields []secrets.Field, recheck func() error) bool {
	cfg, err := s.state.Config()
	if err != nil {
		s.writeError(w, r, fmt.Errorf("read secret_guard: %w", err))
		return false
	}
	if cfg.SecretGuard == fsm.SecretGuardOff {
		return true
	}
	found, err := scanSecrets(fields...)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("scan for secrets (nothing was stored unchecked): %w", err))
		return false
	}
	if len(found) == 0 {
		return true
	}
	if cfg.SecretGuard == fsm.SecretGuardRedact {
		secrets.Redact(found, fields...)
		if err := recheck(); err != nil {
			s.writeError(w, r, fmt.Errorf("after redacting its secrets: %w", err))
			return false
		}
		return true
	}
	what := describeFindings(found)
	tokenID := ""
	if id := IdentityFrom(r.Context()); id != nil {
		tokenID = id.TokenID
	}
	s.deny(r, denial{who: "secret:" + agent, agent: agent, tokenID: tokenID,
		reason: what + ": refused by secret_guard (the secret is not recorded)"})
	s.writeError(w, r, &APIError{Status: http.StatusUnprocessableEntity, Code: CodeSecretFound,
		Message: what + ": what a node stores is copied to every node and kept until retention trims it, so secrets are refused " +
			"(cluster setting secret_guard is refuse); remove it and send again, or point to where the secret is kept"})
	return false
}

// describeFindings names each field and rule once, in the order found:
// "content.text holds a secret (gitleaks rule github-pat); title holds
// ...". Nothing of the secret itself. (The rules' descriptions are
// sentences; the rule id is what a user looks up.)
func describeFindings(found []secrets.Finding) string {
	var parts []string
	for _, f := range found {
		p := fmt.Sprintf("%s holds a secret (gitleaks rule %s)", f.Field, f.Rule)
		if !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "; ")
}
