package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// AuditToken is the audit kind of token creation and revocation.
const AuditToken = "token"

// applyCreateToken stores the token and its hash mapping and returns the
// *Token. A retry of the same command (same id, agent, role and hash, not
// revoked since) returns the token again; any other reuse of the id or of
// the hash, a revoked token's included, is a conflict.
func applyCreateToken(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.CreateTokenCommand
	if err := decodeCommand(api.OpCreateToken, body, &cmd); err != nil {
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
	rec := &tokenRecord{Token: api.Token{ID: cmd.ID, Agent: cmd.Agent, Role: cmd.Role, AgentRole: cmd.AgentRole, Capabilities: cmd.Capabilities,
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
	audit(tx, index, ts, api.AuditEvent{Kind: AuditToken, From: cmd.Agent, Label: "TOKEN_CREATE", Text: text})
	return &rec.Token, nil
}
