package transport

import (
	"net/http"
	"slices"

	"github.com/maos-project/maos/api"
)

// maxPresenceBytes caps a PUT /v1/presence body: a heartbeat is a few
// hundred bytes.
const maxPresenceBytes = 4 << 10

// The presence endpoints: agent presence and gossip membership. Presence
// is soft state carried by gossip, so every one of these is answered by
// the node it reaches, without the leader.
//
//	PUT /v1/presence/{agent}   heartbeat (PresenceUpdate) → the stored Presence
//	GET /v1/presence           PresenceResponse, every agent this node knows
//	GET /v1/presence/{agent}   Presence; 404 if unknown
//	GET /v1/agents/{id}/health HealthReport (Presence.Health); 404 if unknown
//	GET /v1/cluster/members    MembersResponse

func (s *Server) putPresence(w http.ResponseWriter, r *http.Request) {
	var u api.PresenceUpdate
	if err := decodeBody(w, r, maxPresenceBytes, &u); err != nil {
		s.writeError(w, r, err)
		return
	}
	agent := r.PathValue("agent")
	u.Normalize()
	if err := u.Validate(agent); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.presence.PutPresence(r.Context(), agent, u)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) listPresence(w http.ResponseWriter, r *http.Request) {
	list, err := s.presence.Presence(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if list == nil {
		list = []api.Presence{}
	}
	s.addLeases(list)
	writeJSON(w, http.StatusOK, api.PresenceResponse{Agents: list})
}

func (s *Server) getPresence(w http.ResponseWriter, r *http.Request) {
	p, err := s.presence.AgentPresence(r.Context(), r.PathValue("agent"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list := []api.Presence{p}
	s.addLeases(list)
	writeJSON(w, http.StatusOK, list[0])
}

// addLeases sets ServedBy and Standby of each agent of list that has a
// lease, from this node's state (a local read: the lease changes at most
// once per ttl). A failed read leaves them empty: presence still answers.
func (s *Server) addLeases(list []api.Presence) {
	page, err := s.state.AgentLeases()
	if err != nil {
		s.opts.Logger.Warn("transport: presence without the agents' leases", "err", err)
		return
	}
	byAgent := make(map[string]*api.AgentLease, len(page.Leases))
	for i := range page.Leases {
		byAgent[page.Leases[i].Agent] = &page.Leases[i]
	}
	for i := range list {
		l := byAgent[list[i].AgentID]
		if l == nil {
			continue
		}
		if !l.Expired && !l.Released {
			list[i].ServedBy = l.Holder.Node
		}
		var nodes []string
		for _, sb := range l.Standbys {
			if !slices.Contains(nodes, sb.Node) {
				nodes = append(nodes, sb.Node) // Standbys are in node order
			}
		}
		list[i].Standby = api.JoinNodeIDs(nodes)
	}
}

func (s *Server) agentHealth(w http.ResponseWriter, r *http.Request) {
	p, err := s.presence.AgentPresence(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p.Health())
}

func (s *Server) members(w http.ResponseWriter, r *http.Request) {
	res, err := s.cluster.Members(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res.Members == nil {
		res.Members = []api.Member{}
	}
	writeJSON(w, http.StatusOK, res)
}
