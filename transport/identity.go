package transport

import (
	"context"

	"github.com/maos-project/maos/api"
)

// NodeTokenID names the node credential in the audit trail.
const NodeTokenID = "node"

// Identity is who an authenticated request speaks for: the agent and role
// of its bearer token.
type Identity struct {
	// Agent is the token's agent id; "" for the admin bootstrap token.
	Agent string
	Role  api.Role
	// TokenID names the token (never its secret), for the audit trail.
	TokenID string
	// AgentRole and Capabilities are the token's grant (api.Token): the
	// registry role and capabilities its agent may register itself with.
	AgentRole    string
	Capabilities []string
}

// Moderates reports whether the identity may read every inbox and every
// private message.
func (id *Identity) Moderates() bool {
	return id != nil && (id.Role == api.RoleModerator || id.Role == api.RoleAdmin)
}

// ActsAs reports whether the identity's token acts as agent: the token's
// own agent or one of its forks ("A-fork-N", api.ForkParent), which a
// watcher runs with its agent's token (seed 003's fork policy); an admin
// acts as anyone, and so does a node, for the requests it forwards. Nil
// (no --auth) acts as nobody: callers that allow
// everything without auth say so themselves.
func (id *Identity) ActsAs(agent string) bool {
	if id == nil {
		return false
	}
	return api.ActsAs(id.Agent, id.Role, agent)
}

// Internode reports whether the identity may make the calls nodes make to
// each other (forward a request, join, copy blobs): a node's or an
// admin's.
func (id *Identity) Internode() bool {
	return id != nil && (id.Role == api.RoleNode || id.Role == api.RoleAdmin)
}

// IsAdmin reports whether the identity may run cluster operations.
func (id *Identity) IsAdmin() bool { return id != nil && id.Role == api.RoleAdmin }

// caller is who a request speaks for, resolved once per request by its
// route's pass (routes.go) and kept in its context: the identity of its
// bearer token (nil without --auth), whether a node forwarded it, and
// whether the node that took it already applied this node's limits (a
// request a node forwarded: with auth, only one carrying an admin token).
type caller struct {
	id        *Identity
	forwarded bool
	limited   bool
}

type callerKey struct{}

// callerFrom is ctx's caller; the zero caller (no identity, not
// forwarded) when ctx has none.
func callerFrom(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	if c == nil {
		return caller{}
	}
	return *c
}

// withCaller returns ctx carrying c, with c.limited worked out from the
// rest.
func withCaller(ctx context.Context, c caller) context.Context {
	c.limited = c.forwarded && (c.id == nil || c.id.Internode())
	return context.WithValue(ctx, callerKey{}, &c)
}

// WithIdentity returns ctx carrying id as the request's identity.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	c := callerFrom(ctx)
	c.id = id
	return withCaller(ctx, c)
}

// IdentityFrom returns the identity an authenticated request carries, or
// nil when the node runs without --auth: nil means unrestricted.
func IdentityFrom(ctx context.Context) *Identity { return callerFrom(ctx).id }

// WithForwarded marks ctx as serving a request another node forwarded: the
// node must answer it itself or fail with ErrNotLeader, never forward.
func WithForwarded(ctx context.Context) context.Context {
	c := callerFrom(ctx)
	c.forwarded = true
	return withCaller(ctx, c)
}

// IsForwarded reports whether ctx serves a request another node forwarded
// (HeaderForwarded, or WithForwarded).
func IsForwarded(ctx context.Context) bool { return callerFrom(ctx).forwarded }
