package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/maos-project/maos/api"
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
		req.Header.Set(api.HeaderCluster, c.cluster)
	}
}

// WhoAmI returns who the client's token speaks for (GET /v1/whoami).
func (c *Client) WhoAmI(ctx context.Context) (api.WhoAmI, error) {
	return request[api.WhoAmI](ctx, c, http.MethodGet, "/v1/whoami", nil, nil)
}

// CreateToken creates a token for agent with role ("" for
// api.TokenRoleAgent) and returns it with its secret, which no later call
// can show again. Needs an admin token.
func (c *Client) CreateToken(ctx context.Context, agent, role string) (*api.TokenCreated, error) {
	return c.CreateTokenFor(ctx, api.TokenRequest{Agent: agent, Role: role})
}

// CreateTokenFor is CreateToken with the whole request: the token's grant
// (the registry role and capabilities its agent may register itself with)
// besides its agent and role.
func (c *Client) CreateTokenFor(ctx context.Context, req api.TokenRequest) (*api.TokenCreated, error) {
	var out api.TokenCreated
	if err := c.do(ctx, http.MethodPost, "/v1/tokens", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens lists every token, revoked ones with RevokedAt set. Needs an
// admin token.
func (c *Client) Tokens(ctx context.Context) ([]api.Token, error) {
	var out api.TokensResponse
	err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &out)
	return out.Tokens, err
}

// RevokeToken revokes the token with id: every node refuses it once it
// has applied the revoke. Revoking a revoked token succeeds; an unknown
// id is an error wrapping api.ErrNotFound. Needs an admin token.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil, nil)
}

// WithTokenWatch returns a copy of the client that reports every answer
// to fn, from the call that got it: refused true when the answer refuses
// the token itself (401 with WWW-Authenticate error="invalid_token": the
// token was revoked, or is unknown to the node), false for any other
// answer. A long-running client (a watcher) stops on a refusal that lasts
// instead of retrying forever, each retry an audit line.
func (c *Client) WithTokenWatch(fn func(refused bool)) *Client {
	cp := *c
	hc := *c.hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = tokenWatch{base: base, fn: fn}
	cp.hc = &hc
	return &cp
}

type tokenWatch struct {
	base http.RoundTripper
	fn   func(refused bool)
}

func (t tokenWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.fn(resp.StatusCode == http.StatusUnauthorized &&
			strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`))
	}
	return resp, err
}
