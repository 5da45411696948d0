package transport

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/maos-project/maos/fsm"
)

// RegisterAgent registers (or re-registers) an agent and returns its
// record as stored.
func (c *Client) RegisterAgent(ctx context.Context, cmd fsm.RegisterAgentCommand) (fsm.Agent, error) {
	var out fsm.Agent
	err := c.do(ctx, http.MethodPost, "/v1/agents", nil, cmd, &out)
	return out, err
}

// UnregisterAgent removes an agent from the registry (its inbox stays) and
// returns the removed record; fsm.ErrNotFound if it was not registered.
func (c *Client) UnregisterAgent(ctx context.Context, id string) (fsm.Agent, error) {
	var out fsm.Agent
	err := c.do(ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Agent returns one registered agent.
func (c *Client) Agent(ctx context.Context, id string, cons Consistency) (fsm.Agent, error) {
	var out fsm.Agent
	err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(id), consQuery(cons), nil, &out)
	return out, err
}

// Agents returns a page of the registry, filtered by q (Role, Capability,
// After, Limit; zero values are left out).
func (c *Client) Agents(ctx context.Context, q fsm.AgentQuery, cons Consistency) (fsm.AgentPage, error) {
	v := consQuery(cons)
	for k, s := range map[string]string{"role": q.Role, "capability": q.Capability, "after": q.After} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out fsm.AgentPage
	err := c.do(ctx, http.MethodGet, "/v1/agents", v, nil, &out)
	return out, err
}

// Roles returns the role summary: role → number of registered agents.
func (c *Client) Roles(ctx context.Context, cons Consistency) (map[string]uint64, error) {
	var out RolesResponse
	err := c.do(ctx, http.MethodGet, "/v1/roles", consQuery(cons), nil, &out)
	return out.Roles, err
}

// Inbox returns a page of agent's inbox filtered by q.
func (c *Client) Inbox(ctx context.Context, agent string, q fsm.InboxQuery, cons Consistency) (fsm.InboxPage, error) {
	v := consQuery(cons)
	if q.Unread {
		v.Set("unread", "true")
	}
	for k, s := range map[string]string{"priority": string(q.Priority), "type": q.Type, "from": q.From} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Newest {
		v.Set("order", "newest")
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatUint(q.Before, 10))
	}
	var out fsm.InboxPage
	err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/inbox", v, nil, &out)
	return out, err
}

// AgentSummary returns agent's inbox counters and the bulletin in one
// request (for status lines).
func (c *Client) AgentSummary(ctx context.Context, agent string, cons Consistency) (AgentSummary, error) {
	var out AgentSummary
	err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/summary", consQuery(cons), nil, &out)
	return out, err
}

// InboxCounts returns agent's inbox counters.
func (c *Client) InboxCounts(ctx context.Context, agent string, cons Consistency) (fsm.InboxCounts, error) {
	var out fsm.InboxCounts
	err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/inbox/counts", consQuery(cons), nil, &out)
	return out, err
}

// MarkRead marks one message (id) or every message up to seq upto read in
// agent's inbox; give exactly one.
func (c *Client) MarkRead(ctx context.Context, agent, id string, upto uint64) (fsm.MarkReadResult, error) {
	var out fsm.MarkReadResult
	err := c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/read", nil, MarkReadRequest{ID: id, Upto: upto}, &out)
	return out, err
}

// Thread returns a page of the thread id (or of the thread of message id).
func (c *Client) Thread(ctx context.Context, id string, after uint64, limit int, cons Consistency) (fsm.ThreadPage, error) {
	v := consQuery(cons)
	if after > 0 {
		v.Set("after", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out fsm.ThreadPage
	err := c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id), v, nil, &out)
	return out, err
}

// Receipts returns the delivery receipts of message id.
func (c *Client) Receipts(ctx context.Context, id string, cons Consistency) (fsm.Receipts, error) {
	var out fsm.Receipts
	err := c.do(ctx, http.MethodGet, "/v1/messages/"+url.PathEscape(id)+"/receipts", consQuery(cons), nil, &out)
	return out, err
}

// Cursor returns the seq of the last message agent's watcher handled.
func (c *Client) Cursor(ctx context.Context, agent string, cons Consistency) (fsm.Cursor, error) {
	var out fsm.Cursor
	err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(agent)+"/cursor", consQuery(cons), nil, &out)
	return out, err
}

// SetCursor records that agent's watcher handled everything up to seq; the
// cursor never moves back. It returns the cursor after the call.
func (c *Client) SetCursor(ctx context.Context, agent string, seq uint64) (fsm.Cursor, error) {
	var out fsm.Cursor
	err := c.do(ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(agent)+"/cursor", nil, fsm.SetCursorCommand{Seq: seq}, &out)
	return out, err
}
