package transport

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// Authentication and authorization (maosd --auth).
//
// Every request but GET /healthz and /readyz carries Authorization:
// Bearer <secret>. The secret is either this node's admin bootstrap token
// (AuthConfig.AdminToken) or one whose SHA-256 the replicated state holds
// (fsm.TokenByHash, read on this node's own state on every request: no
// cache, so a revoke is refused here as soon as this node applies it).
// Anything else is 401. The request then carries an Identity
// (IdentityFrom), and its route's rule (routes.go) decides what it may do:
// 403 otherwise. Handlers check the agent a body names (a message's
// "from", a lock's holder) with admit. Every refusal of a presented token
// is proposed to the audit trail (api.OpAuditDenial), folded and
// rate-bounded by the server's denialCoalescer (Server.deny), which other
// refusals worth a trace (a send holding a secret) share.

// crossOrigin is the CSRF check of cookie-authenticated writes.
var crossOrigin = http.NewCrossOriginProtection()

// cookieCSRF returns "" when r, authenticated by the console's cookie, may
// go on: a safe method, or a same-origin write carrying HeaderCSRF; else
// why it is refused.
func cookieCSRF(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ""
	}
	if err := crossOrigin.Check(r); err != nil {
		return fmt.Sprintf("%s %s authenticated by the console's session cookie comes from another site (%v): refused", r.Method, r.URL.Path, err)
	}
	if r.Header.Get(api.HeaderCSRF) == "" {
		return fmt.Sprintf("%s %s authenticated by the console's session cookie needs the %s header (the console sends it)", r.Method, r.URL.Path, api.HeaderCSRF)
	}
	return ""
}

// AuthConfig turns authentication on: ServerOptions.Auth.
type AuthConfig struct {
	// AdminToken is the admin bootstrap secret (maosd --admin-token-file):
	// it authenticates as Identity{Role: RoleAdmin, TokenID: "bootstrap"}
	// on this node, and NodeCredential of it as a node (what nodes present
	// to each other). "" means none: only replicated tokens authenticate.
	AdminToken string
}

// Token secret limits.
const (
	// MaxTokenLen bounds a bearer secret, in bytes.
	MaxTokenLen = 512
	// MinAdminTokenLen is the shortest admin bootstrap token accepted.
	MinAdminTokenLen = 16
)

// Validate checks the admin token: "" or MinAdminTokenLen..MaxTokenLen
// bytes of RFC 6750 token characters (A-Z a-z 0-9 - . _ ~ + / and
// trailing =), which is what a client can send in the header.
func (c *AuthConfig) Validate() error {
	t := c.AdminToken
	switch {
	case t == "":
		return nil
	case len(t) < MinAdminTokenLen || len(t) > MaxTokenLen:
		return &api.FieldError{Field: "admin_token", Reason: fmt.Sprintf("%d bytes, want %d..%d", len(t), MinAdminTokenLen, MaxTokenLen)}
	case !isToken68(t):
		return &api.FieldError{Field: "admin_token", Reason: "has characters a bearer token cannot carry; use A-Z a-z 0-9 - . _ ~ + / (e.g. openssl rand -hex 32)"}
	}
	return nil
}

// NodeCredential is the bearer secret nodes present to each other's APIs
// (forwarded writes and strong reads, join, blob copies, the interrupt
// relay), derived from the cluster's admin bootstrap token (which every
// node holds, --admin-token-file): "node-" and the hex HMAC-SHA256 of a
// fixed label keyed with it. It authenticates as Identity{Role: RoleNode},
// which passes only the routes a node needs (rule "node": /v1/internal/*,
// join, remove, transfer-leadership) and acts for the agents a request
// it forwards names, but never an admin route (tokens, rules, config,
// metrics, snapshots): a node never sends the admin token itself. ""
// for "" (no auth).
func NodeCredential(adminToken string) string {
	if adminToken == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte("maos node credential v1"))
	return "node-" + hex.EncodeToString(m.Sum(nil))
}

// authState is a server's authentication state; nil when auth is off.
type authState struct {
	s        *Server
	admin    [sha256.Size]byte // SHA-256 of the admin token
	node     [sha256.Size]byte // SHA-256 of NodeCredential(admin token)
	hasAdmin bool
}

// newAuthState builds the auth state for s.
func newAuthState(s *Server, cfg *AuthConfig) *authState {
	a := &authState{s: s}
	if cfg.AdminToken != "" {
		a.admin, a.hasAdmin = sha256.Sum256([]byte(cfg.AdminToken)), true
		a.node = sha256.Sum256([]byte(NodeCredential(cfg.AdminToken)))
	}
	return a
}

// authenticate returns the identity of r's bearer token, or answers 401
// (auditing a presented but bad token) and returns false.
func (a *authState) authenticate(w http.ResponseWriter, r *http.Request) (*Identity, bool) {
	values := r.Header.Values("Authorization")
	fromSession := false
	if len(values) == 0 {
		if v, present, ok := a.s.sessionSecret(r); present {
			// The web console's session stands for the header; a write it
			// authenticates must come from the console's own pages.
			if !ok {
				a.unauthorized(w, r, "the console session is unknown or expired (a session lives on the node that opened it, for "+SessionTTL.String()+"): log in again", false)
				return nil, false
			}
			if problem := cookieCSRF(r); problem != "" {
				a.s.writeError(w, r, &api.APIError{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: problem})
				a.s.deny(r, denial{who: "cookie", reason: "cross-site request refused"})
				return nil, false
			}
			values, fromSession = []string{"Bearer " + v}, true
		}
	}
	if len(values) == 0 {
		a.unauthorized(w, r, "missing bearer token: send Authorization: Bearer <token>", false)
		// Folded like the others: a scanner's many requests are one line
		// with a count.
		a.s.deny(r, denial{who: "anonymous", reason: "missing bearer token"})
		return nil, false
	}
	secret, problem := parseBearer(values)
	if problem != "" {
		a.unauthorized(w, r, problem, false)
		a.s.deny(r, denial{who: "malformed", reason: problem})
		return nil, false
	}
	sum := sha256.Sum256([]byte(secret))
	if a.hasAdmin && subtle.ConstantTimeCompare(sum[:], a.admin[:]) == 1 {
		return &Identity{Role: api.RoleAdmin, TokenID: api.BootstrapTokenID}, true
	}
	if a.hasAdmin && subtle.ConstantTimeCompare(sum[:], a.node[:]) == 1 {
		return &Identity{Role: api.RoleNode, TokenID: NodeTokenID}, true
	}
	hash := fsm.HashToken(secret)
	tok, err := a.s.state.TokenByHash(hash)
	var revoked *fsm.RevokedTokenError
	switch {
	case errors.As(err, &revoked):
		if fromSession {
			a.s.endSessionsOf(secret)
		}
		a.unauthorized(w, r, "the bearer token was revoked", true)
		a.s.deny(r, denial{who: revoked.Token.ID, agent: revoked.Token.Agent, tokenID: revoked.Token.ID, reason: "revoked token"})
		return nil, false
	case errors.Is(err, api.ErrNotFound):
		a.unauthorized(w, r, "unknown bearer token (a token created through another node a moment ago may not have reached this one yet: retry in a few ms)", true)
		// The hash prefix tells repeated tries of one secret apart from
		// many secrets, without anything usable about the secret.
		a.s.deny(r, denial{who: "sha256:" + hash[:12], reason: "unknown token (sha256 " + hash[:12] + "…)"})
		return nil, false
	case err != nil:
		a.s.writeError(w, r, fmt.Errorf("authenticate: %w", err))
		return nil, false
	}
	return &Identity{Agent: tok.Agent, Role: api.Role(tok.Role), TokenID: tok.ID, AgentRole: tok.AgentRole, Capabilities: tok.Capabilities}, true
}

// unauthorized answers 401 with WWW-Authenticate (RFC 6750 §3).
func (a *authState) unauthorized(w http.ResponseWriter, r *http.Request, msg string, invalid bool) {
	v := `Bearer realm="maos"`
	if invalid {
		v += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", v)
	a.s.writeError(w, r, &api.APIError{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: msg})
}

// parseBearer returns the secret of an Authorization header, or why the
// header is not one usable bearer credential.
func parseBearer(values []string) (secret, problem string) {
	if len(values) != 1 {
		return "", fmt.Sprintf("%d Authorization headers: send one", len(values))
	}
	scheme, cred, ok := strings.Cut(strings.Trim(values[0], " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", `the Authorization header is not "Bearer <token>"`
	}
	cred = strings.Trim(cred, " \t")
	switch {
	case cred == "":
		return "", "empty bearer token"
	case len(cred) > MaxTokenLen:
		return "", fmt.Sprintf("bearer token of %d bytes, at most %d", len(cred), MaxTokenLen)
	case !isToken68(cred):
		return "", "the bearer token has characters outside A-Z a-z 0-9 - . _ ~ + / ="
	}
	return cred, ""
}

// isToken68 reports whether s is an RFC 6750 b64token: token characters,
// then only '=' padding.
func isToken68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// access is what a route asks of the identity. The zero value is a route
// nobody classified: it is admin only (it fails closed), and
// TestEveryRouteHasARule fails until it is classified.
type access int

const (
	accessUnclassified access = iota // as accessAdmin
	accessAdmin                      // an admin token
	accessAny                        // any valid token; the handler checks the agents a body names (admit)
	accessActor                      // the agent param names is the token's own; admins act as anyone
	accessReader                     // the agent param names is the token's own, or the token moderates
	accessPublic                     // no token
	accessNode                       // a node (NodeCredential) or an admin token
)

// String is the access's name in Route.Access and the OpenAPI document's
// x-maos-access.
func (a access) String() string {
	switch a {
	case accessAdmin, accessUnclassified:
		return "admin"
	case accessAny:
		return "any"
	case accessActor:
		return "actor"
	case accessReader:
		return "reader"
	case accessPublic:
		return "public"
	case accessNode:
		return "node"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// routeRule is a route's access and, for actor and reader, where the
// agent is named: a path value ("id") or a query parameter ("?agent"). A
// query parameter left out names nobody and asks nothing.
type routeRule struct {
	access access
	param  string
}

var (
	ruleAny    = routeRule{access: accessAny}
	ruleAdmin  = routeRule{access: accessAdmin}
	ruleNode   = routeRule{access: accessNode}
	rulePublic = routeRule{access: accessPublic}
)

// actor is the rule of a route that acts as the agent param names: a path
// value ("id") or a query parameter ("?by").
func actor(param string) routeRule { return routeRule{access: accessActor, param: param} }

// reader is the rule of a route that reads what the agent param names
// keeps to itself (an inbox, a cursor): its own token or a moderator's.
func reader(param string) routeRule { return routeRule{access: accessReader, param: param} }

// agent is the agent the rule's param names in r ("" for none).
func (rule routeRule) agent(r *http.Request) string {
	if q, ok := strings.CutPrefix(rule.param, "?"); ok {
		return r.URL.Query().Get(q)
	}
	return r.PathValue(rule.param)
}

// check returns "" when id may call the route, else what it would need.
func (rule routeRule) check(r *http.Request, id *Identity) string {
	switch rule.access {
	case accessPublic, accessAny:
		return ""
	case accessAdmin, accessUnclassified:
		if id.IsAdmin() {
			return ""
		}
		return "needs an admin token"
	case accessNode:
		if id.Internode() {
			return ""
		}
		return "is a node-to-node request: needs the node credential or an admin token"
	}
	agent := rule.agent(r)
	switch {
	case agent == "" || id.ActsAs(agent):
		return ""
	case rule.access == accessReader && id.Moderates():
		return ""
	case rule.access == accessReader:
		return fmt.Sprintf("reads agent %s's inbox: needs that agent's token or a moderator's", clip(agent, api.MaxIDLen))
	default:
		return fmt.Sprintf("acts as agent %s: needs that agent's token or an admin's", clip(agent, api.MaxIDLen))
	}
}

// mayActAs reports whether the request of caller c may act as agent, which
// the body names in field (a message's "from", a lock's "holder"): the
// token's own agent or its forks, or any agent for an admin
// (Identity.ActsAs). If not it answers 403,
// audits the denial and returns false. Without auth it is always true.
func (s *Server) mayActAs(w http.ResponseWriter, r *http.Request, c caller, field, agent string) bool {
	id := c.id
	if s.auth == nil || id.ActsAs(agent) {
		return true
	}
	s.auth.forbid(w, r, id, fmt.Sprintf("%s %q is not this token's agent: a token acts only for its own agent", field, clip(agent, api.MaxIDLen)))
	return false
}

// mayRegister is the one decision of who grants a registry role and
// capabilities (POST /v1/agents): an admin registers any agent with any;
// anyone else registers only an agent it acts as (the token's own or its
// forks, checked by admit), with the default role or the role its token's
// grant names (api.Token.AgentRole), and capabilities its grant lists. A
// role omitted in the request is the grant's. Without auth (id nil) every
// registration passes. An A2A remote (cmd.A2A) is an admin's to
// register. It returns "" when cmd may be proposed, else what it
// would need, for a 403.
func mayRegister(id *Identity, cmd *api.RegisterAgentCommand) string {
	if cmd.Role == "" && id != nil && id.AgentRole != "" {
		cmd.Role = id.AgentRole
	}
	if id == nil || id.IsAdmin() {
		return ""
	}
	if cmd.A2A != nil {
		return fmt.Sprintf("registers agent %s as a remote A2A agent (a2a): the nodes then call its URL with its credential, "+
			"so only an admin token may (maosctl agents register --a2a with an admin token)", clip(cmd.ID, api.MaxIDLen))
	}
	role := cmd.Role
	if role == "" {
		role = api.DefaultRole
	}
	if role != api.DefaultRole && role != id.AgentRole {
		granted := "grants no role"
		if id.AgentRole != "" {
			granted = "grants role " + id.AgentRole
		}
		return fmt.Sprintf("registers agent %s with role %q, which this token %s: a role is granted by an admin "+
			"(register the agent with an admin token, or create its token with --agent-role %s)", clip(cmd.ID, api.MaxIDLen), clip(role, api.MaxIDLen), granted, clip(role, api.MaxIDLen))
	}
	for _, c := range cmd.Capabilities {
		if !slices.Contains(id.Capabilities, c) {
			return fmt.Sprintf("registers agent %s with capability %q, which this token does not grant: capabilities are granted by an admin "+
				"(register the agent with an admin token, or create its token with --capability %s)", clip(cmd.ID, api.MaxIDLen), clip(c, api.MaxIDLen), clip(c, api.MaxIDLen))
		}
	}
	return ""
}

// mayOverride is the one decision of who may act on what another agent
// holds (force-release its lock): a moderator or an admin. Without auth
// (id nil) anyone may. It returns "" when id may do what, else what it
// would need, for a 403.
func mayOverride(id *Identity, what string) string {
	if id == nil || id.Moderates() {
		return ""
	}
	return what + ": needs a moderator's or an admin's token (maosctl token create --role moderator)"
}

// author is the author a write names: named (a ?by= or body field, which
// the route's rule or admit holds to the token), else the token's agent;
// "" when neither names one (the admin bootstrap token, or no --auth).
func author(id *Identity, named string) string {
	if named != "" || id == nil {
		return named
	}
	return id.Agent
}

// forbid answers 403 saying what was needed, and audits it.
func (a *authState) forbid(w http.ResponseWriter, r *http.Request, id *Identity, need string) {
	if id == nil {
		// Only an unauthenticated request has none, and a route's pass
		// lets none through but to a public route; refuse rather than
		// guess.
		a.unauthorized(w, r, "missing bearer token: send Authorization: Bearer <token>", false)
		return
	}
	whose := "the admin bootstrap token"
	switch {
	case id.Role == api.RoleNode:
		whose = "the node credential"
	case id.TokenID != api.BootstrapTokenID:
		whose = fmt.Sprintf("token %s of agent %s, role %s", id.TokenID, id.Agent, id.Role)
	}
	a.s.writeError(w, r, &api.APIError{Status: http.StatusForbidden, Code: api.CodeForbidden,
		Message: fmt.Sprintf("%s %s %s; the request carries %s", r.Method, r.URL.Path, need, whose)})
	a.s.deny(r, denial{who: id.TokenID, agent: id.Agent, tokenID: id.TokenID, reason: need})
}

// denial is one refused request before it is folded.
type denial struct {
	who            string // the coalescing key with reason: a token id, a hash prefix, "malformed"
	agent, tokenID string
	reason         string
}

// deny queues the denial for the audit trail (a DENIED line, folded and
// paced by the denial coalescer); it never blocks the request.
func (s *Server) deny(r *http.Request, d denial) {
	cmd := api.AuditDenialCommand{
		Agent:   clip(d.agent, api.MaxDenialIDLen),
		TokenID: clip(d.tokenID, api.MaxDenialIDLen),
		Method:  clip(r.Method, api.MaxDenialMethodLen),
		Path:    clip(r.URL.Path, api.MaxDenialPathLen),
		Reason:  clip(d.reason, api.MaxDenialReasonLen),
		Count:   1,
	}
	if s.denials.add(denialKey{who: d.who, reason: cmd.Reason}, cmd) {
		go s.drainDenials()
	}
}

// denialApplyTimeout bounds one proposal of a denial line.
const denialApplyTimeout = 10 * time.Second

// drainDenials proposes queued denials as the budget allows, until none
// is left.
func (s *Server) drainDenials() {
	for {
		cmd, wait := s.denials.next(time.Now())
		if cmd == nil && wait == 0 {
			return
		}
		if cmd == nil {
			t := time.NewTimer(wait)
			<-t.C
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), denialApplyTimeout)
		cmd.Node = s.nodeID(ctx)
		if _, err := s.prop.Apply(ctx, api.OpAuditDenial, cmd); err != nil {
			s.opts.Logger.Warn("could not audit a refused request", "reason", cmd.Reason, "count", cmd.Count, "error", err)
		}
		cancel()
	}
}

// nodeID is this node's id, asked of the node's Membership once it answers.
func (s *Server) nodeID(ctx context.Context) string {
	s.nodeMu.Lock()
	defer s.nodeMu.Unlock()
	if s.node == "" {
		if st, err := s.cluster.Status(ctx); err == nil {
			s.node = clip(st.NodeID, api.MaxDenialIDLen)
		}
	}
	return s.node
}

// clip makes s valid UTF-8 of at most n bytes, cut on a rune boundary.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Denial audit budget: at most denialRate lines a second from one node
// (denialBurst at once), at most denialMaxKeys distinct (who, reason)
// pairs waiting; more pairs fold into one overflow line.
const (
	denialRate    = 10.0
	denialBurst   = 10.0
	denialMaxKeys = 1024
)

// denialKey is what folds denials into one line: who and why.
type denialKey struct{ who, reason string }

// overflowKey collects the denials that found the queue full.
var overflowKey = denialKey{who: "*", reason: "more refused requests than the audit queue holds (other tokens or reasons)"}

// denialCoalescer folds refused requests into audit lines and paces them:
// a token bucket of rate lines per second (burst at once) decides when the
// next line may be proposed; until then every denial with the same key
// adds to the waiting line's Count. So an attacker hammering the API adds
// at most rate lines a second to the log, and every refused request is
// still counted in one of them.
type denialCoalescer struct {
	rate, burst float64
	maxKeys     int

	mu      sync.Mutex
	pending map[denialKey]*api.AuditDenialCommand
	order   []denialKey // pending keys, oldest first
	tokens  float64
	last    time.Time // when tokens was last refilled; zero: full
	running bool      // a drain owns the queue
}

func newDenialCoalescer() *denialCoalescer {
	return &denialCoalescer{rate: denialRate, burst: denialBurst, maxKeys: denialMaxKeys,
		pending: map[denialKey]*api.AuditDenialCommand{}, tokens: denialBurst}
}

// add folds cmd (Count 1) into the waiting line with its key, or queues
// it. It returns true when no drain is running: the caller starts one.
func (c *denialCoalescer) add(key denialKey, cmd api.AuditDenialCommand) (start bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pending[key]; ok {
		p.Count = min(p.Count+cmd.Count, api.MaxDenialCount)
	} else if len(c.pending) >= c.maxKeys {
		if p, ok := c.pending[overflowKey]; ok {
			p.Count = min(p.Count+cmd.Count, api.MaxDenialCount)
		} else {
			c.pending[overflowKey] = &api.AuditDenialCommand{Reason: overflowKey.reason, Count: cmd.Count}
			c.order = append(c.order, overflowKey)
		}
	} else {
		c.pending[key] = &cmd
		c.order = append(c.order, key)
	}
	start = !c.running
	c.running = true
	return start
}

// next takes the oldest waiting line if the budget allows one at now. It
// returns (nil, d) when the budget refills in d, and (nil, 0) when nothing
// waits, which ends the drain: the next add starts another.
func (c *denialCoalescer) next(now time.Time) (*api.AuditDenialCommand, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) == 0 {
		c.running = false
		return nil, 0
	}
	if !c.last.IsZero() {
		c.tokens = min(c.burst, c.tokens+now.Sub(c.last).Seconds()*c.rate)
	}
	c.last = now
	if c.tokens < 1 {
		return nil, max(time.Duration((1-c.tokens)/c.rate*float64(time.Second)), time.Millisecond)
	}
	c.tokens--
	key := c.order[0]
	c.order = c.order[1:]
	cmd := c.pending[key]
	delete(c.pending, key)
	return cmd, 0
}

// releaseActor is who a lock release acts as: "by" for a forced release,
// else the holder.
func releaseActor(c api.LockReleaseCommand) (field, agent string) {
	if c.Force {
		return "by", c.By
	}
	return "holder", c.Holder
}
