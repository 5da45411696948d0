package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// PutPresence sends a heartbeat of agent to the node, which gossips it to
// the others, and returns the record as stored (with its version).
func (c *Client) PutPresence(ctx context.Context, agent string, u api.PresenceUpdate) (api.Presence, error) {
	return request[api.Presence](ctx, c, http.MethodPut, "/v1/presence/"+url.PathEscape(agent), nil, u)
}

// Presence lists every agent the node knows of, sorted by id, with the
// state as the node sees it now.
func (c *Client) Presence(ctx context.Context) ([]api.Presence, error) {
	var out api.PresenceResponse
	err := c.do(ctx, http.MethodGet, "/v1/presence", nil, nil, &out)
	return out.Agents, err
}

// AgentPresence returns one agent's presence; an error matching
// api.ErrNotFound if the node knows no such agent.
func (c *Client) AgentPresence(ctx context.Context, agent string) (api.Presence, error) {
	return request[api.Presence](ctx, c, http.MethodGet, "/v1/presence/"+url.PathEscape(agent), nil, nil)
}

// AgentHealth returns one agent's health report (its presence and its
// watcher's task counts); an error matching api.ErrNotFound if the node
// knows no such agent.
func (c *Client) AgentHealth(ctx context.Context, agent string) (api.HealthReport, error) {
	var out api.HealthReport
	err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/health", nil, nil, &out)
	return out, err
}

// Members returns the node's view of gossip membership.
func (c *Client) Members(ctx context.Context) (api.MembersResponse, error) {
	return request[api.MembersResponse](ctx, c, http.MethodGet, "/v1/cluster/members", nil, nil)
}
