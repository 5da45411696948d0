package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// Policy returns agent's run-time delivery policies in force by the
// node's clock (GET /v1/agents/{id}/policy); an empty list when none is
// (its watchers' YAML applies).
func (c *Client) Policy(ctx context.Context, agent string, cons api.Consistency) (api.PolicySet, error) {
	return request[api.PolicySet](ctx, c, http.MethodGet, policyPath(agent), consQuery(cons), nil)
}

// SetPolicy sets agent's run-time policy, agent-wide or (req.From) for
// one sender, and returns it as committed. Bad input is an error wrapping
// api.ErrInvalid naming the field; another agent's token, api.ErrForbidden.
func (c *Client) SetPolicy(ctx context.Context, agent string, req api.PolicyRequest) (api.Policy, error) {
	return request[api.Policy](ctx, c, http.MethodPut, policyPath(agent), nil, req)
}

// ClearPolicy clears agent's agent-wide policy, or from's override when
// from is not ""; the result's Cleared says whether one was in force.
func (c *Client) ClearPolicy(ctx context.Context, agent, from string) (api.Policy, error) {
	var q url.Values
	if from != "" {
		q = url.Values{"from": {from}}
	}
	return request[api.Policy](ctx, c, http.MethodDelete, policyPath(agent), q, nil)
}

func policyPath(agent string) string { return "/v1/agents/" + url.PathEscape(agent) + "/policy" }
