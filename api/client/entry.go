package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/maos-project/maos/api"
)

// ApplyEntry sends an encoded log entry to the node (the leader) and returns
// the state machine's result as JSON.
func (c *Client) ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error) {
	var out json.RawMessage
	h := http.Header{"Content-Type": []string{api.ContentTypeEntry}}
	err := c.doRaw(ctx, http.MethodPost, "/v1/internal/entry", nil, h, entry, &out, nil)
	return out, err
}
