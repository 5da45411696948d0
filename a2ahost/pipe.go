package a2ahost

import (
	"io"
	"net/http"
	"sync"

	"github.com/maos-project/maos/api/client"
)

// streaming is a client of the node's API for the request r whose answers
// are not buffered: each call is served by apiHandler in process, in a
// goroutine writing through a pipe, so a long answer (GET /v1/stream)
// is read as it is written.
func (h *host) streaming(r *http.Request) *client.Client {
	return client.NewClient("http://"+r.Host, &http.Client{Transport: piped{api: h.api, outer: r}})
}

// piped is an http.RoundTripper that serves a request with a handler in a
// goroutine and answers as soon as the handler has sent its header, with
// a body that is what the handler writes, as it writes it. Closing the
// body makes the handler's later writes fail; the request's context ends
// the handler (the stream handler watches it).
type piped struct {
	api   http.Handler
	outer *http.Request
}

func (p piped) RoundTrip(req *http.Request) (*http.Response, error) {
	req = withCaller(req, p.outer)
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		p.api.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		pw.Close()
	}()
	<-w.started
	return &http.Response{
		Status: http.StatusText(w.code), StatusCode: w.code, Header: w.sent,
		Body: pr, ContentLength: -1,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
	}, nil
}

// pipeWriter is the http.ResponseWriter (and http.Flusher) of a piped call.
type pipeWriter struct {
	header  http.Header
	pw      *io.PipeWriter
	once    sync.Once
	started chan struct{}
	code    int
	sent    http.Header // the header as it was at WriteHeader
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush is a no-op: every Write reaches the reader already.
func (w *pipeWriter) Flush() {}
