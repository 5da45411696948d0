package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

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

// applyRevokeToken marks the token revoked at the entry's time, so
// TokenByHash refuses it from this entry on. It returns the *Token. Revoking a revoked token changes nothing and returns
// it as it stands; an unknown id is ErrNotFound.
func applyRevokeToken(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd RevokeTokenCommand
	if err := decodeCommand(OpRevokeToken, body, &cmd); err != nil {
		return nil, err
	}
	rec, err := loadToken(tx, cmd.ID)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("fsm: apply revoke_token: %w", notFound("token %s", cmd.ID))
	}
	if rec.Revoked() {
		return &rec.Token, nil
	}
	rec.RevokedAt = time.Unix(0, ts).UTC()
	putToken(tx, rec)
	text := fmt.Sprintf("token %s of %s revoked", rec.ID, rec.Agent)
	if cmd.By != "" {
		text += " by token " + cmd.By
	}
	audit(tx, index, ts, AuditEvent{Kind: AuditToken, From: rec.Agent, Label: "TOKEN_REVOKE", Text: text})
	return &rec.Token, nil
}
