package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/dialect"
	"github.com/maos-project/maos/hostport"
	"github.com/maos-project/maos/secrets"
)

// ServerOptions configure NewServer.
type ServerOptions struct {
	// PushAllow is the operator's allowlist of the hosts push
	// notifications may go to (maosd --a2a-push-allow: host or
	// host:port); empty refuses every push config (api.CheckPushURL).
	PushAllow []string
	// MaxMessageBytes caps a POST /v1/messages body; 0 means
	// api.DefaultMaxBytes (100 KiB).
	MaxMessageBytes int64
	// Logger receives 5xx errors; nil means slog.Default().
	Logger *slog.Logger
	// Now stamps generated ids; nil means time.Now.
	Now func() time.Time
	// KeepAlive is how often an idle SSE stream sends a comment; 0 means
	// DefaultKeepAlive (15 s).
	KeepAlive time.Duration
	// BodyStallTimeout ends a request whose body sends no byte for this
	// long (the connection is closed; bodystall.go); 0 means
	// DefaultBodyStallTimeout (30 s), negative never.
	BodyStallTimeout time.Duration
	// Interrupt sends ESC to a local agent's terminal pane; nil when this
	// node hosts no such agent. maosd sets it from its --agents file.
	Interrupt func(ctx context.Context, agent string) error
	// PeerClient returns a client for another node of the Raft
	// configuration, by its node id, at its address in the replicated node
	// registry, speaking the cluster's scheme (TLS) and authenticated as a
	// node (NodeCredential, never the admin token), for requests this node
	// relays (an interrupt to the agent's node); an error when id is not a
	// member. An address a gossip member advertises is never called. nil
	// relays nothing: the answer says so.
	PeerClient func(nodeID string) (*client.Client, error)
	// Limits bound what one agent can make this node do (send rate,
	// recipients, open streams); the zero value limits nothing but bodies.
	// NewServer panics if Limits.Validate fails.
	Limits Limits
	// Auth turns on bearer-token authentication and per-route
	// authorization (auth.go); nil serves every request unauthenticated
	// and unrestricted.
	Auth *AuthConfig
	// Blobs stores and serves artifacts' bytes (artifacts.go); nil: the
	// artifact routes answer 503 (the records' reads still work).
	Blobs Blobs
	// Metrics counts sends and streams and is served on GET /metrics
	// (metrics.go); nil counts nothing and GET /metrics answers 404.
	Metrics Metrics
}

// maxControlBytes caps the bodies of the cluster endpoints.
const maxControlBytes = 64 << 10

// Server is the HTTP API v1 in front of a node (a Backend).
type Server struct {
	prop     Proposer
	state    Reader
	cluster  Membership
	presence PresenceStore
	opts     ServerOptions
	// mux matches a request to its route, once; table is the routes
	// (routes.go), byPattern the same by pattern.
	mux       *http.ServeMux
	table     []route
	byPattern map[string]*route
	// limits holds the rate-limit state of opts.Limits.
	limits *limiter
	// auth authenticates and authorizes requests; nil when opts.Auth is.
	auth *authState
	// denials folds and paces the refusals the audit trail records
	// (auth.go: deny); node is this node's id for their lines, "" until
	// known.
	denials *denialCoalescer
	nodeMu  sync.Mutex
	node    string
	// metrics is opts.Metrics, or noMetrics.
	metrics Metrics
	// sessions are the web console's (sessions.go).
	sessions *sessions
}

// NewServer returns the API handler for the node b.
func NewServer(b Backend, opts ServerOptions) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = api.DefaultMaxBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.BodyStallTimeout == 0 {
		opts.BodyStallTimeout = DefaultBodyStallTimeout
	}
	// Compile the secret rules now, not on the first send, which would
	// otherwise wait ~0.2 s (and, rate-limited, find its bucket refilled).
	// A rule set that cannot load is the scan's error to report.
	_ = secrets.Warm()
	s := &Server{prop: b, state: b.State(), cluster: b, presence: b, opts: opts, limits: newLimiter(opts.Limits),
		denials: newDenialCoalescer(), metrics: opts.Metrics, sessions: newSessions()}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if opts.Auth != nil {
		s.auth = newAuthState(s, opts.Auth)
	}
	s.register(s.routes())
	return s
}

// ServeHTTP implements http.Handler: it refuses what no route may see,
// then the mux matches the request's route once and runs its pass
// (routes.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := requireNodeCert(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.sameCluster(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The mux answers a path with an empty, "." or ".." segment with a
	// redirect to its cleaned form and an HTML body. No endpoint has such a
	// path (ids and names never are "", "." or ".."): say so in JSON.
	if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && p != cleanPath(p) {
		s.writeError(w, r, &api.APIError{Status: http.StatusNotFound, Code: api.CodeNotFound,
			Message: fmt.Sprintf("no endpoint %s %s: the path has an empty, . or .. segment", r.Method, p)})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// sameCluster refuses (409) a request whose HeaderCluster names another
// cluster than this node's: a node of another cluster calling this one.
// Either side not knowing its id yet checks nothing.
func (s *Server) sameCluster(r *http.Request) error {
	theirs := r.Header.Get(api.HeaderCluster)
	if theirs == "" {
		return nil
	}
	mine := s.state.ClusterID()
	if mine == "" || mine == theirs {
		return nil
	}
	return &api.APIError{Status: http.StatusConflict, Code: api.CodeConflict, Message: fmt.Sprintf(
		"%s %s comes from a node of cluster %s, and this node belongs to cluster %s: a node joins one cluster only "+
			"(check the calling node's --join and --data-dir)", r.Method, r.URL.Path, clip(theirs, api.MaxIDLen), mine)}
}

// cleanPath is the canonical form of an URL path as net/http's ServeMux
// computes it: path.Clean, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.cluster.Ready(r.Context()); err != nil {
		if !errors.Is(err, api.ErrNotReady) {
			err = fmt.Errorf("%w: %w", api.ErrNotReady, err)
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// send serves POST /v1/messages: the body is decoded once, the seed
// dialects mapping it to a message, a task command or an approval command
// (decodeMessage), and that command takes its one pass (pipeline.go).
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	body, err := decodeMessage(w, r, s.opts.MaxMessageBytes, s.registered)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case body.task != nil:
		s.sendTask(w, r, body.task)
		return
	case body.approval != nil:
		s.sendApproval(w, r, *body.approval)
		return
	}
	messageSend.serve(s, w, r, &api.SendCommand{Message: body.msg})
}

// messageSend is POST /v1/messages's command for a message (a seed task
// or approval message goes as its own command): the sender's lease fence
// from ?agent_fence=, the recipients within --max-recipients, the sender
// admitted. Whether the sender may interrupt, which artifacts it may name
// and whether it may see the message it answers are apply's to decide;
// bindSend tells it what the token reads (visibility.go).
var messageSend = writeSpec[api.SendCommand, *api.SendCommand]{op: api.OpSend,
	bind:   bindSend,
	limits: func(s *Server, r *http.Request, c *api.SendCommand) error { return s.checkRecipients(r, &c.Message) },
	actor:  func(c *api.SendCommand) (string, string) { return "from", c.Message.From },
}

// bindSend puts into a send what the request says beyond its body: the
// lease fence (?agent_fence=) and whether the token moderates and reads
// everything.
func bindSend(r *http.Request, c *api.SendCommand) error {
	fence, err := agentFenceParam(r)
	if err != nil {
		return err
	}
	v := viewerFrom(r.Context())
	c.AgentFence, c.Moderator, c.ReadsAll = fence, IdentityFrom(r.Context()).Moderates(), v == nil || v.Moderator
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.query(w, r, func(st Reader) (any, error) {
		m, err := st.Message(id)
		if err == nil && !viewerFrom(r.Context()).CanRead(m) {
			return nil, errHiddenMessage(id)
		}
		return m, err
	})
}

func (s *Server) channels(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) {
		list, err := st.Channels()
		return api.ChannelsResponse{Channels: list}, err
	})
}

func (s *Server) channelMessages(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Private messages the reader may not read are left out: after the
	// read at the asked consistency, further pages read on from there.
	channel := r.PathValue("channel")
	s.query(w, r, func(st Reader) (any, error) {
		var page api.Page
		var err error
		page.Messages, page.HasMore, err = visibleMessages(viewerFrom(r.Context()), after, int(limit),
			func(after uint64, limit int) ([]*api.Message, bool, error) {
				p, err := st.ChannelPage(channel, after, limit)
				return p.Messages, p.HasMore, err
			})
		return page, err
	})
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) join(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, f := range []struct{ name, v string }{{"node_id", req.NodeID}, {"raft_addr", req.RaftAddr}, {"api_addr", req.APIAddr}} {
		if f.v == "" {
			s.writeError(w, r, &api.FieldError{Field: f.name, Reason: "required"})
			return
		}
	}
	if !api.ValidName(req.NodeID) {
		s.writeError(w, r, api.NameError("node_id", req.NodeID))
		return
	}
	// Raft adds the address to the configuration as given: one nobody can
	// dial would be a voter that never answers, counted in every quorum.
	for _, f := range []struct{ name, v string }{{"raft_addr", req.RaftAddr}, {"api_addr", req.APIAddr}} {
		if reason := checkHostPort(f.v); reason != "" {
			s.writeError(w, r, &api.FieldError{Field: f.name, Reason: reason})
			return
		}
	}
	if err := s.cluster.Join(r.Context(), req); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"joined": req.NodeID})
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cluster.Remove(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	res, err := s.cluster.Snapshot(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) transfer(w http.ResponseWriter, r *http.Request) {
	var req api.TransferRequest
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	res, err := s.cluster.TransferLeadership(r.Context(), req.NodeID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// sendBody is what a POST /v1/messages carried: a message, or a seed 004
// body that is a command (a task's, an approval request).
type sendBody struct {
	msg      api.Message
	task     *dialect.TaskMessage
	approval *api.ApprovalRequestCommand
}

// registered reports whether agent id is registered, on this node's own
// state: how a seed's tagged approvers are resolved.
func (s *Server) registered(id string) bool {
	_, err := s.state.Agent(id)
	return err == nil
}

// decodeMessage reads the body of POST /v1/messages, at most limit bytes:
// a message in maos's own format, decoded as decodeBody does (an unknown
// field is an error naming it), or, when that fails and the body has a
// field only the seeds' dialects have (dialect.Is: session_id, subject,
// message_type, ...), a message in one of those formats, mapped by
// dialect.Map as maosctl import maps a file; except a seed 004
// task_delegation or task_completion, which is a task command
// (dialect.MapTask), and a hitl_approval_request, which is an approval
// request (dialect.MapApproval, its tagged approvers resolved by
// registered), returned instead of a message. A body in the native format
// costs nothing more than before; one that is neither gets the native
// format's error.
func decodeMessage(w http.ResponseWriter, r *http.Request, limit int64, registered func(id string) bool) (sendBody, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		return sendBody{}, bodyError(err, limit)
	}
	raw := buf.Bytes()
	var m api.Message
	err := decodeJSON(bytes.NewReader(raw), limit, &m)
	if err == nil {
		return sendBody{msg: m}, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		// Not one JSON object: say what is wrong with it as such
		// (trailing data, a syntax error), not with its first field.
		var v json.RawMessage
		if serr := decodeJSON(bytes.NewReader(raw), limit, &v); serr != nil {
			return sendBody{}, serr
		}
		return sendBody{}, err
	}
	if !dialect.Is(obj) {
		return sendBody{}, err
	}
	if task, err := dialect.MapTask(raw); task != nil || err != nil {
		return sendBody{task: task}, err
	}
	if appr, err := dialect.MapApproval(raw, registered); appr != nil || err != nil {
		return sendBody{approval: appr}, err
	}
	// A seed's message names no channel as often as not (002, 004): it
	// goes where a client that names none sends, api.DefaultChannel.
	dm, err := dialect.Map(raw, dialect.Place{}, dialect.Options{Fallback: api.DefaultChannel})
	if err != nil {
		return sendBody{}, err
	}
	return sendBody{msg: *dm}, nil
}

// decodeBody reads one JSON object of at most limit bytes into v, refusing
// unknown fields and trailing data.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	return decodeJSON(http.MaxBytesReader(w, r.Body, limit), limit, v)
}

// decodeJSON reads one JSON object from rd (a body capped at limit bytes)
// into v, refusing unknown fields and trailing data; the error is the
// API's answer.
func decodeJSON(rd io.Reader, limit int64, v any) error {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Only white space may follow the object. (dec.More alone misses a
		// stray '}' or ']' and a read error past the limit.)
		var extra json.RawMessage
		switch rerr := dec.Decode(&extra); {
		case rerr == io.EOF:
		case errors.As(rerr, new(*http.MaxBytesError)):
			err = rerr
		default:
			err = errors.New("trailing data after the JSON object")
		}
	}
	if err == nil {
		return nil
	}
	return bodyError(err, limit)
}

// bodyError is the API's answer to err, met reading or decoding a body
// capped at limit bytes.
func bodyError(err error, limit int64) error {
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		return &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body over the limit of %d bytes (--max-message-bytes)", limit)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &api.APIError{Status: http.StatusBadRequest, Code: api.CodeUnknownField,
			Message: strings.TrimPrefix(err.Error(), "json: ")}
	case errors.Is(err, io.EOF):
		return &api.APIError{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Message: "empty body: want a JSON object"}
	case errors.As(err, new(*stalledError)):
		return &api.APIError{Status: http.StatusRequestTimeout, Code: api.CodeBadRequest, Message: err.Error()}
	default:
		return &api.APIError{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Message: "malformed JSON: " + err.Error()}
	}
}

// checkHostPort returns why addr is not an address a peer can dial
// (host:port with a host that is not a wildcard and a port 1..65535), or
// "" if it is one.
func checkHostPort(addr string) string {
	if err := hostport.Check(addr, hostport.Dial); err != nil {
		return err.Error()
	}
	return ""
}

func consistency(r *http.Request) (api.Consistency, error) {
	switch c := api.Consistency(r.URL.Query().Get("consistency")); c {
	case "", api.Local:
		return api.Local, nil
	case api.Strong:
		return api.Strong, nil
	default:
		return "", fmt.Errorf("%w: consistency: %q is not local or strong", api.ErrBadRequest, c)
	}
}

func uintParam(s, name string, def, maxV uint64) (uint64, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > maxV {
		return 0, fmt.Errorf("%w: %s: %q is not a whole number from 0 to %d", api.ErrBadRequest, name, s, maxV)
	}
	return v, nil
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiErr := api.ToAPIError(err)
	recordCode(r, apiErr.Code)
	// A 503 from /readyz is an answer pollers expect while a node starts.
	if apiErr.Status >= 500 && r.URL.Path != "/readyz" && !errors.Is(r.Context().Err(), context.Canceled) {
		s.opts.Logger.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", apiErr.Status, "error", err)
	}
	if apiErr.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(retrySeconds(apiErr.RetryAfter), 10))
	}
	writeJSON(w, apiErr.Status, api.ErrorBody{Error: apiErr})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeRawJSON answers 200 with res, JSON as the state machine encoded it.
func writeRawJSON(w http.ResponseWriter, res json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res)
}

func (s *Server) readIndex(w http.ResponseWriter, r *http.Request) {
	idx, err := s.prop.ReadIndex(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ReadIndexResponse{Index: idx})
}

// propose commits op with body (commit: the free-text checks and the
// secret guard, then the proposal) and answers with the state machine's result.
func (s *Server) propose(w http.ResponseWriter, r *http.Request, op api.Op, body any) {
	res, err := s.commit(r, op, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeRawJSON(w, res)
}

// proposeResult commits a command whose state machine result is a T
// (api.ApprovalResult, ...) and decodes it; ok checks that it is one (an
// id set). false means it has answered with the error.
func proposeResult[T any](s *Server, w http.ResponseWriter, r *http.Request, op api.Op, body any, ok func(T) bool) (T, bool) {
	var res T
	raw, err := s.commit(r, op, body)
	if err != nil {
		s.writeError(w, r, err)
		return res, false
	}
	if err := json.Unmarshal(raw, &res); err != nil || !ok(res) {
		s.writeError(w, r, fmt.Errorf("transport: unexpected %s result %.200s (%v)", op, raw, err))
		return res, false
	}
	return res, true
}

// query answers a read at the request's ?consistency= from the node's
// state: fn runs after Linearize.
func (s *Server) query(w http.ResponseWriter, r *http.Request, fn func(Reader) (any, error)) {
	c, err := consistency(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.prop.Linearize(r.Context(), c); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := fn(s.state)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) { return st.Config() })
}

// setConfig changes one cluster setting: body {"key","value"}.
func (s *Server) setConfig(w http.ResponseWriter, r *http.Request) {
	var cmd api.SetConfigCommand
	if err := decodeBody(w, r, maxControlBytes, &cmd); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpSetConfig, cmd)
}
