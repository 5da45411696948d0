package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/maos-project/maos/api"
)

func leasePath(agent string) string { return "/v1/agents/" + url.PathEscape(agent) + "/lease" }

// AcquireAgentLease asks for cmd.Agent's lease: granted (a new fence),
// extended (the caller holds it) or standby (another holds it live).
func (c *Client) AcquireAgentLease(ctx context.Context, cmd api.AgentLeaseAcquireCommand) (api.AgentLeaseResult, error) {
	return request[api.AgentLeaseResult](ctx, c, http.MethodPost, leasePath(cmd.Agent), nil, cmd)
}

// RenewAgentLease extends the caller's live lease. An error matching
// api.ErrFenced means the lease is lost (lapsed, released, taken over).
func (c *Client) RenewAgentLease(ctx context.Context, cmd api.AgentLeaseRenewCommand) (api.AgentLeaseResult, error) {
	return request[api.AgentLeaseResult](ctx, c, http.MethodPost, leasePath(cmd.Agent)+"/renew", nil, cmd)
}

// RenewAgentLeases renews several leases in one request and one log
// entry (POST /v1/leases/renew): each renewal's outcome is its result's
// Lease or Error, in cmd's order. The request as a whole fails with
// api.ErrClusterVersion while the cluster runs version 1, and with
// api.ErrNotFound from a node too old to have the route.
func (c *Client) RenewAgentLeases(ctx context.Context, cmd api.AgentLeaseRenewManyCommand) (api.AgentLeaseRenewManyResult, error) {
	return request[api.AgentLeaseRenewManyResult](ctx, c, http.MethodPost, "/v1/leases/renew", nil, cmd)
}

// ReleaseAgentLease gives the caller's lease up, so a standby takes over
// at its next try.
func (c *Client) ReleaseAgentLease(ctx context.Context, cmd api.AgentLeaseReleaseCommand) (api.AgentLeaseResult, error) {
	return request[api.AgentLeaseResult](ctx, c, http.MethodPost, leasePath(cmd.Agent)+"/release", nil, cmd)
}

// AgentLease reads agent's lease (api.ErrNotFound when none was granted).
func (c *Client) AgentLease(ctx context.Context, agent string, cons api.Consistency) (*api.AgentLease, error) {
	l, err := request[api.AgentLease](ctx, c, http.MethodGet, leasePath(agent), consQuery(cons), nil)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// AgentLeases lists every agent's lease.
func (c *Client) AgentLeases(ctx context.Context, cons api.Consistency) (api.AgentLeasePage, error) {
	return request[api.AgentLeasePage](ctx, c, http.MethodGet, "/v1/leases", consQuery(cons), nil)
}

// SendFenced posts m as Send does, under the fence of its sender's agent
// lease: refused (an error matching api.ErrFenced) unless the fence is
// the current grant's. Fence 0 is Send.
func (c *Client) SendFenced(ctx context.Context, m *api.Message, fence uint64) (*api.SendResponse, error) {
	var q url.Values
	if fence != 0 {
		q = url.Values{"agent_fence": {strconv.FormatUint(fence, 10)}}
	}
	var out api.SendResponse
	if err := c.do(ctx, http.MethodPost, "/v1/messages", q, m, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetCursorFenced moves agent's cursor as SetCursor does, under the fence
// of its agent lease (0: none).
func (c *Client) SetCursorFenced(ctx context.Context, agent string, seq, fence uint64) (api.Cursor, error) {
	return request[api.Cursor](ctx, c, http.MethodPut, "/v1/agents/"+url.PathEscape(agent)+"/cursor", nil, api.SetCursorCommand{Seq: seq, AgentFence: fence})
}
