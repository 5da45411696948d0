package maosctl

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// errStreamDone is what a followStream callback returns when it has what
// it waited for.
var errStreamDone = errors.New("done")

// followStream reads the node's stream q and calls fn for every event
// until fn returns errStreamDone (then nil), ctx ends (then ctx's error)
// or fn fails. A stream the node closes, or a node that cannot be
// reached, is resumed after the last id it sent (q.Resume), a little
// later each time (100 ms doubling to 5 s, reset by an event); a refusal
// that reconnecting will not mend (a 4xx other than 429) is returned.
func followStream(ctx context.Context, client *client.Client, q api.StreamQuery, fn func(api.StreamEvent) error) error {
	delay := 100 * time.Millisecond
	for {
		var fnErr error
		err := client.Stream(ctx, q, func(ev api.StreamEvent) error {
			if ev.ID != "" {
				q.Resume = ev.ID
			}
			delay = 100 * time.Millisecond
			fnErr = fn(ev)
			return fnErr
		})
		var apiErr *api.APIError
		switch {
		case errors.Is(fnErr, errStreamDone):
			return nil
		case fnErr != nil:
			return fnErr
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &apiErr) && apiErr.Status < http.StatusInternalServerError && apiErr.Status != http.StatusTooManyRequests:
			return err // bad input: reconnecting will not help
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}
