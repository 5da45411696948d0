package transport

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/maos-project/maos/api"
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
// Every write reaches the log through Server.commit (commit.go), which
// runs the guard over the command's free text as fsm declares it
// (api.FreeTexter: one table for every command), so no handler picks its
// fields by hand; an artifact's bytes are scanned as they are stored
// (scanArtifact).

// scanSecrets is secrets.Scan; a test replaces it to see a rule set that
// cannot load.
var scanSecrets = secrets.Scan

// guardSecrets applies the cluster's secret_guard to fields, text the
// request stores on behalf of agent (already admitted): with "refuse" and
// a secret found it queues a DENIED audit line that names each field and
// rule (Server.deny: folded and paced like the auth denials) and returns
// the 422 that says the same; with "redact" it replaces each secret in
// place with "[REDACTED:rule]" and then returns recheck's error (a
// redacted field may be over its limit); with "off" it does nothing. A
// rule set that cannot load is an error (500): the text is not stored
// unchecked. nil means the text may be proposed.
func (s *Server) guardSecrets(r *http.Request, agent string, fields []secrets.Field, recheck func() error) error {
	cfg, err := s.state.Config()
	if err != nil {
		return fmt.Errorf("read secret_guard: %w", err)
	}
	if cfg.SecretGuard == api.SecretGuardOff {
		return nil
	}
	found, err := scanSecrets(fields...)
	if err != nil {
		return fmt.Errorf("scan for secrets (nothing was stored unchecked): %w", err)
	}
	if len(found) == 0 {
		return nil
	}
	if cfg.SecretGuard == api.SecretGuardRedact {
		secrets.Redact(found, fields...)
		if err := recheck(); err != nil {
			return fmt.Errorf("after redacting its secrets: %w", err)
		}
		return nil
	}
	return s.refuseSecret(r, agent, describeFindings(found))
}

// refuseSecret audits and answers a refusal by secret_guard: what names
// each field and rule.
func (s *Server) refuseSecret(r *http.Request, agent, what string) error {
	tokenID := ""
	if id := IdentityFrom(r.Context()); id != nil {
		tokenID = id.TokenID
	}
	s.deny(r, denial{who: "secret:" + agent, agent: agent, tokenID: tokenID,
		reason: what + ": refused by secret_guard (the secret is not recorded)"})
	return &api.APIError{Status: http.StatusUnprocessableEntity, Code: api.CodeSecretFound,
		Message: what + ": what a node stores is copied to every node and kept until retention trims it, so secrets are refused " +
			"(cluster setting secret_guard is refuse); remove it and send again, or point to where the secret is kept"}
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

// scanArtifact tees an artifact's bytes, as the handler stores them, into
// the secret scan (secrets.ScanReader) on behalf of agent. The handler
// reads the returned reader instead of body, then calls done: nil, or the
// guard's answer. An artifact's id is its bytes' digest, so its bytes are
// never redacted: under redact too a secret refuses the upload (422), and
// the bytes already stored are left to the blob GC, never recorded.
func (s *Server) scanArtifact(r *http.Request, agent string, body io.Reader) (io.Reader, func() error) {
	cfg, err := s.state.Config()
	if err != nil {
		return body, func() error { return fmt.Errorf("read secret_guard: %w", err) }
	}
	if cfg.SecretGuard == api.SecretGuardOff {
		return body, func() error { return nil }
	}
	type result struct {
		found []secrets.Finding
		err   error
	}
	pr, pw := io.Pipe()
	out := make(chan result, 1)
	go func() {
		found, err := scanArtifactBytes("content", pr)
		out <- result{found, err}
	}()
	return io.TeeReader(body, pw), func() error {
		pw.Close()
		res := <-out
		switch {
		case res.err != nil:
			return fmt.Errorf("scan the artifact for secrets (nothing was recorded unchecked): %w", res.err)
		case len(res.found) == 0:
			return nil
		}
		what := describeFindings(res.found)
		if cfg.SecretGuard == api.SecretGuardRedact {
			what += " (an artifact's bytes are its id, so they are never redacted)"
		}
		return s.refuseSecret(r, agent, what)
	}
}

// scanArtifactBytes is secrets.ScanReader; a test replaces it.
var scanArtifactBytes = secrets.ScanReader
