package api

import (
	"crypto/sha256"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Token roles (Token.Role). A moderator reads every inbox; an admin also
// runs cluster operations and may act as any agent.
const (
	TokenRoleAgent     = "agent"
	TokenRoleModerator = "moderator"
	TokenRoleAdmin     = "admin"
)

// TokenRoles lists the valid roles.
var TokenRoles = []string{TokenRoleAgent, TokenRoleModerator, TokenRoleAdmin}

// BootstrapTokenID names the admin bootstrap token (maosd
// --admin-token-file), which is configured per node and never stored; no
// replicated token may take its id.
const BootstrapTokenID = "bootstrap"

// ValidHash reports whether h is 64 lowercase hex digits.
func ValidHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// OpCreateToken stores a new bearer token (body: CreateTokenCommand).
const OpCreateToken Op = "create_token"

// CreateTokenCommand creates a token: the proposer generated the secret
// and the id, and sends only the secret's hash.
type CreateTokenCommand struct {
	ID    string `json:"id"`    // a ValidName, not BootstrapTokenID
	Agent string `json:"agent"` // a ValidName: the agent it speaks for
	Role  string `json:"role"`  // one of TokenRoles
	Hash  string `json:"hash"`  // HashToken(secret): 64 lowercase hex
	// AgentRole and Capabilities are the grant (Token): a ValidName or
	// empty, and at most MaxCapabilities ValidNames.
	AgentRole    string   `json:"agent_role,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	// By names the token that created it (for the audit trail), optional.
	By string `json:"by,omitempty"`
}

// Validate checks every field, naming the one at fault.
func (c *CreateTokenCommand) Validate() error {
	if !ValidName(c.ID) {
		return NameError("id", c.ID)
	}
	if c.ID == BootstrapTokenID {
		return FieldErrorf("id", "%q is reserved for the admin bootstrap token", c.ID)
	}
	if !ValidName(c.Agent) {
		return NameError("agent", c.Agent)
	}
	if !slices.Contains(TokenRoles, c.Role) {
		return FieldErrorf("role", "%q is not one of %s", c.Role, strings.Join(TokenRoles, ", "))
	}
	if c.AgentRole != "" && !ValidName(c.AgentRole) {
		return NameError("agent_role", c.AgentRole)
	}
	if err := CheckNames("capabilities", c.Capabilities, MaxCapabilities, "entries"); err != nil {
		return err
	}
	if !ValidHash(c.Hash) {
		return FieldErrorf("hash", "want the SHA-256 of the secret as 64 lowercase hex digits, got %d bytes", len(c.Hash))
	}
	if c.By != "" && !ValidName(c.By) {
		return NameError("by", c.By)
	}
	return nil
}

// OpRevokeToken revokes a bearer token (body: RevokeTokenCommand).
const OpRevokeToken Op = "revoke_token"

// RevokeTokenCommand revokes the token with ID.
type RevokeTokenCommand struct {
	ID string `json:"id"`
	// By names the token that revoked it (for the audit trail), optional.
	By string `json:"by,omitempty"`
}

// Validate checks the id (and by), naming the field at fault.
func (c *RevokeTokenCommand) Validate() error {
	if !ValidName(c.ID) {
		return NameError("id", c.ID)
	}
	if c.By != "" && !ValidName(c.By) {
		return NameError("by", c.By)
	}
	return nil
}

// OpAuditDenial records refused API requests in the audit trail (body:
// AuditDenialCommand). A node proposes it after answering 401 (a bad
// token) or 403 (a token not allowed to do that); it writes nothing but
// the audit line. Nodes fold repeats into Count and bound how many they
// propose, so a flood of refused requests cannot flood the log.
const OpAuditDenial Op = "audit_denial"

// Limits of an AuditDenialCommand: field lengths in bytes, and Count.
const (
	MaxDenialIDLen     = 128           // node, agent, token_id
	MaxDenialMethodLen = 16            // method
	MaxDenialPathLen   = 512           // path
	MaxDenialReasonLen = 512           // reason
	MaxDenialCount     = 1_000_000_000 // count
	MaxDenialPathShown = 200           // path bytes on the audit line
)

// AuditDenialCommand describes Count refused requests alike: who (the
// token's agent and id, when the token was known), what (method, path),
// why, and the node that refused them.
type AuditDenialCommand struct {
	Node    string `json:"node"`
	Agent   string `json:"agent,omitempty"`
	TokenID string `json:"token_id,omitempty"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Reason  string `json:"reason"`
	Count   int    `json:"count"` // ≥ 1: requests folded into this entry
}

// Validate bounds every field, naming the one at fault. Text fields must
// be valid UTF-8; the proposer cuts what a client sent to fit.
func (c *AuditDenialCommand) Validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"node", c.Node, MaxDenialIDLen},
		{"agent", c.Agent, MaxDenialIDLen},
		{"token_id", c.TokenID, MaxDenialIDLen},
		{"method", c.Method, MaxDenialMethodLen},
		{"path", c.Path, MaxDenialPathLen},
		{"reason", c.Reason, MaxDenialReasonLen},
	} {
		if len(f.v) > f.max {
			return FieldErrorf(f.name, "%d bytes, at most %d", len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			return FieldErrorf(f.name, "not valid UTF-8")
		}
	}
	if c.Reason == "" {
		return FieldErrorf("reason", "required: why the request was refused")
	}
	if c.Count < 1 || c.Count > MaxDenialCount {
		return FieldErrorf("count", "%d is outside 1..%d", c.Count, MaxDenialCount)
	}
	return nil
}

// AuditEvent is one line of the audit trail. Line renders it in the seed
// format: "[2025-10-20T14:30:00Z] [orchestrator→triage] TASK_ASSIGN: Triage new issue #123".
type AuditEvent struct {
	Seq   uint64    `json:"seq"`   // position in the trail, from 1
	Index uint64    `json:"index"` // Raft index of the entry that produced it
	Time  time.Time `json:"time"`
	Kind  string    `json:"kind"`
	From  string    `json:"from,omitempty"`
	To    []string  `json:"to,omitempty"`
	// Label is the upper-case word after the parties: the message type
	// (TASK_ASSIGN), BLOCKED, REGISTER, LOCK_ACQUIRE, ...
	Label     string `json:"label"`
	Text      string `json:"text"`
	MessageID string `json:"message_id,omitempty"`
	// Private marks an event about a private message; readers other than
	// its parties and moderators see RedactEvent's line instead.
	Private bool `json:"private,omitempty"`
	// Readers, on a Private event, are the agents besides From who may read
	// the message: those it was delivered to and those its "to" names by
	// id (see Viewer.CanReadEvent). Empty on other events.
	Readers []string `json:"readers,omitempty"`
}

// Line renders the event in the seed audit format.
func (e AuditEvent) Line() string {
	parties := e.From
	if len(e.To) > 0 {
		parties += "→" + strings.Join(e.To, ",")
	}
	var b strings.Builder
	b.WriteString("[" + e.Time.UTC().Format(time.RFC3339) + "] ")
	if parties != "" {
		b.WriteString("[" + parties + "] ")
	}
	b.WriteString(e.Label)
	if e.Text != "" {
		b.WriteString(": " + e.Text)
	}
	return b.String()
}

// FirstLine is the first line of s, cut to n bytes, for audit lines.
func FirstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// Token is a bearer token as stored and listed: never its secret or hash.
type Token struct {
	ID    string `json:"id"`
	Agent string `json:"agent"` // the agent the token speaks for
	Role  string `json:"role"`  // one of TokenRoles
	// AgentRole and Capabilities are the token's grant: the registry role
	// and the capabilities its agent (and the agent's forks) may register
	// itself with (POST /v1/agents). Empty: the default role
	// (DefaultRole) and no capability; only an admin registers an agent
	// with more.
	AgentRole    string   `json:"agent_role,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	// CreatedAt is the time of the entry that created it.
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt is the time of the entry that revoked it; zero while live.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Revoked reports whether the token was revoked.
func (t *Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// The web console (package console) cannot set a header on an
// EventSource, so a browser carries a session cookie instead
// (sessions.go: a random id this node maps to the token, never the token
// itself): authenticate reads it only when the request has no
// Authorization header, and the session's secret then goes the header's
// way. A state-changing request so authenticated must pass the CSRF defence
// (cookieCSRF): net/http's CrossOriginProtection (Sec-Fetch-Site, else
// Origin against Host) and the header HeaderCSRF, which a cross-site
// page cannot send without a CORS preflight no node answers.
const (
	// HeaderCSRF must be on every write authenticated by a session cookie.
	HeaderCSRF = "X-Maos-CSRF"
)

// Role is what a bearer token may do, beyond speaking for its agent.
type Role string

// Token roles. A moderator (an operator's "supervisor") reads every inbox
// and every private message; an admin can also run cluster operations
// (join, remove, snapshot, rules, tokens) and is what nodes use between
// themselves.
const (
	RoleAgent     Role = "agent"
	RoleModerator Role = "moderator"
	RoleAdmin     Role = "admin"
	// RoleNode is another node of the cluster (NodeCredential): it may
	// make the calls nodes make to each other and act as any agent (as
	// forwarding must), and nothing an admin route does.
	RoleNode Role = "node"
)

// ActsAs is the one rule of who a token acts as: a node or admin token acts
// as anyone; an agent's token as that agent and its forks ("A-fork-N",
// ForkParent).
func ActsAs(tokenAgent string, role Role, agent string) bool {
	return role == RoleNode || role == RoleAdmin || (tokenAgent != "" && (tokenAgent == agent || IsForkOf(agent, tokenAgent)))
}
