package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// RevokedTokenError is TokenByHash's answer for a revoked token. It wraps
// ErrNotFound: a revoked token authenticates nothing.
type RevokedTokenError struct {
	Token api.Token // the token, with RevokedAt set
}

func (e *RevokedTokenError) Error() string {
	return fmt.Sprintf("fsm: token %s of %s was revoked at %s", e.Token.ID, e.Token.Agent, e.Token.RevokedAt.Format(time.RFC3339))
}

// Unwrap lets errors.Is(err, ErrNotFound) match.
func (e *RevokedTokenError) Unwrap() error { return api.ErrNotFound }

// TokenByHash returns the live token whose secret hashes to hash (see
// HashToken), or an error wrapping ErrNotFound: a *RevokedTokenError for
// a revoked one. It reads the node's own state: no network, no cache.
func (f *FSM) TokenByHash(hash string) (*api.Token, error) {
	var tok *api.Token
	err := f.view(func(tx *bbolt.Tx) error {
		id, ok := tokenIDByHash(tx, hash)
		if !ok {
			return fmt.Errorf("fsm: token: %w", api.ErrNotFound)
		}
		rec, err := loadToken(tx, id)
		if err != nil {
			return err
		}
		if rec == nil || rec.Hash != hash {
			return fmt.Errorf("fsm: token: %w", api.ErrNotFound)
		}
		if rec.Revoked() {
			return &RevokedTokenError{Token: rec.Token}
		}
		tok = &rec.Token
		return nil
	})
	return tok, err
}

// Tokens returns every token, live and revoked, by id; never a hash.
func (f *FSM) Tokens() ([]api.Token, error) {
	out := []api.Token{}
	err := f.view(func(tx *bbolt.Tx) error {
		recs, err := decodeAll[tokenRecord](tx.Bucket(bucketTokens), "token")
		for _, rec := range recs {
			out = append(out, rec.Token)
		}
		return err
	})
	return out, err
}
