package transport

import (
	"net/http"

	"github.com/maos-project/maos/api"
)

// Run-time delivery policies (fsm/policy_set.go). Reading an agent's policy
// needs any valid token: its watchers, its senders and the console may
// all ask how it takes mail. Setting or clearing one acts as the agent,
// like a presence heartbeat: the agent's own token or an admin's (a
// moderator may interrupt an agent, not change how it takes mail).

// getPolicy serves GET /v1/agents/{id}/policy: an api.PolicySet of the
// policies in force by this node's clock, the agent-wide one first (an
// empty list: the watchers' YAML applies).
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !api.ValidName(id) {
		s.writeError(w, r, api.NameError("id", id))
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.Policies(id, s.opts.Now()) })
}

// putPolicy serves PUT /v1/agents/{id}/policy (body PolicyRequest): the
// committed api.Policy.
func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request) {
	var req api.PolicyRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Mode == "" {
		s.writeError(w, r, &api.FieldError{Field: "mode", Reason: "required: one of queue, interrupt, fork, quiet (DELETE clears a policy)"})
		return
	}
	s.proposePolicy(w, r, api.SetPolicyCommand{Mode: req.Mode, From: req.From, ForSeconds: req.ForSeconds, SetBy: req.SetBy})
}

// deletePolicy serves DELETE /v1/agents/{id}/policy[?from=S]: clears the
// agent-wide policy, or S's override; the api.Policy result says whether
// there was one (cleared). ?set_by= is PolicyRequest.SetBy's.
func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request) {
	s.proposePolicy(w, r, api.SetPolicyCommand{From: r.URL.Query().Get("from"), SetBy: r.URL.Query().Get("set_by")})
}

// proposePolicy completes cmd with the path's agent and who sets it,
// checks it and commits it.
func (s *Server) proposePolicy(w http.ResponseWriter, r *http.Request, cmd api.SetPolicyCommand) {
	cmd.Agent = r.PathValue("id")
	if id := IdentityFrom(r.Context()); id != nil && id.Agent != "" {
		cmd.SetBy = id.Agent
	} else if cmd.SetBy == "" {
		cmd.SetBy = cmd.Agent
	}
	if !api.ValidName(cmd.Agent) {
		s.writeError(w, r, api.NameError("id", cmd.Agent))
		return
	}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpSetPolicy, cmd)
}
