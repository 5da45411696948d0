package transport

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/rules"
)

// Rules returns the communication-rules document and when it was last
// set (Rules is nil when there is none).
func (c *Client) Rules(ctx context.Context, cons Consistency) (fsm.RulesState, error) {
	var out fsm.RulesState
	err := c.do(ctx, http.MethodGet, "/v1/rules", consQuery(cons), nil, &out)
	return out, err
}

// SetRules replaces the rules document (sent as JSON; rules.Decode reads
// one from a file) and returns the rules as committed.
func (c *Client) SetRules(ctx context.Context, doc *rules.Document) (fsm.RulesState, error) {
	var out fsm.RulesState
	err := c.do(ctx, http.MethodPut, "/v1/rules", nil, doc, &out)
	return out, err
}

// ClearRules removes the rules document: everyone may message everyone.
func (c *Client) ClearRules(ctx context.Context) (fsm.RulesState, error) {
	var out fsm.RulesState
	err := c.do(ctx, http.MethodDelete, "/v1/rules", nil, nil, &out)
	return out, err
}

// CheckRules asks whether req.From may send req.To a message under the
// current rules.
func (c *Client) CheckRules(ctx context.Context, req RulesCheckRequest, cons Consistency) (fsm.RulesCheck, error) {
	var out fsm.RulesCheck
	err := c.do(ctx, http.MethodPost, "/v1/rules/check", consQuery(cons), req, &out)
	return out, err
}

// Audit fetches up to limit audit events with seq > after (limit 0: the
// server's default).
func (c *Client) Audit(ctx context.Context, after uint64, limit int, cons Consistency) (AuditResponse, error) {
	var out AuditResponse
	err := c.do(ctx, http.MethodGet, "/v1/audit", oversightPageQuery(cons, after, limit), nil, &out)
	return out, err
}

// Overview fetches up to limit message headers with seq > after, of
// channel or ("") of every channel.
func (c *Client) Overview(ctx context.Context, channel string, after uint64, limit int, cons Consistency) (fsm.OverviewPage, error) {
	q := oversightPageQuery(cons, after, limit)
	if channel != "" {
		q.Set("channel", channel)
	}
	var out fsm.OverviewPage
	err := c.do(ctx, http.MethodGet, "/v1/overview", q, nil, &out)
	return out, err
}

func oversightPageQuery(cons Consistency, after uint64, limit int) url.Values {
	q := consQuery(cons)
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}
