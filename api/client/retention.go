package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// Retention returns a channel's retention policy.
func (c *Client) Retention(ctx context.Context, channel string, cons api.Consistency) (api.Retention, error) {
	return request[api.Retention](ctx, c, http.MethodGet, "/v1/channels/"+url.PathEscape(channel)+"/retention", consQuery(cons), nil)
}

// SetRetention sets a channel's policy (maxAge a Go duration, "" for none;
// maxMessages 0 for none) and returns what the immediate trim removed.
func (c *Client) SetRetention(ctx context.Context, channel, maxAge string, maxMessages uint64) (api.TrimResult, error) {
	var out api.TrimResult
	body := api.SetRetentionCommand{MaxAge: maxAge, MaxMessages: maxMessages}
	err := c.do(ctx, http.MethodPut, "/v1/channels/"+url.PathEscape(channel)+"/retention", nil, body, &out)
	return out, err
}

// Trim applies a channel's policy now.
func (c *Client) Trim(ctx context.Context, channel string) (api.TrimResult, error) {
	return request[api.TrimResult](ctx, c, http.MethodPost, "/v1/channels/"+url.PathEscape(channel)+"/trim", nil, nil)
}
