package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/maos-project/maos/fsm"
)

// InterruptRequest is the body of POST /v1/agents/{id}/interrupt.
type InterruptRequest struct {
	From   string `json:"from"`
	Reason string `json:"reason"`
}

// InterruptResponse says which node sent the ESC.
type InterruptResponse struct {
	Agent string `json:"agent"`
	Node  string `json:"node"`
}

// interruptAgent serves POST /v1/agents/{id}/interrupt: ESC to the agent's
// terminal pane. The node that hosts the agent (from presence) does it
// through its ServerOptions.Interrupt hook (maosd wires the tmux panes of
// its --agents file); any other node forwards the request there, once.
// The urgent "[INTERRUPT] reason" message that goes with it is an ordinary
// send, made (and checked against the rules) by the caller first.
func (s *Server) interruptAgent(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("id")
	var req InterruptRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, f := range []struct{ name, v string }{{"id", agent}, {"from", req.From}} {
		if !fsm.ValidName(f.v) {
			s.writeError(w, r, fsm.NameError(f.name, f.v))
			return
		}
	}
	if !s.admit(w, r, "from", req.From) {
		return
	}
	ctx := r.Context()
	if !IsForwarded(ctx) {
		if err := mayInterrupt(s.state, req.From, agent); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	p, err := s.presence.AgentPresence(ctx, agent)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("interrupt %s: no presence, so no host to reach: %w", agent, err))
		return
	}
	me, err := s.cluster.Members(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if p.Node == me.NodeID {
		if s.opts.Interrupt == nil {
			s.writeError(w, r, fmt.Errorf("interrupt %s: node %s runs no watcher with a terminal pane: %w", agent, p.Node, fsm.ErrNotFound))
			return
		}
		if err := s.opts.Interrupt(ctx, agent); err != nil {
			s.writeError(w, r, fmt.Errorf("interrupt %s on node %s: %w", agent, p.Node, err))
			return
		}
		s.opts.Logger.Info("interrupted agent", "agent", agent, "from", req.From, "reason", req.Reason)
		writeJSON(w, http.StatusOK, InterruptResponse{Agent: agent, Node: p.Node})
		return
	}
	if IsForwarded(ctx) {
		s.writeError(w, r, fmt.Errorf("interrupt %s: forwarded here, but presence places it on %s: %w", agent, p.Node, ErrNotLeader))
		return
	}
	var addr string
	for _, m := range me.Members {
		if m.NodeID == p.Node && m.Status == MemberAlive {
			addr = m.APIAddr
		}
	}
	if addr == "" {
		s.writeError(w, r, fmt.Errorf("interrupt %s: its node %s is not an alive member: %w", agent, p.Node, fsm.ErrNotFound))
		return
	}
	res, err := s.peerClient(addr).Forwarding().InterruptAgent(ctx, agent, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// InterruptRoles may interrupt any agent when no rules document exists.
var InterruptRoles = []string{"master", "orchestrator"}

// mayInterrupt applies the interrupt rule: with a rules document, whoever
// the rules let message the agent may interrupt it; without one (when
// everyone may message everyone) only the master and orchestrator roles
// may. A refusal wraps fsm.ErrForbidden and names the reason.
func mayInterrupt(state Reader, from, agent string) error {
	rs, err := state.Rules()
	if err != nil {
		return err
	}
	chk, err := state.CheckRules(from, "", agent, "")
	if err != nil {
		return err
	}
	if rs.Rules != nil {
		if !chk.Allowed {
			return fmt.Errorf("%s may not interrupt %s: %s: %w", from, agent, chk.Reason, fsm.ErrForbidden)
		}
		return nil
	}
	if !slices.Contains(InterruptRoles, chk.FromRole) {
		return fmt.Errorf("%s (role %q) may not interrupt %s: without a rules document only the roles %v may: %w",
			from, chk.FromRole, agent, InterruptRoles, fsm.ErrForbidden)
	}
	return nil
}

// InterruptAgent asks the cluster to send ESC to agent's pane on the node
// that hosts it.
func (c *Client) InterruptAgent(ctx context.Context, agent string, req InterruptRequest) (InterruptResponse, error) {
	var out InterruptResponse
	err := c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/interrupt", nil, req, &out)
	return out, err
}

// peerClient is ServerOptions.PeerClient, or its plain-HTTP default.
func (s *Server) peerClient(addr string) *Client {
	if s.opts.PeerClient != nil {
		return s.opts.PeerClient(addr)
	}
	return NewClient(addr, nil).WithToken(s.peerToken())
}
