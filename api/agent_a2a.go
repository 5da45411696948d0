package api

import (
	"net/url"
	"strings"
	"unicode"
)

// Limits of an A2A remote (RegisterAgentCommand.A2A).
const (
	MaxA2AURLLen        = 2048 // bytes
	MaxA2ACredentialLen = 4096 // bytes
)

// A2ARemote makes a registered agent a remote A2A agent (docs/A2A.md,
// "Outbound"): a task or message to it is relayed to URL by one maosd of
// the cluster (package a2arelay). URL is the remote agent's base URL (its
// card at URL/.well-known/agent-card.json) or the card's own URL (ending
// in .json); absolute http or https, at most MaxA2AURLLen bytes.
// Credential, optional, is the bearer token the relay sends as
// "Authorization: Bearer …" (at most MaxA2ACredentialLen bytes, one line).
// It is stored in the replicated state like all state (log and snapshots)
// but never shown: api.Agent says only whether there is one, and only an
// admin reads it (GET /v1/agents/{id}/a2a).
type A2ARemote struct {
	URL        string `json:"url"`
	Credential string `json:"credential,omitempty"`
}

// Validate checks the URL and the credential; the error is a *FieldError
// naming a2a.url or a2a.credential (never quoting the credential).
func (r *A2ARemote) Validate() error {
	if err := checkCalledURL("a2a.url", r.URL, MaxA2AURLLen, "the remote agent's base URL or card URL"); err != nil {
		return err
	}
	if len(r.Credential) > MaxA2ACredentialLen {
		return FieldErrorf("a2a.credential", "%d bytes, at most %d", len(r.Credential), MaxA2ACredentialLen)
	}
	if strings.IndexFunc(r.Credential, func(c rune) bool { return unicode.IsControl(c) || c == ' ' }) >= 0 {
		return FieldErrorf("a2a.credential", "must be one token: no spaces or control characters")
	}
	return nil
}

// AgentA2A is what a read of an agent shows of its A2A remote: the URL and
// whether a credential is stored, never the credential itself.
type AgentA2A struct {
	URL        string `json:"url"`
	Credential bool   `json:"credential"`
}

// View is r as a read shows it.
func (r *A2ARemote) View() *AgentA2A {
	if r == nil {
		return nil
	}
	return &AgentA2A{URL: r.URL, Credential: r.Credential != ""}
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// checkCalledURL checks a URL a node will call (an A2A remote, a push
// config's): required (what says what it is for), at most max bytes,
// absolute http or https without user info. The error is a *FieldError
// naming field.
func checkCalledURL(field, raw string, max int, what string) error {
	switch {
	case raw == "":
		return FieldErrorf(field, "required: %s (http or https)", what)
	case len(raw) > max:
		return FieldErrorf(field, "%d bytes, at most %d", len(raw), max)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return FieldErrorf(field, "must be an absolute http or https URL without user info (got %q)", clipText(raw, 200))
	}
	return nil
}
