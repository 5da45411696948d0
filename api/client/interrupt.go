package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// InterruptAgent interrupts agent: its urgent alert, then ESC to its pane
// on the node that hosts it (see InterruptRequest and InterruptResponse).
// A sender that may not interrupt is an error wrapping api.ErrForbidden
// whose message is the rule's.
func (c *Client) InterruptAgent(ctx context.Context, agent string, req api.InterruptRequest) (api.InterruptResponse, error) {
	var out api.InterruptResponse
	err := c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/interrupt", nil, req, &out)
	return out, err
}
