package api

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
)

// OpRegisterAgent adds or replaces an agent (body: RegisterAgentCommand).
// OpUnregisterAgent removes one (body: UnregisterAgentCommand).
const (
	OpRegisterAgent   Op = "register_agent"
	OpUnregisterAgent Op = "unregister_agent"
)

// Registry limits and defaults.
const (
	// DefaultRole is the role of an agent registered without one, and of a
	// sender registered on the spot by its first send.
	DefaultRole = "agent"
	// MaxCapabilities caps an agent's capabilities list.
	MaxCapabilities = 64
	// MaxDescriptionLen caps an agent's description, in bytes.
	MaxDescriptionLen = 4096
)

// SystemSender is the reserved agent id of the messages maos makes itself
// (a task's cascade and timeout replies, incidents). It is never
// registered, and no agent may register or send as it (a *FieldError).
const SystemSender = "maos"

// ReservedName is the refusal of SystemSender in field.
func ReservedName(field string) error {
	return FieldErrorf(field, "%q is reserved for the messages maos itself sends; pick another agent id", SystemSender)
}

// Agent is a registered agent (the seed router's AgentInfo).
type Agent struct {
	ID           string   `json:"id"`
	Role         string   `json:"role"`
	Capabilities []string `json:"capabilities,omitempty"`
	Description  string   `json:"description,omitempty"`
	// Node is the maos node the agent's watcher runs next to, if given.
	Node string `json:"node,omitempty"`
	// Auto is true for an agent registered on the spot by its first send
	// (role "agent"); an explicit register clears it.
	Auto bool `json:"auto,omitempty"`
	// RegisteredAt is the time of the first registration, UpdatedAt of the
	// last (entry times, UTC).
	RegisteredAt time.Time `json:"registered_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Index is the Raft index of the entry that last registered it.
	Index uint64 `json:"index"`
	// A2A, for a remote A2A agent (RegisterAgentCommand.A2A), is its URL
	// and whether a credential is stored; never the credential.
	A2A *AgentA2A `json:"a2a,omitempty"`
}

// RegisterAgentCommand is the body of OpRegisterAgent and of POST
// /v1/agents. Registering an id again replaces its role, capabilities,
// description and node.
type RegisterAgentCommand struct {
	ID           string   `json:"id"`
	Role         string   `json:"role,omitempty"` // default "agent"
	Capabilities []string `json:"capabilities,omitempty"`
	Description  string   `json:"description,omitempty"`
	Node         string   `json:"node,omitempty"`
	// A2A, if set, makes the agent a remote A2A agent whose tasks and
	// messages a maosd relays (A2ARemote); registering again without it
	// makes the agent a plain one. Needs cluster state version 3.
	A2A *A2ARemote `json:"a2a,omitempty"`
}

// Normalize fills the default role and drops repeated capabilities.
func (c *RegisterAgentCommand) Normalize() {
	if c.Role == "" {
		c.Role = DefaultRole
	}
	var caps []string
	for _, cp := range c.Capabilities {
		if !slices.Contains(caps, cp) {
			caps = append(caps, cp)
		}
	}
	c.Capabilities = caps
}

// Validate checks the command: id, role, each capability and node (if set)
// must be a ValidName (NamePattern), the id not SystemSender; at most MaxCapabilities
// capabilities; a description of at most MaxDescriptionLen bytes without
// control characters other than newline and tab; an A2A remote valid by
// A2ARemote.Validate. The error is a *FieldError.
func (c *RegisterAgentCommand) Validate() error {
	if c.ID == "" {
		return FieldErrorf("id", "required")
	}
	if !ValidName(c.ID) {
		return NameError("id", c.ID)
	}
	if c.ID == SystemSender {
		return ReservedName("id")
	}
	if !ValidName(c.Role) {
		return NameError("role", c.Role)
	}
	if err := CheckNames("capabilities", c.Capabilities, MaxCapabilities, "entries"); err != nil {
		return err
	}
	if len(c.Description) > MaxDescriptionLen {
		return FieldErrorf("description", "%d bytes, at most %d", len(c.Description), MaxDescriptionLen)
	}
	if strings.IndexFunc(c.Description, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0 {
		return FieldErrorf("description", "must not contain control characters other than newline and tab")
	}
	if c.Node != "" && !ValidName(c.Node) {
		return NameError("node", c.Node)
	}
	if c.A2A != nil {
		return c.A2A.Validate()
	}
	return nil
}

// UnregisterAgentCommand is the body of OpUnregisterAgent.
type UnregisterAgentCommand struct {
	ID string `json:"id"`
}

// Validate checks the id.
func (c *UnregisterAgentCommand) Validate() error {
	if c.ID == "" {
		return FieldErrorf("id", "required")
	}
	if !ValidName(c.ID) {
		return NameError("id", c.ID)
	}
	return nil
}

// AgentQuery selects agents: by role, by capability (both: agents with
// both), after an id (exclusive; for paging), at most Limit (≤ 0 means
// DefaultPageLimit; capped at MaxPageLimit).
type AgentQuery struct {
	Role       string
	Capability string
	After      string
	Limit      int
}

// Validate checks the names of the query.
func (q *AgentQuery) Validate() error {
	for _, f := range []struct{ name, v string }{{"role", q.Role}, {"capability", q.Capability}, {"after", q.After}} {
		if f.v != "" && !ValidName(f.v) {
			return NameError(f.name, f.v)
		}
	}
	return nil
}

// The agent lease ops.
const (
	// OpAgentLeaseAcquire grants, extends or stands by (body:
	// AgentLeaseAcquireCommand).
	OpAgentLeaseAcquire Op = "agent_lease_acquire"
	// OpAgentLeaseRenew extends the live lease by its holder (body:
	// AgentLeaseRenewCommand).
	OpAgentLeaseRenew Op = "agent_lease_renew"
	// OpAgentLeaseRelease ends the lease by its holder (body:
	// AgentLeaseReleaseCommand).
	OpAgentLeaseRelease Op = "agent_lease_release"
)

// Agent lease limits.
const (
	MinAgentLeaseTTL     = time.Second
	MaxAgentLeaseTTL     = 10 * time.Minute
	DefaultAgentLeaseTTL = 10 * time.Second
	MaxAgentStandbys     = 16
)

// Outcomes of an agent lease command (AgentLeaseResult.Outcome).
// Refusals (not the holder, a stale fence, a lapsed lease) are
// *ConflictError values wrapping ErrFenced.
const (
	AgentLeaseGranted  = "granted"  // a new grant with a new fence
	AgentLeaseExtended = "extended" // the holder's live lease renewed, same fence
	AgentLeaseStandby  = "standby"  // another holder's lease is live; the caller is recorded as a standby
	AgentLeaseReleased = "released" // the holder gave the lease up
)

// Takeover reasons (AgentLease.Reason, the audit's text).
const (
	LeaseReasonFirst    = "first"    // no holder before
	LeaseReasonLapsed   = "lapsed"   // the holder stopped renewing
	LeaseReasonReleased = "released" // the holder gave the lease up
)

// ErrFenced is what a refusal by an agent's lease fence wraps (with
// ErrConflict): the caller's fence or holder is not the current grant's,
// so it lost the lease and must stop acting as the agent.
var ErrFenced = errors.New("agent lease lost")

// LeaseHolder names a watcher instance: the node it runs beside and a
// per-process id (both ids matching NamePattern).
type LeaseHolder struct {
	Node     string `json:"node"`
	Instance string `json:"instance"`
}

// String is "node/instance".
func (h LeaseHolder) String() string { return h.Node + "/" + h.Instance }

// Validate checks node and instance: each an id matching NamePattern.
func (h LeaseHolder) Validate() error {
	if !ValidName(h.Node) {
		if h.Node == "" {
			return FieldErrorf("node", "required: the id of the node the watcher runs beside")
		}
		return NameError("node", h.Node)
	}
	if !ValidName(h.Instance) {
		if h.Instance == "" {
			return FieldErrorf("instance", "required: the watcher process's instance id")
		}
		return NameError("instance", h.Instance)
	}
	return nil
}

func validLeaseAgent(agent string) error {
	if agent == "" {
		return FieldErrorf("agent", "required: the agent id the lease is for")
	}
	return CheckAgentField("agent", agent)
}

// AgentLeaseAcquireCommand is the body of OpAgentLeaseAcquire and of POST
// /v1/agents/{id}/lease: take the agent's lease if it is free or lapsed,
// extend it if the caller holds it, else stand by.
type AgentLeaseAcquireCommand struct {
	Agent string `json:"agent"`
	LeaseHolder
	TTL LockTTL `json:"ttl"` // MinAgentLeaseTTL..MaxAgentLeaseTTL
}

// Validate checks agent, node, instance and ttl.
func (c *AgentLeaseAcquireCommand) Validate() error {
	return cmp.Or(validLeaseAgent(c.Agent), c.LeaseHolder.Validate(), c.TTL.validateIn(MinAgentLeaseTTL, MaxAgentLeaseTTL))
}

// AgentLeaseRenewCommand is the body of OpAgentLeaseRenew and of POST
// /v1/agents/{id}/lease/renew: the holder extends its live lease to entry
// time + TTL.
type AgentLeaseRenewCommand struct {
	Agent string `json:"agent"`
	LeaseHolder
	Fence uint64  `json:"fence"` // the fence the grant returned
	TTL   LockTTL `json:"ttl"`
}

// Validate checks agent, node, instance, fence and ttl.
func (c *AgentLeaseRenewCommand) Validate() error {
	return cmp.Or(validLeaseAgent(c.Agent), c.LeaseHolder.Validate(), validFence(c.Fence), c.TTL.validateIn(MinAgentLeaseTTL, MaxAgentLeaseTTL))
}

// AgentLeaseReleaseCommand is the body of OpAgentLeaseRelease and of POST
// /v1/agents/{id}/lease/release: the holder gives the lease up (a watcher
// stopping), so a standby takes over at once rather than after the ttl.
type AgentLeaseReleaseCommand struct {
	Agent string `json:"agent"`
	LeaseHolder
	Fence uint64 `json:"fence"`
}

// Validate checks agent, node, instance and fence.
func (c *AgentLeaseReleaseCommand) Validate() error {
	return cmp.Or(validLeaseAgent(c.Agent), c.LeaseHolder.Validate(), validFence(c.Fence))
}

func validFence(f uint64) error {
	if f == 0 {
		return FieldErrorf("fence", "required: the fence the grant returned")
	}
	return nil
}

// OpSetPolicy sets or clears an agent's run-time delivery policy (body:
// SetPolicyCommand).
const OpSetPolicy Op = "set_policy"

// The delivery modes a policy names (seed 003, issue 16).
const (
	// PolicyQueue delivers one message at a time, when the agent is idle.
	PolicyQueue = "queue"
	// PolicyInterrupt interrupts the agent (ESC) before delivering.
	PolicyInterrupt = "interrupt"
	// PolicyFork hands the message to a temporary agent.
	PolicyFork = "fork"
	// PolicyQuiet holds every message but urgent ones until the policy
	// ends; held mail is then delivered in seq order.
	PolicyQuiet = "quiet"
)

// PolicyModes lists the modes a policy may set, in the order help shows them.
var PolicyModes = []string{PolicyQueue, PolicyInterrupt, PolicyFork, PolicyQuiet}

// Limits of a policy.
const (
	// MaxPolicyFor bounds --for: 30 days, in seconds.
	MaxPolicyFor = 30 * 24 * 3600
	// MaxPolicyOverrides bounds the per-sender overrides of one agent.
	MaxPolicyOverrides = 64
)

// SetPolicyCommand sets agent's policy: for all its mail, or for From's
// only. Mode "" clears that policy (the YAML applies again); a clear with
// nothing to clear succeeds with Cleared false.
type SetPolicyCommand struct {
	Agent string `json:"agent"`
	// Mode is one of PolicyModes, or "" to clear.
	Mode string `json:"mode"`
	// From, when set, makes this a per-sender override: it applies to
	// mail from that agent only.
	From string `json:"from,omitempty"`
	// ForSeconds, when above 0, ends the policy that long after the
	// entry's time (at most MaxPolicyFor); 0: until cleared.
	ForSeconds int64 `json:"for_seconds,omitempty"`
	// SetBy is who set it (the caller's agent, or the agent itself).
	SetBy string `json:"set_by"`
}

// Validate checks names, the mode and the duration, naming the field and
// the limit.
func (c *SetPolicyCommand) Validate() error {
	switch {
	case !ValidName(c.Agent):
		return NameError("agent", c.Agent)
	case c.From != "" && !ValidName(c.From):
		return NameError("from", c.From)
	case !ValidName(c.SetBy):
		return NameError("set_by", c.SetBy)
	case c.Mode != "" && !slices.Contains(PolicyModes, c.Mode):
		return FieldErrorf("mode", "%q is not a mode: one of %v, or \"\" to clear", c.Mode, PolicyModes)
	case c.ForSeconds < 0 || c.ForSeconds > MaxPolicyFor:
		return FieldErrorf("for_seconds", "%d is out of range: 0 (no end) to %d (30 days)", c.ForSeconds, MaxPolicyFor)
	case c.Mode == "" && c.ForSeconds != 0:
		return FieldErrorf("for_seconds", "a clear takes no duration")
	}
	return nil
}

// Policy is one run-time policy of an agent, as queries and set_policy
// return it.
type Policy struct {
	Agent string `json:"agent"`
	// Mode is one of PolicyModes ("" in the result of a clear).
	Mode string `json:"mode"`
	// From is the sender a per-sender override applies to; "" for all mail.
	From string `json:"from,omitempty"`
	// Until is when it ends; zero for never.
	Until time.Time `json:"until,omitzero"`
	SetBy string    `json:"set_by,omitempty"`
	SetAt time.Time `json:"set_at,omitzero"`
	// Cleared, in the result of a clear, says a policy was removed.
	Cleared bool `json:"cleared,omitempty"`
}

// InForce reports whether p applies at now: it has a mode and has not ended.
func (p Policy) InForce(now time.Time) bool {
	return p.Mode != "" && (p.Until.IsZero() || now.Before(p.Until))
}

// PolicySet is an agent's stored run-time policies: the agent-wide one
// first (From ""), then the per-sender overrides by sender.
type PolicySet struct {
	Agent    string   `json:"agent"`
	Policies []Policy `json:"policies"`
}

// For is the policy that applies at now to mail from sender: that
// sender's override if one is in force, else the agent-wide policy if in
// force; false when none is (the YAML applies). The one rule watchers and
// maosctl follow.
func (s PolicySet) For(sender string, now time.Time) (Policy, bool) {
	var all Policy
	found := false
	for _, p := range s.Policies {
		if !p.InForce(now) {
			continue
		}
		if sender != "" && p.From == sender {
			return p, true
		}
		if p.From == "" {
			all, found = p, true
		}
	}
	return all, found
}

// InForce is s without the policies that ended at now.
func (s PolicySet) InForce(now time.Time) PolicySet {
	out := PolicySet{Agent: s.Agent, Policies: []Policy{}}
	for _, p := range s.Policies {
		if p.InForce(now) {
			out.Policies = append(out.Policies, p)
		}
	}
	return out
}

// OpSetCursor records a watcher's progress (body: SetCursorCommand).
const OpSetCursor Op = "set_cursor"

// SetCursorCommand moves an agent's cursor to Seq. A cursor never moves
// back: a lower Seq (a late retry, a second watcher behind the first)
// leaves it where it is.
type SetCursorCommand struct {
	Agent string `json:"agent"`
	Seq   uint64 `json:"seq"`
	// AgentFence, when set, must be the agent's current lease fence
	// (agent_lease.go): a watcher that lost the lease cannot move the
	// cursor its successor resumes from. Zero: no check.
	AgentFence uint64 `json:"agent_fence,omitempty"`
}

// Validate checks the agent id.
func (c *SetCursorCommand) Validate() error {
	if !ValidName(c.Agent) {
		return NameError("agent", c.Agent)
	}
	return nil
}

// AgentPage is one page of the registry, by id.
type AgentPage struct {
	Agents  []Agent `json:"agents"`
	HasMore bool    `json:"has_more"`
}

// FenceError is a refusal by the agent lease: its words say the fence
// given, the current fence and its holder. errors.Is matches both
// ErrFenced and ErrConflict (an answer of 409).
type FenceError struct {
	Reason string
}

func (e *FenceError) Error() string { return e.Reason }

// Unwrap lets errors.Is match ErrFenced and ErrConflict.
func (e *FenceError) Unwrap() []error { return []error{ErrFenced, ErrConflict} }

// AgentLease is an agent's lease as the API shows it.
type AgentLease struct {
	Agent string `json:"agent"`
	// Holder is the watcher that serves the agent (or served it, when
	// Expired or Released).
	Holder LeaseHolder `json:"holder"`
	// Fence is the Raft index of the entry that granted the lease.
	Fence      uint64    `json:"fence"`
	AcquiredAt time.Time `json:"acquired_at"`
	RenewedAt  time.Time `json:"renewed_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at"` // first instant the lease no longer covers
	TTL        LockTTL   `json:"ttl"`
	// Reason is why the holder got it: first, lapsed or released.
	Reason string `json:"reason"`
	// Expired: the lease ran out as of the entry that produced this
	// answer (apply results) or the latest applied entry (reads).
	Expired bool `json:"expired"`
	// Released: the holder gave it up; a standby takes it at its next try.
	Released bool `json:"released,omitempty"`
	// Standbys are the other watchers of the agent that asked within
	// their ttl, by node then instance.
	Standbys []AgentStandby `json:"standbys"`
}

// AgentStandby is a watcher standing by for an agent.
type AgentStandby struct {
	LeaseHolder
	SeenAt time.Time `json:"seen_at"` // the entry time of its last acquire
}

// AgentLeaseResult is the result of an agent lease command.
type AgentLeaseResult struct {
	Outcome string      `json:"outcome"` // AgentLeaseGranted, …Extended, …Standby, …Released
	Lease   *AgentLease `json:"lease"`
}

// AgentLeasePage lists agent leases by agent id. AsOf is the entry time
// expiry was judged against.
type AgentLeasePage struct {
	Leases []AgentLease `json:"leases"`
	AsOf   time.Time    `json:"as_of"`
}

// Cursor is an agent's watcher cursor.
type Cursor struct {
	Agent string `json:"agent"`
	Seq   uint64 `json:"seq"` // 0: nothing handled yet
}

// OpAgentLeaseRenewMany renews the live leases of several agents in one
// entry, each judged alone as an OpAgentLeaseRenew would judge it (body:
// AgentLeaseRenewManyCommand; result: AgentLeaseRenewManyResult): what
// one watcher process holds, one entry per renewal period instead of
// one per agent.
const OpAgentLeaseRenewMany Op = "agent_lease_renew_many"

// MaxLeaseRenewals bounds the renewals of one AgentLeaseRenewManyCommand;
// a watcher holding more sends several.
const MaxLeaseRenewals = 256

// AgentLeaseRenewManyCommand is the body of OpAgentLeaseRenewMany and of
// POST /v1/leases/renew.
type AgentLeaseRenewManyCommand struct {
	// Renewals are 1..MaxLeaseRenewals renewals, each agent at most once.
	Renewals []AgentLeaseRenewCommand `json:"renewals"`
}

// Validate checks the count, each renewal (its field errors named
// "renewals[i].field") and that no agent comes twice.
func (c *AgentLeaseRenewManyCommand) Validate() error {
	if n := len(c.Renewals); n == 0 || n > MaxLeaseRenewals {
		return FieldErrorf("renewals", "%d renewals: want 1..%d in one request", n, MaxLeaseRenewals)
	}
	seen := make(map[string]bool, len(c.Renewals))
	for i := range c.Renewals {
		r := &c.Renewals[i]
		if err := r.Validate(); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return &FieldError{Field: fmt.Sprintf("renewals[%d].%s", i, fe.Field), Reason: fe.Reason, Err: fe.Err}
			}
			return err
		}
		if seen[r.Agent] {
			return FieldErrorf(fmt.Sprintf("renewals[%d].agent", i), "%s is renewed twice in one request", r.Agent)
		}
		seen[r.Agent] = true
	}
	return nil
}

// AgentLeaseRenewManyResult is OpAgentLeaseRenewMany's result: one
// outcome per renewal, in the command's order.
type AgentLeaseRenewManyResult struct {
	Results []AgentLeaseRenewal `json:"results"`
}

// AgentLeaseRenewal is one renewal's outcome: Lease, the renewed lease,
// or Error, why it was refused (code fenced: the caller lost that lease;
// not_found: the agent never had one), as a lone renewal is answered.
type AgentLeaseRenewal struct {
	Agent string      `json:"agent"`
	Lease *AgentLease `json:"lease,omitempty"`
	Error *APIError   `json:"error,omitempty"`
}
