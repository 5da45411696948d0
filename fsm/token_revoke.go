package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyRevokeToken marks the token revoked at the entry's time, so
// TokenByHash refuses it from this entry on. It returns the *Token. Revoking a revoked token changes nothing and returns
// it as it stands; an unknown id is ErrNotFound.
func applyRevokeToken(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.RevokeTokenCommand
	if err := decodeCommand(api.OpRevokeToken, body, &cmd); err != nil {
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
	audit(tx, index, ts, api.AuditEvent{Kind: AuditToken, From: rec.Agent, Label: "TOKEN_REVOKE", Text: text})
	return &rec.Token, nil
}
