package transport

import "context"

// Role is what a bearer token may do, beyond speaking for its agent.
type Role string

// Token roles. A moderator (an operator's "supervisor") reads every inbox
// and every private message; an admin can also run cluster operations
// (join, remove, snapshot, rules, tokens) and is what nodes use between
// themselves.
const (
	RoleAgent     Role = "agent"
	RoleModerator Role = "moderator"
	RoleAdmin     Role = "admin"
)

// Identity is who an authenticated request speaks for: the agent and role
// of its bearer token.
type Identity struct {
	// Agent is the token's agent id; "" for the admin bootstrap token.
	Agent string
	Role  Role
	// TokenID names the token (never its secret), for the audit trail.
	TokenID string
}

// Moderates reports whether the identity may read every inbox and every
// private message.
func (id *Identity) Moderates() bool {
	return id != nil && (id.Role == RoleModerator || id.Role == RoleAdmin)
}

// IsAdmin reports whether the identity may run cluster operations.
func (id *Identity) IsAdmin() bool { return id != nil && id.Role == RoleAdmin }

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity an authenticated request carries, or
// nil when the node runs without --auth: nil means unrestricted.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}
