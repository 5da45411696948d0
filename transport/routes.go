package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// A request's one pass through the server: ServeHTTP refuses what no route
// may see (a node-to-node request over TLS without a node certificate, a
// path that is not canonical), and the mux matches the route once. The
// route's pass (below) then resolves who calls into the request's context
// (caller: the bearer token's identity, whether a node forwarded it),
// authorizes it by the route's rule, caps the body at the route's ceiling,
// and runs the handler. The route's per-agent limit is charged by the
// handler through admit as soon as it knows the agent, which the body may
// name, and only after the input is valid, so a refused request costs no
// token.

// route is one endpoint of the API with everything the server does before
// its handler: who may call it (rule, auth.go), the most body it may send
// (body; zero: maxControlBytes) and the per-agent limit it draws on (limit,
// limits.go).
type route struct {
	pattern string // as http.ServeMux takes it: "METHOD /path/{param}"
	rule    routeRule
	body    bodyCap
	limit   limitKind
	handle  http.HandlerFunc
}

// routes is the API, one line an endpoint. A route's rule must be set: a
// route without one is admin only (it fails closed), and
// TestEveryRouteHasARule fails until it is classified. Reads of shared
// state (channels, threads, agents, the bulletin, locks, status, audit)
// need any valid token; private messages in them are filtered per reader
// by the handlers (visibility.go).
func (s *Server) routes() []route {
	var (
		messageBody  = bodyCap{s.opts.MaxMessageBytes, " (--max-message-bytes)"}
		entryBody    = bodyCap{forwardLimit(s.opts.MaxMessageBytes), " (a forwarded write: 8 × --max-message-bytes, at least 2 MiB)"}
		batchBody    = bodyCap{batchLimit(s.opts.MaxMessageBytes), " (forwarded writes: one entry's ceiling, 8 × --max-message-bytes and at least 2 MiB, and its length prefix)"}
		rulesBody    = bodyCap{rules.MaxBytes, fmt.Sprintf(" (a rules document is at most %d bytes, 256 KiB)", rules.MaxBytes)}
		bulletinBody = bodyCap{maxBulletinBody, fmt.Sprintf(" (the bulletin is capped at %d bytes)", api.MaxBulletinBytes)}
		lockBody     = bodyCap{maxLockBody, fmt.Sprintf(" (a lock path is at most %d bytes)", api.MaxLockPathLen)}
		renewalsBody = bodyCap{maxRenewalsBody, fmt.Sprintf(" (at most %d lease renewals)", api.MaxLeaseRenewals)}
		presenceBody = bodyCap{maxPresenceBytes, ""}
		taskBody     = bodyCap{maxTaskBody, taskBodyWhy}
		approvalBody = bodyCap{maxApprovalBody, approvalBodyWhy}
		artifactBody = bodyCap{s.maxArtifactBytes(), " (--max-artifact-bytes)"}
	)
	return []route{
		{pattern: "GET /healthz", rule: rulePublic, handle: s.healthz},
		{pattern: "GET /readyz", rule: rulePublic, handle: s.readyz},
		// The API's own description (openapi.go): public, like the probes,
		// so a client can learn the API (and that it needs a token) first.
		{pattern: "GET /v1/openapi.json", rule: rulePublic, handle: s.openAPI},
		{pattern: "/", rule: ruleAny, handle: s.notFound},
		// The probes' paths are public whatever the method: another method
		// is the JSON 404 without a token.
		{pattern: "/healthz", rule: rulePublic, handle: s.notFound},
		{pattern: "/readyz", rule: rulePublic, handle: s.notFound},
		// A browser asks every host it visits for its icon: a public 404,
		// neither a 401 nor a DENIED audit line.
		{pattern: "/favicon.ico", rule: rulePublic, handle: s.notFound},
		// The node's metrics in Prometheus's text format (metrics.go);
		// maosd's --metrics-addr serves them without auth.
		{pattern: "GET /metrics", rule: ruleAdmin, handle: s.serveMetrics},

		// Messages and channels (server.go, server_mailbox.go, stream.go).
		{pattern: "POST /v1/messages", rule: ruleAny, body: messageBody, limit: limitSend, handle: s.send}, // from: admit
		{pattern: "GET /v1/messages/{id}", rule: ruleAny, handle: s.getMessage},
		{pattern: "GET /v1/messages/{id}/receipts", rule: ruleAny, handle: s.receipts},
		{pattern: "GET /v1/channels", rule: ruleAny, handle: s.channels},
		{pattern: "GET /v1/channels/{channel}/messages", rule: ruleAny, handle: s.channelMessages},
		{pattern: "GET /v1/threads/{id}", rule: ruleAny, handle: s.thread},
		{pattern: "GET /v1/stream", rule: reader("?agent"), limit: limitStream, handle: s.stream},

		// Tasks (server_tasks.go); the stream carries their events.
		{pattern: "POST /v1/tasks", rule: ruleAny, body: taskBody, limit: limitSend, handle: write(s, taskCreate)}, // from: admit
		{pattern: "GET /v1/tasks", rule: ruleAny, handle: s.listTasks},
		{pattern: "GET /v1/tasks/{id}", rule: ruleAny, handle: s.getTask},
		{pattern: "POST /v1/tasks/{id}/claim", rule: ruleAny, body: taskBody, handle: write(s, taskClaim)},                         // agent: admit
		{pattern: "POST /v1/tasks/{id}/progress", rule: ruleAny, body: taskBody, handle: write(s, taskProgress)},                   // agent: admit
		{pattern: "POST /v1/tasks/{id}/complete", rule: ruleAny, body: taskBody, limit: limitSend, handle: write(s, taskComplete)}, // agent: admit
		{pattern: "POST /v1/tasks/{id}/handoff", rule: ruleAny, body: taskBody, limit: limitSend, handle: write(s, taskHandoff)},   // agent: admit
		{pattern: "POST /v1/tasks/{id}/cancel", rule: ruleAny, body: taskBody, handle: write(s, taskCancel)},                       // from: admit

		// A2A push notifications (server_push.go): a task's configs, set and
		// deleted by its creator (or an admin), read without credentials;
		// the deliverer's reads and cursor, admin only.
		{pattern: "POST /v1/tasks/{id}/push", rule: ruleAny, handle: write(s, pushConfigSet)}, // from: admit
		{pattern: "GET /v1/tasks/{id}/push", rule: ruleAny, handle: s.listPushConfigs},
		{pattern: "DELETE /v1/tasks/{id}/push/{config}", rule: actor("?from"), handle: s.deletePushConfig},
		{pattern: "GET /v1/push/tasks/{id}", rule: ruleAdmin, handle: s.pushConfigsWithCredentials}, // the credentials: the deliverer's read
		{pattern: "GET /v1/push/cursor", rule: ruleAdmin, handle: s.getPushCursor},
		{pattern: "PUT /v1/push/cursor", rule: ruleAdmin, handle: write(s, pushCursorSet)},

		// Approvals (server_approvals.go); the stream carries their events.
		{pattern: "POST /v1/approvals", rule: ruleAny, body: approvalBody, limit: limitSend, handle: write(s, approvalRequest)}, // from: admit
		{pattern: "GET /v1/approvals", rule: ruleAny, handle: s.listApprovals},
		{pattern: "GET /v1/approvals/{id}", rule: ruleAny, handle: s.getApproval},
		{pattern: "POST /v1/approvals/{id}/decide", rule: ruleAny, body: approvalBody, limit: limitSend, handle: write(s, approvalDecide)}, // approver: admit
		{pattern: "POST /v1/approvals/{id}/cancel", rule: ruleAny, handle: write(s, approvalCancel)},                                       // from: admit

		// Artifacts (server_artifacts.go): the bytes through Blobs, the
		// records through the log. PUT acts as ?from= (default: the
		// token's agent); a peer's push and fetch are between nodes.
		{pattern: "PUT /v1/artifacts", rule: actor("?from"), body: artifactBody, limit: limitSend, handle: s.putArtifact},
		{pattern: "GET /v1/artifacts", rule: ruleAny, handle: s.listArtifacts},
		{pattern: "GET /v1/artifacts/{id}", rule: ruleAny, handle: s.getArtifact}, // and HEAD
		{pattern: "GET /v1/artifacts/{id}/info", rule: ruleAny, handle: s.artifactInfo},
		{pattern: "DELETE /v1/artifacts/{id}", rule: ruleAdmin, handle: s.deleteArtifact},

		// Agents, inboxes and cursors (server_mailbox.go, server_interrupt.go,
		// server_policy.go).
		{pattern: "POST /v1/agents", rule: ruleAny, handle: write(s, agentRegister)}, // id: admit
		{pattern: "GET /v1/agents", rule: ruleAny, handle: s.listAgents},
		{pattern: "GET /v1/roles", rule: ruleAny, handle: s.roles},
		{pattern: "GET /v1/agents/{id}", rule: ruleAny, handle: s.getAgent},
		{pattern: "GET /v1/agents/{id}/a2a", rule: ruleAdmin, handle: s.getAgentA2A}, // the credential: the relay's read
		{pattern: "DELETE /v1/agents/{id}", rule: actor("id"), handle: s.unregisterAgent},
		{pattern: "GET /v1/agents/{id}/inbox", rule: reader("id"), handle: s.inbox},
		{pattern: "GET /v1/agents/{id}/inbox/counts", rule: reader("id"), handle: s.inboxCounts},
		{pattern: "GET /v1/agents/{id}/summary", rule: reader("id"), handle: s.agentSummary},
		{pattern: "POST /v1/agents/{id}/read", rule: actor("id"), handle: s.markRead},
		{pattern: "PUT /v1/agents/{id}/receipts/{msg}", rule: actor("id"), handle: s.receiptState},
		{pattern: "GET /v1/agents/{id}/cursor", rule: reader("id"), handle: s.cursor},
		{pattern: "PUT /v1/agents/{id}/cursor", rule: actor("id"), handle: write(s, cursorSet)},
		{pattern: "POST /v1/agents/{id}/interrupt", rule: ruleAny, limit: limitSend, handle: s.interruptAgent}, // from: admit
		{pattern: "GET /v1/agents/{id}/policy", rule: ruleAny, handle: s.getPolicy},
		{pattern: "PUT /v1/agents/{id}/policy", rule: actor("id"), handle: s.putPolicy},
		{pattern: "DELETE /v1/agents/{id}/policy", rule: actor("id"), handle: s.deletePolicy},

		// Agent leases: which watcher serves an agent (server_agent_lease.go).
		{pattern: "POST /v1/agents/{id}/lease", rule: actor("id"), handle: write(s, agentLeaseAcquire)},
		{pattern: "POST /v1/agents/{id}/lease/renew", rule: actor("id"), handle: write(s, agentLeaseRenew)},
		{pattern: "POST /v1/agents/{id}/lease/release", rule: actor("id"), handle: write(s, agentLeaseRelease)},
		{pattern: "GET /v1/agents/{id}/lease", rule: ruleAny, handle: s.getAgentLease},
		{pattern: "GET /v1/leases", rule: ruleAny, handle: s.listAgentLeases},
		{pattern: "POST /v1/leases/renew", rule: ruleAny, body: renewalsBody, handle: write(s, agentLeaseRenewMany)}, // each agent: authorize

		// Presence and gossip members (server_presence.go).
		{pattern: "PUT /v1/presence/{agent}", rule: actor("agent"), body: presenceBody, handle: s.putPresence},
		{pattern: "GET /v1/presence", rule: ruleAny, handle: s.listPresence},
		{pattern: "GET /v1/presence/{agent}", rule: ruleAny, handle: s.getPresence},
		{pattern: "GET /v1/agents/{id}/health", rule: ruleAny, handle: s.agentHealth},
		{pattern: "GET /v1/cluster/members", rule: ruleAny, handle: s.members},

		// The bulletin and locks (server_coordination.go).
		{pattern: "GET /v1/bulletin", rule: ruleAny, handle: s.getBulletin},
		{pattern: "PUT /v1/bulletin", rule: actor("?by"), body: bulletinBody, handle: s.putBulletin},
		{pattern: "PATCH /v1/bulletin", rule: actor("?by"), body: bulletinBody, handle: s.patchBulletin},
		{pattern: "POST /v1/locks", rule: ruleAny, body: lockBody, handle: write(s, lockAcquire)},         // holder: admit
		{pattern: "POST /v1/locks/renew", rule: ruleAny, body: lockBody, handle: write(s, lockRenew)},     // holder: admit
		{pattern: "POST /v1/locks/release", rule: ruleAny, body: lockBody, handle: write(s, lockRelease)}, // holder or by: admit
		{pattern: "GET /v1/locks", rule: ruleAny, handle: s.listLocks},
		{pattern: "POST /v1/locks/check", rule: ruleAny, body: lockBody, handle: s.checkLock},

		// Rules, audit, overview (server_oversight.go).
		{pattern: "GET /v1/rules", rule: ruleAny, handle: s.rulesGet},
		{pattern: "PUT /v1/rules", rule: ruleAdmin, body: rulesBody, handle: s.rulesPut},
		{pattern: "DELETE /v1/rules", rule: ruleAdmin, handle: s.rulesDelete},
		{pattern: "POST /v1/rules/check", rule: ruleAny, handle: s.rulesCheck},
		{pattern: "GET /v1/audit", rule: ruleAny, handle: s.auditTrail},
		{pattern: "GET /v1/overview", rule: ruleAny, handle: s.overviewPage},

		// Retention (server_retention.go) and cluster settings.
		{pattern: "GET /v1/channels/{channel}/retention", rule: ruleAny, handle: s.getRetention},
		{pattern: "PUT /v1/channels/{channel}/retention", rule: ruleAdmin, handle: s.setRetention},
		{pattern: "POST /v1/channels/{channel}/trim", rule: ruleAdmin, handle: s.trimChannel},
		{pattern: "GET /v1/cluster/config", rule: ruleAny, handle: s.getConfig},
		{pattern: "PUT /v1/cluster/config", rule: ruleAdmin, handle: s.setConfig},

		// Tokens (server_tokens.go).
		{pattern: "GET /v1/whoami", rule: ruleAny, handle: s.whoami},
		{pattern: "POST /v1/tokens", rule: ruleAdmin, handle: s.createToken},
		{pattern: "GET /v1/tokens", rule: ruleAdmin, handle: s.listTokens},
		{pattern: "DELETE /v1/tokens/{id}", rule: ruleAdmin, handle: s.revokeToken},

		// The cluster (server.go) and what nodes ask of each other (entry.go):
		// rule node is a node's credential (followers forward joins,
		// removals and transfers they took) or an admin token.
		{pattern: "GET /v1/cluster/status", rule: ruleAny, handle: s.status},
		{pattern: "POST /v1/cluster/join", rule: ruleNode, handle: s.join},
		{pattern: "DELETE /v1/cluster/nodes/{id}", rule: ruleNode, handle: s.remove},
		{pattern: "POST /v1/cluster/snapshot", rule: ruleAdmin, handle: s.snapshot},
		{pattern: "POST /v1/cluster/transfer-leadership", rule: ruleNode, handle: s.transfer},
		{pattern: "GET /v1/internal/read-index", rule: ruleNode, handle: s.readIndex},
		{pattern: "POST /v1/internal/entry", rule: ruleNode, body: entryBody, handle: s.internalEntry},
		{pattern: "POST /v1/internal/entries", rule: ruleNode, body: batchBody, handle: s.internalEntries},
		{pattern: "PUT /v1/internal/blobs/{id}", rule: ruleNode, body: artifactBody, handle: s.receiveBlob},
		{pattern: "GET /v1/internal/blobs/{id}", rule: ruleNode, handle: s.localBlob},
	}
}

// register serves every route of the table on s.mux, each behind its pass.
func (s *Server) register(table []route) {
	s.mux = http.NewServeMux()
	s.byPattern = make(map[string]*route, len(table))
	for i := range table {
		rt := &table[i]
		if rt.body.limit == 0 {
			rt.body.limit = maxControlBytes
		}
		s.byPattern[rt.pattern] = rt
		h := s.pass(rt)
		if rt.pattern == sendPattern {
			h = s.countSends(h)
		}
		s.mux.Handle(rt.pattern, h)
	}
	s.table = table
}

// pass is what a request goes through once the mux matched its route:
// who calls, resolved once into its context; the route's rule (401, 403,
// each refusal audited); the route's body ceiling (413); the handler.
func (s *Server) pass(rt *route) http.Handler {
	next := capBody(rt.pattern, rt.body, s.opts.BodyStallTimeout, rt.handle)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before := callerFrom(r.Context()) // zero, or set by a handler wrapping the API (tests)
		c := before
		c.forwarded = c.forwarded || r.Header.Get(api.HeaderForwarded) != ""
		if s.auth != nil && rt.rule.access != accessPublic {
			id, ok := s.auth.authenticate(w, r)
			if !ok {
				return
			}
			c.id = id
			// A forwarded request skips checks and limits the first node
			// applied; only a node (its credential, or an admin token) may
			// claim to be one.
			if c.forwarded && !id.Internode() {
				s.auth.forbid(w, r, id, "carries "+api.HeaderForwarded+", which only nodes send: needs the node credential or an admin token")
				return
			}
			if need := rt.rule.check(r, id); need != "" {
				s.auth.forbid(w, r, id, need)
				return
			}
		}
		if c != before {
			r = r.WithContext(withCaller(r.Context(), c))
		}
		next.ServeHTTP(w, r)
	})
}

// admit is the rest of a request's pass, once its handler has read and
// checked the input and so knows the agent the request acts as, which the
// body names in field ("from", "holder", "id"): that agent must be the
// token's own, or any for an admin (403, audited); then the route's send
// limit is charged to it (429). false means it has answered. (A stream's
// slot, held while it runs, is admitStream's.)
func (s *Server) admit(w http.ResponseWriter, r *http.Request, field, agent string) bool {
	c := callerFrom(r.Context())
	if !s.mayActAs(w, r, c, field, agent) {
		return false
	}
	return s.routeOf(r).limit != limitSend || s.allowSend(w, r, c, agent)
}

// decodeRouteBody reads r's body into v as decodeBody does (one JSON
// object, unknown fields refused), capped at the route's ceiling, whose
// 413 says what the ceiling stands for.
func (s *Server) decodeRouteBody(w http.ResponseWriter, r *http.Request, v any) error {
	rt := s.routeOf(r)
	err := decodeBody(w, r, rt.body.limit, v)
	var apiErr *api.APIError
	if errors.As(err, &apiErr) && apiErr.Code == api.CodeTooLarge {
		apiErr.Message = fmt.Sprintf("request body over the limit of %d bytes for %s%s", rt.body.limit, rt.pattern, rt.body.why)
	}
	return err
}

// routeOf is the route the mux matched for r.
func (s *Server) routeOf(r *http.Request) *route { return s.byPattern[r.Pattern] }

// Route is one registered endpoint: its pattern, who may call it and the
// most body it reads.
type Route struct {
	// Pattern is as registered on http.ServeMux: "METHOD /path/{param}"
	// (or a path alone: the JSON 404 of paths no other route matches).
	Pattern string
	// Access is the route's rule with --auth: "public" (no token), "any"
	// (any valid token), "admin", "actor" (the agent AccessParam names is
	// the token's own, or any for an admin) or "reader" (the token's own
	// agent or a moderator). The OpenAPI document says the same in each
	// operation's x-maos-access.
	Access string
	// AccessParam is where an actor or reader rule finds the agent: a path
	// value ("id") or a query parameter ("?by"); "" for the others.
	AccessParam string
	// MaxBodyBytes is the body ceiling: a request declaring a longer body
	// is refused with 413 before its handler runs, and the handler cannot
	// read past it.
	MaxBodyBytes int64
}

// Routes lists the registered endpoints in the order of the table.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.table))
	for i, rt := range s.table {
		out[i] = Route{Pattern: rt.pattern, Access: rt.rule.access.String(), AccessParam: rt.rule.param, MaxBodyBytes: rt.body.limit}
	}
	return out
}

// bodyCap is a route's body ceiling and what it stands for.
type bodyCap struct {
	limit int64
	why   string // appended to the 413 message
}

// minForwardLimit is the least forwardLimit: 2 MiB.
const minForwardLimit = 2 << 20

// forwardLimit caps an encoded entry one node forwards to another: a
// message at maxMessageBytes as re-encoded by Go's JSON (which may write a
// 1-byte character as 6, "\u003c"), with room for the envelope; at least
// minForwardLimit.
func forwardLimit(maxMessageBytes int64) int64 { return max(minForwardLimit, 8*maxMessageBytes) }

// batchLimit caps a batch of forwarded entries: one entry at forwardLimit
// with its length prefix. A follower's batcher keeps a batch of several
// entries under a smaller bound of its own (cluster's maxBatchBytes, below
// minForwardLimit), so the largest entry still goes, alone.
func batchLimit(maxMessageBytes int64) int64 {
	return forwardLimit(maxMessageBytes) + binary.MaxVarintLen64
}

// capBody refuses a declared body over the ceiling with 413 and caps an
// undeclared (chunked) one; a handler that reads past the cap gets an
// *http.MaxBytesError, which decodeBody turns into 413. A handler that
// never reads its body leaves it unread, and net/http closes the
// connection rather than drain much of it.
func capBody(pattern string, c bodyCap, stall time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > c.limit {
			writeJSON(w, http.StatusRequestEntityTooLarge, api.ErrorBody{Error: &api.APIError{Code: api.CodeTooLarge,
				Message: fmt.Sprintf("request body of %d bytes over the limit of %d bytes for %s%s", r.ContentLength, c.limit, pattern, c.why)}})
			return
		}
		guardBody(w, r, stall)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, c.limit)
		}
		h.ServeHTTP(w, r)
	})
}

// notFound is the JSON 404 of every path no other route matches.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &api.APIError{Status: http.StatusNotFound, Code: api.CodeNotFound,
		Message: fmt.Sprintf("no endpoint %s %s; see docs/API.md and GET /v1/openapi.json", r.Method, r.URL.Path)})
}
