package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// RegisterAgent registers (or re-registers) an agent and returns its
// record as stored.
func (c *Client) RegisterAgent(ctx context.Context, cmd api.RegisterAgentCommand) (api.Agent, error) {
	return request[api.Agent](ctx, c, http.MethodPost, "/v1/agents", nil, cmd)
}

// UnregisterAgent removes an agent from the registry (its inbox stays) and
// returns the removed record; api.ErrNotFound if it was not registered.
func (c *Client) UnregisterAgent(ctx context.Context, id string) (api.Agent, error) {
	return request[api.Agent](ctx, c, http.MethodDelete, "/v1/agents/"+url.PathEscape(id), nil, nil)
}

// Agent returns one registered agent.
func (c *Client) Agent(ctx context.Context, id string, cons api.Consistency) (api.Agent, error) {
	return request[api.Agent](ctx, c, http.MethodGet, "/v1/agents/"+url.PathEscape(id), consQuery(cons), nil)
}

// AgentA2A returns agent id's A2A remote with its credential (GET
// /v1/agents/{id}/a2a): admin tokens only (api.ErrForbidden otherwise);
// api.ErrNotFound when id is no A2A remote.
func (c *Client) AgentA2A(ctx context.Context, id string, cons api.Consistency) (api.A2ARemote, error) {
	return request[api.A2ARemote](ctx, c, http.MethodGet, "/v1/agents/"+url.PathEscape(id)+"/a2a", consQuery(cons), nil)
}

// Agents returns a page of the registry, filtered by q (Role, Capability,
// After, Limit; zero values are left out).
func (c *Client) Agents(ctx context.Context, q api.AgentQuery, cons api.Consistency) (api.AgentPage, error) {
	v := listQuery(cons, q.Limit, map[string]string{"role": q.Role, "capability": q.Capability, "after": q.After})
	return request[api.AgentPage](ctx, c, http.MethodGet, "/v1/agents", v, nil)
}

// Roles returns the role summary: role → number of registered agents.
func (c *Client) Roles(ctx context.Context, cons api.Consistency) (map[string]uint64, error) {
	var out api.RolesResponse
	err := c.do(ctx, http.MethodGet, "/v1/roles", consQuery(cons), nil, &out)
	return out.Roles, err
}

// Inbox returns a page of agent's inbox filtered by q.
func (c *Client) Inbox(ctx context.Context, agent string, q api.InboxQuery, cons api.Consistency) (api.InboxPage, error) {
	v := listQuery(cons, q.Limit, map[string]string{"priority": string(q.Priority), "type": q.Type, "from": q.From,
		"after": seqParam(q.After), "before": seqParam(q.Before)})
	if q.Unread {
		v.Set("unread", "true")
	}
	if q.Newest {
		v.Set("order", "newest")
	}
	return request[api.InboxPage](ctx, c, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/inbox", v, nil)
}

// AgentSummary returns agent's inbox counters and the bulletin in one
// request (for status lines).
func (c *Client) AgentSummary(ctx context.Context, agent string, cons api.Consistency) (api.AgentSummary, error) {
	return request[api.AgentSummary](ctx, c, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/summary", consQuery(cons), nil)
}

// InboxCounts returns agent's inbox counters.
func (c *Client) InboxCounts(ctx context.Context, agent string, cons api.Consistency) (api.InboxCounts, error) {
	return request[api.InboxCounts](ctx, c, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/inbox/counts", consQuery(cons), nil)
}

// MarkRead marks one message (id) or every message up to seq upto read in
// agent's inbox; give exactly one.
func (c *Client) MarkRead(ctx context.Context, agent, id string, upto uint64) (api.MarkReadResult, error) {
	return request[api.MarkReadResult](ctx, c, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/read", nil, api.MarkReadRequest{ID: id, Upto: upto})
}

// ReportReceipt records what agent's watcher did with message id
// (api.ReceiptQueued, api.ReceiptDelivered or api.ReceiptInterrupted) and
// returns the receipt after it; an error matching api.ErrNotFound when
// the message is not in agent's inbox, api.ErrConflict when the rules
// blocked it for agent.
func (c *Client) ReportReceipt(ctx context.Context, agent, id, state string) (api.Receipt, error) {
	return request[api.Receipt](ctx, c, http.MethodPut, "/v1/agents/"+url.PathEscape(agent)+"/receipts/"+url.PathEscape(id), nil, api.ReceiptStateRequest{State: state})
}

// Thread returns a page of the thread id (or of the thread of message id).
func (c *Client) Thread(ctx context.Context, id string, after uint64, limit int, cons api.Consistency) (api.ThreadPage, error) {
	v := listQuery(cons, limit, map[string]string{"after": seqParam(after)})
	return request[api.ThreadPage](ctx, c, http.MethodGet, "/v1/threads/"+url.PathEscape(id), v, nil)
}

// Receipts returns the delivery receipts of message id.
func (c *Client) Receipts(ctx context.Context, id string, cons api.Consistency) (api.Receipts, error) {
	return request[api.Receipts](ctx, c, http.MethodGet, "/v1/messages/"+url.PathEscape(id)+"/receipts", consQuery(cons), nil)
}

// Cursor returns the seq of the last message agent's watcher handled.
func (c *Client) Cursor(ctx context.Context, agent string, cons api.Consistency) (api.Cursor, error) {
	return request[api.Cursor](ctx, c, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/cursor", consQuery(cons), nil)
}

// SetCursor records that agent's watcher handled everything up to seq; the
// cursor never moves back. It returns the cursor after the call.
func (c *Client) SetCursor(ctx context.Context, agent string, seq uint64) (api.Cursor, error) {
	return request[api.Cursor](ctx, c, http.MethodPut, "/v1/agents/"+url.PathEscape(agent)+"/cursor", nil, api.SetCursorCommand{Seq: seq})
}
