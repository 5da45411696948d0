package transport

import (
	"net/http"
	"strconv"

	"github.com/maos-project/maos/api"
)

// Agent leases (fsm/agent_lease.go): the watcher that serves an agent
// configured on several nodes holds its lease; the others stand by. The
// writes act as the agent in the path (rule actor("id")): its own token,
// or an admin's such as the node's that runs the watcher.

// The lease writes, each one command through the one pipeline
// (pipeline.go), the agent the path's: the route's rule admits it; a
// refusal is 409 code fenced.
var (
	agentLeaseAcquire = writeSpec[api.AgentLeaseAcquireCommand, *api.AgentLeaseAcquireCommand]{op: api.OpAgentLeaseAcquire,
		bind: pathAgentInto(func(c *api.AgentLeaseAcquireCommand) *string { return &c.Agent })}
	agentLeaseRenew = writeSpec[api.AgentLeaseRenewCommand, *api.AgentLeaseRenewCommand]{op: api.OpAgentLeaseRenew,
		bind: pathAgentInto(func(c *api.AgentLeaseRenewCommand) *string { return &c.Agent })}
	agentLeaseRelease = writeSpec[api.AgentLeaseReleaseCommand, *api.AgentLeaseReleaseCommand]{op: api.OpAgentLeaseRelease,
		bind: pathAgentInto(func(c *api.AgentLeaseReleaseCommand) *string { return &c.Agent })}
)

// agentLeaseRenewMany renews what one watcher process holds in one entry
// (POST /v1/leases/renew): the token must act as every agent renewed.
var agentLeaseRenewMany = writeSpec[api.AgentLeaseRenewManyCommand, *api.AgentLeaseRenewManyCommand]{op: api.OpAgentLeaseRenewMany,
	authorize: func(id *Identity, c *api.AgentLeaseRenewManyCommand) string {
		for _, r := range c.Renewals {
			if !id.ActsAs(r.Agent) {
				return "act as agent " + r.Agent + " to renew its lease"
			}
		}
		return ""
	}}

// maxRenewalsBody caps POST /v1/leases/renew: MaxLeaseRenewals renewals
// of up to 512 bytes each (two names, a fence, a ttl).
const maxRenewalsBody = api.MaxLeaseRenewals * 512

// getAgentLease serves GET /v1/agents/{id}/lease.
func (s *Server) getAgentLease(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !api.ValidName(id) {
		s.writeError(w, r, api.NameError("id", id))
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.AgentLeaseOf(id) })
}

// listAgentLeases serves GET /v1/leases: every agent's lease, who serves
// it and who stands by.
func (s *Server) listAgentLeases(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) { return st.AgentLeases() })
}

// agentFenceParam reads a write's ?agent_fence= (0 when absent): the
// fence of the agent lease the writer acts under.
func agentFenceParam(r *http.Request) (uint64, error) {
	v := r.URL.Query().Get("agent_fence")
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseUint(v, 10, 64)
	if err != nil || f == 0 {
		return 0, &api.FieldError{Field: "agent_fence", Reason: "want the positive fence of the sender's agent lease, got " + strconv.Quote(v)}
	}
	return f, nil
}
