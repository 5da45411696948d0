package transport

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// The token endpoints (admin only; see routes.go):
//
//	POST   /v1/tokens       {"agent","role"} → TokenCreated (the secret, this once)
//	GET    /v1/tokens       → TokensResponse (every token, revoked ones with revoked_at; never a secret or hash)
//	DELETE /v1/tokens/{id}  → the revoked api.Token (revoking twice is 200; an unknown id 404)
//
// The node that serves POST generates the secret and the id and proposes
// only the secret's SHA-256: the secret is in the answer and nowhere else.

// TokenSecretPrefix starts every generated secret, so one pasted by
// mistake is easy to recognise (and to scan for).
const TokenSecretPrefix = "maos_"

// whoami answers who the request's token speaks for: for a client (an MCP
// server, a hook) to check it holds the token of the agent it acts as
// before it acts. Without --auth: {"auth": false}.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	id := IdentityFrom(r.Context())
	if id == nil {
		writeJSON(w, http.StatusOK, api.WhoAmI{})
		return
	}
	writeJSON(w, http.StatusOK, api.WhoAmI{Auth: true, Agent: id.Agent, Role: id.Role, TokenID: id.TokenID})
}

// newTokenSecret returns a new secret: the prefix and 32 random bytes,
// base64url without padding (48 characters).
func newTokenSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("transport: token secret: %w", err)
	}
	return TokenSecretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// newTokenID returns a new token id, "tok-" and 16 hex digits.
func newTokenID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("transport: token id: %w", err)
	}
	return "tok-" + hex.EncodeToString(b[:]), nil
}

// creatorID names the token a request carries, for the audit trail.
func creatorID(r *http.Request) string {
	if id := IdentityFrom(r.Context()); id != nil {
		return id.TokenID
	}
	return ""
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var req api.TokenRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Role == "" {
		req.Role = api.TokenRoleAgent
	}
	secret, err := newTokenSecret()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := newTokenID()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := api.CreateTokenCommand{ID: id, Agent: req.Agent, Role: req.Role, AgentRole: req.AgentRole, Capabilities: req.Capabilities,
		Hash: fsm.HashToken(secret), By: creatorID(r)}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	raw, err := s.commit(r, api.OpCreateToken, cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var tok api.Token
	if err := json.Unmarshal(raw, &tok); err != nil || tok.ID != id {
		s.writeError(w, r, fmt.Errorf("transport: unexpected %s result %.200s (%v)", api.OpCreateToken, raw, err))
		return
	}
	s.catchUp(r, "token create")
	// The one answer that holds a secret: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, api.TokenCreated{ID: tok.ID, Agent: tok.Agent, Role: tok.Role,
		AgentRole: tok.AgentRole, Capabilities: tok.Capabilities, CreatedAt: tok.CreatedAt, Token: secret})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) {
		list, err := st.Tokens()
		return api.TokensResponse{Tokens: list}, err
	})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	cmd := api.RevokeTokenCommand{ID: r.PathValue("id"), By: creatorID(r)}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.commit(r, api.OpRevokeToken, cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.catchUp(r, "token revoke")
	writeRawJSON(w, res)
}

// catchUp waits (briefly) until this node has applied what the leader has
// committed, so that a token just created through this node works here at
// once, and one just revoked is refused here at once: a forwarded write
// is answered when the leader has applied it, which can be a few ms
// before this node does. The write is committed either way; a failure
// here is only logged.
func (s *Server) catchUp(r *http.Request, what string) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.prop.Linearize(ctx, api.Strong); err != nil {
		s.opts.Logger.Warn(what+": committed, but this node did not catch up with the leader", "error", err)
	}
}
