package client

import (
	"context"
	"net/http"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// Rules returns the communication-rules document and when it was last
// set (Rules is nil when there is none).
func (c *Client) Rules(ctx context.Context, cons api.Consistency) (api.RulesState, error) {
	return request[api.RulesState](ctx, c, http.MethodGet, "/v1/rules", consQuery(cons), nil)
}

// SetRules replaces the rules document (sent as JSON; rules.Decode reads
// one from a file) and returns the rules as committed.
func (c *Client) SetRules(ctx context.Context, doc *rules.Document) (api.RulesState, error) {
	return request[api.RulesState](ctx, c, http.MethodPut, "/v1/rules", nil, doc)
}

// ClearRules removes the rules document: everyone may message everyone.
func (c *Client) ClearRules(ctx context.Context) (api.RulesState, error) {
	return request[api.RulesState](ctx, c, http.MethodDelete, "/v1/rules", nil, nil)
}

// CheckRules asks whether req.From may send req.To a message under the
// current rules.
func (c *Client) CheckRules(ctx context.Context, req api.RulesCheckRequest, cons api.Consistency) (api.RulesCheck, error) {
	return request[api.RulesCheck](ctx, c, http.MethodPost, "/v1/rules/check", consQuery(cons), req)
}

// Audit fetches up to limit audit events with seq > after (limit 0: the
// server's default).
func (c *Client) Audit(ctx context.Context, after uint64, limit int, cons api.Consistency) (api.AuditResponse, error) {
	return request[api.AuditResponse](ctx, c, http.MethodGet, "/v1/audit", listQuery(cons, limit, map[string]string{"after": seqParam(after)}), nil)
}

// Overview fetches up to limit message headers with seq > after, of
// channel or ("") of every channel.
func (c *Client) Overview(ctx context.Context, channel string, after uint64, limit int, cons api.Consistency) (api.OverviewPage, error) {
	q := listQuery(cons, limit, map[string]string{"after": seqParam(after), "channel": channel})
	return request[api.OverviewPage](ctx, c, http.MethodGet, "/v1/overview", q, nil)
}
