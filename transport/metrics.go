package transport

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/metrics"
)

// Metrics is what the API counts and serves of the node's metrics;
// *metrics.Metrics implements it. The server counts the answers of
// POST /v1/messages by result and the event streams open, and serves
// Handler on GET /metrics (admin only with auth).
type Metrics interface {
	// Send counts one answered send: metrics.SendOK or the answer's
	// error code.
	Send(result string)
	// StreamOpened and StreamClosed bracket one GET /v1/stream.
	StreamOpened()
	StreamClosed()
	// Handler serves the metrics in Prometheus's text format.
	Handler(logger *slog.Logger) http.Handler
}

// noMetrics counts nothing: the server's Metrics when ServerOptions has
// none.
type noMetrics struct{}

func (noMetrics) Send(string)                       {}
func (noMetrics) StreamOpened()                     {}
func (noMetrics) StreamClosed()                     {}
func (noMetrics) Handler(*slog.Logger) http.Handler { return nil }

// sendPattern is the route whose answers maos_sends_total counts.
const sendPattern = "POST /v1/messages"

// resultKey carries a request's *answerRecorder in its context.
type resultKey struct{}

// answerRecorder remembers what a request was answered: its status and,
// when it was an error, the error's code (set by writeError).
type answerRecorder struct {
	http.ResponseWriter
	status int
	code   string
}

// Unwrap lets http.ResponseController reach the connection (the body's
// stall deadline, bodystall.go).
func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *answerRecorder) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerRecorder) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.ResponseWriter.Write(p)
}

// result is the answer as a label: ok for a 2xx, else the error's code
// (http_NNN for an error answered without one).
func (a *answerRecorder) result() string {
	switch {
	case a.code != "":
		return a.code
	case a.status == 0 || a.status < 300:
		return metrics.SendOK
	default:
		return "http_" + strconv.Itoa(a.status)
	}
}

// recordCode notes code as the answer of r, if r's answers are counted.
func recordCode(r *http.Request, code string) {
	if a, ok := r.Context().Value(resultKey{}).(*answerRecorder); ok && a.code == "" {
		a.code = code
	}
}

// countSends counts every answer of the send route by result, the auth
// refusals of its pass included.
func (s *Server) countSends(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &answerRecorder{ResponseWriter: w}
		next.ServeHTTP(a, r.WithContext(context.WithValue(r.Context(), resultKey{}, a)))
		s.metrics.Send(a.result())
	})
}

// serveMetrics is GET /metrics: the node's metrics in Prometheus's text
// format, or 404 on a server given none.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	h := s.metrics.Handler(s.opts.Logger)
	if h == nil {
		s.writeError(w, r, &api.APIError{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "this node serves no metrics"})
		return
	}
	h.ServeHTTP(w, r)
}
