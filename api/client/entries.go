package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"

	"github.com/maos-project/maos/api"
)

// ApplyEntries sends a batch of encoded log entries to the node (the
// leader) in one request and returns one outcome per entry, in order: the
// state machine's result as JSON, or the entry's error as an *APIError
// (errors.Is works on it as on a single entry's). The error return is the
// whole request's: nothing in the batch is answered, and any entry may or
// may not have been committed.
func (c *Client) ApplyEntries(ctx context.Context, entries [][]byte) ([]api.EntryOutcome, error) {
	size := 0
	for _, e := range entries {
		size += binary.MaxVarintLen64 + len(e)
	}
	body := make([]byte, 0, size)
	for _, e := range entries {
		body = api.AppendEntry(body, e)
	}
	var out api.EntriesResponse
	h := http.Header{"Content-Type": []string{api.ContentTypeEntries}}
	if err := c.doRaw(ctx, http.MethodPost, "/v1/internal/entries", nil, h, body, &out, nil); err != nil {
		return nil, err
	}
	if len(out.Results) != len(entries) {
		return nil, fmt.Errorf("transport: POST /v1/internal/entries: %d results for %d entries", len(out.Results), len(entries))
	}
	outs := make([]api.EntryOutcome, len(entries))
	for i, r := range out.Results {
		switch {
		case r.Error != nil:
			outs[i].Err = &api.APIError{Status: r.Error.Status, Code: r.Error.Code, Message: r.Error.Message}
		case r.Result != nil:
			outs[i].Result = r.Result
		default:
			outs[i].Err = fmt.Errorf("transport: POST /v1/internal/entries: result %d has neither result nor error", i)
		}
	}
	return outs, nil
}
