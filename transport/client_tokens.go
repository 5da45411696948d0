package transport

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/fsm"
)

// WithToken returns a copy of the client whose every request (streams
// included) carries Authorization: Bearer secret. "" sends none.
func (c *Client) WithToken(secret string) *Client {
	cp := *c
	cp.token = secret
	return &cp
}

// WithCluster returns a copy of the client whose every request carries
// HeaderCluster: id, the calling node's cluster id ("" sends none).
func (c *Client) WithCluster(id string) *Client {
	cp := *c
	cp.cluster = id
	return &cp
}

// setAuth adds who calls to req: the client's bearer token and its
// node's cluster id, if it has them.
func (c *Client) setAuth(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.cluster != "" {
		req.Header.Set(HeaderCluster, c.cluster)
	}
}

// WhoAmI returns who the client's token speaks for (GET /v1/whoami).
func (c *Client) WhoAmI(ctx context.Context) (WhoAmI, error) {
	return request[WhoAmI](ctx, c, http.MethodGet, "/v1/whoami", nil, nil)
}

// CreateToken creates a token for agent with role ("" for
// fsm.TokenRoleAgent) and returns it with its secret, which no later call
// can show again. Needs an admin token.
func (c *Client) CreateToken(ctx context.Context, agent, role string) (*TokenCreated, error) {
	var out TokenCreated
	if err := c.do(ctx, http.MethodPost, "/v1/tokens", nil, TokenRequest{Agent: agent, Role: role}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens lists every token, revoked ones with RevokedAt set. Needs an
// admin token.
func (c *Client) Tokens(ctx context.Context) ([]fsm.Token, error) {
	var out TokensResponse
	err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &out)
	return out.Tokens, err
}

// RevokeToken revokes the token with id: every node refuses it once it
// has applied the revoke. Revoking a revoked token succeeds; an unknown
// id is an error wrapping fsm.ErrNotFound. Needs an admin token.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil, nil)
}
