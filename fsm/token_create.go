package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"
)

// OpCreateToken stores a new bearer token (body: CreateTokenCommand).
const OpCreateToken Op = "create_token"

// AuditToken is the audit kind of token creation and revocation.
const AuditToken = "token"

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

// applyCreateToken stores the token and its hash mapping and returns the
// *Token. A retry of the same command (same id, agent, role and hash, not
// revoked since) returns the token again; any other reuse of the id or of
// the hash, a revoked token's included, is a conflict.
func applyCreateToken(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd CreateTokenCommand
	if err := decodeCommand(OpCreateToken, body, &cmd); err != nil {
		return nil, err
	}
	prev, err := loadToken(tx, cmd.ID)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		if !prev.Revoked() && prev.Agent == cmd.Agent && prev.Role == cmd.Role && prev.Hash == cmd.Hash &&
			prev.AgentRole == cmd.AgentRole && slices.Equal(prev.Capabilities, cmd.Capabilities) {
			return &prev.Token, nil
		}
		return nil, fmt.Errorf("fsm: apply create_token: %w", conflict("token id %s exists: pick another id", cmd.ID))
	}
	if other, ok := tokenIDByHash(tx, cmd.Hash); ok {
		return nil, fmt.Errorf("fsm: apply create_token: %w", conflict("token %s: its secret is token %s's: make a new secret", cmd.ID, other))
	}
	rec := &tokenRecord{Token: Token{ID: cmd.ID, Agent: cmd.Agent, Role: cmd.Role, AgentRole: cmd.AgentRole, Capabilities: cmd.Capabilities,
		CreatedAt: time.Unix(0, ts).UTC()}, Hash: cmd.Hash}
	putToken(tx, rec)
	putTokenHash(tx, rec.Hash, rec.ID)
	text := fmt.Sprintf("token %s created for %s, role %s", cmd.ID, cmd.Agent, cmd.Role)
	if cmd.AgentRole != "" {
		text += ", may register as role " + cmd.AgentRole
	}
	if len(cmd.Capabilities) > 0 {
		text += ", capabilities " + strings.Join(cmd.Capabilities, ",")
	}
	if cmd.By != "" {
		text += " by token " + cmd.By
	}
	audit(tx, index, ts, AuditEvent{Kind: AuditToken, From: cmd.Agent, Label: "TOKEN_CREATE", Text: text})
	return &rec.Token, nil
}
