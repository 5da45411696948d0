// Package a2ahost makes every maos agent an A2A agent (protocol 1.0, the
// official a2a-go SDK): an Agent Card per registered agent, built from the
// registry, and a JSON-RPC endpoint whose methods create, read, list,
// stream, continue and cancel maos tasks for that agent, with file parts
// as maos artifacts. It is a client of the node's own HTTP API, called in
// process with the caller's bearer token, so auth, rules, the secret
// guard and quotas apply exactly as for any other caller (one rule, one
// place). See DESIGN.md and docs/A2A.md.
package a2ahost

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/maos-project/maos/api/client"
)

// Prefix is where the A2A agents are served: AgentPath(id) is an agent's
// JSON-RPC endpoint, CardPath(id) its Agent Card.
const Prefix = "/a2a/agents/"

// AgentPath is agent id's JSON-RPC endpoint: /a2a/agents/{id}.
func AgentPath(id string) string { return Prefix + id }

// V03Path is agent id's base URL for A2A 0.3 clients: JSON-RPC 0.3's
// method names and shapes (the SDK's a2av0 compatibility handler over the
// same methods) at /a2a/agents/{id}/v0.3, and a 0.3-readable card at the
// well-known name under it. The 1.0 card lists it as a second interface.
func V03Path(id string) string { return AgentPath(id) + "/v0.3" }

// CardPath is agent id's Agent Card, at the well-known name under its
// endpoint: /a2a/agents/{id}/.well-known/agent-card.json.
func CardPath(id string) string { return AgentPath(id) + a2asrv.WellKnownAgentCardPath }

// Options configure Mount.
type Options struct {
	// Version is the cards' version (the maos build's); "" is "dev".
	Version string
	// PushAllow is the hosts push notifications may go to (maosd
	// --a2a-push-allow, api.CheckPushURL); empty: none, the cards say
	// pushNotifications false and the push methods are
	// PUSH_NOTIFICATION_NOT_SUPPORTED.
	PushAllow []string
}

// Mount serves the A2A agents under Prefix and hands every other request
// to next unchanged. apiHandler is the node's HTTP API (transport.Server):
// the A2A handlers call it in process, with the request's Authorization
// header, its remote address and TLS state, so it authenticates and
// limits them as if the caller had called the API.
func Mount(apiHandler, next http.Handler, opts Options) http.Handler {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	h := &host{api: apiHandler, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{id}"+a2asrv.WellKnownAgentCardPath, h.card)
	mux.HandleFunc("POST "+Prefix+"{id}", h.rpc)
	mux.HandleFunc("POST "+Prefix+"{id}/v0.3", h.rpcV03)
	mux.HandleFunc("GET "+Prefix+"{id}/v0.3"+a2asrv.WellKnownAgentCardPath, h.cardV03)
	mux.Handle("/", next)
	return mux
}

type host struct {
	api  http.Handler
	opts Options
}

// local is a client of the node's API for the request r: each call is
// served by apiHandler in process, carrying r's credentials.
func (h *host) local(r *http.Request) *client.Client {
	return client.NewClient("http://"+r.Host, &http.Client{Transport: inProcess{api: h.api, outer: r}})
}

// inProcess is an http.RoundTripper that serves a request with a handler
// and answers what it wrote (unary calls only: the body is buffered).
type inProcess struct {
	api   http.Handler
	outer *http.Request
}

func (p inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	req = withCaller(req, p.outer)
	rec := &recorder{header: http.Header{}}
	p.api.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return &http.Response{
		Status: http.StatusText(rec.code), StatusCode: rec.code, Header: rec.header,
		Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
	}, nil
}

// withCaller is a copy of req (a RoundTripper leaves its request alone)
// carrying outer's credentials: its Authorization header, remote address
// and TLS state.
func withCaller(req, outer *http.Request) *http.Request {
	req = req.Clone(req.Context())
	req.RemoteAddr, req.TLS = outer.RemoteAddr, outer.TLS
	if a := outer.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	req.RequestURI = req.URL.RequestURI()
	return req
}

// recorder is the http.ResponseWriter of an in-process call.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}
func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

// baseURL is the scheme and host r reached this node at.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + strings.TrimSuffix(r.Host, "/")
}
