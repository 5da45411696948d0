package transport

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// DefaultBodyStallTimeout is ServerOptions.BodyStallTimeout's default.
const DefaultBodyStallTimeout = 30 * time.Second

// stallGuard is a request body that must keep arriving: before each read
// it sets the connection's read deadline to now + d (through the
// response's http.ResponseController), and once the body ends (EOF) it
// clears it, so a handler that then waits (a long poll) or
// writes (a stream) is not cut off. A client that stops sending a body it
// announced thus holds its connection for at most d after its last byte,
// however large the body (a multi-GiB artifact upload that keeps
// progressing is never cut). The server's ReadTimeout would bound the
// whole request instead, and cancel a stream's context.
type stallGuard struct {
	body io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	done bool
}

// guardBody wraps r's body in a stallGuard of d; a request without a body,
// or d <= 0, is left alone.
func guardBody(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if d <= 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	g := &stallGuard{body: r.Body, rc: http.NewResponseController(w), d: d}
	// From now, not from the handler's first read: a body the handler
	// refuses unread (401, 403) is discarded by the server before it
	// answers, under this deadline too.
	_ = g.rc.SetReadDeadline(time.Now().Add(d))
	r.Body = g
}

func (g *stallGuard) Read(p []byte) (int, error) {
	if !g.done {
		_ = g.rc.SetReadDeadline(time.Now().Add(g.d))
	}
	n, err := g.body.Read(p)
	switch {
	case err == nil || g.done:
	case errors.Is(err, io.EOF):
		// The whole body came: what the handler does next has no deadline.
		g.done = true
		_ = g.rc.SetReadDeadline(time.Time{})
	default:
		// A stalled (or broken) body: the deadline stays passed, so the
		// server's own reads of the rest (it discards an unread body
		// before it answers) fail at once and the connection closes.
		g.done = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = &stalledError{d: g.d, err: err}
		}
	}
	return n, err
}

func (g *stallGuard) Close() error { return g.body.Close() }

// stalledError is a request body that sent nothing for d.
type stalledError struct {
	d   time.Duration
	err error
}

func (e *stalledError) Error() string {
	return fmt.Sprintf("request body stalled: no byte for %s (--http-body-timeout)", e.d)
}

func (e *stalledError) Unwrap() error { return e.err }
