package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// interruptAgent serves POST /v1/agents/{id}/interrupt, the one way to
// interrupt an agent: it proposes the urgent "[INTERRUPT] reason" alert
// (fsm.NewInterrupt) as a send marked api.Interrupt, which apply refuses
// (403 in the rule's words, a BLOCKED audit line, nothing stored) unless
// the sender may interrupt, and only once the alert committed sends ESC to
// the agent's pane: through this node's ServerOptions.Interrupt hook when
// presence places the agent here, else relayed to the node that hosts it.
// A relayed request (forwarded) only presses ESC.
//
// A pane that cannot be reached because there is none (no presence, a
// node without panes for the agent, a host that is not alive) is a 200
// with escape false and the reason: the alert is the interrupt. Any other
// failure to press ESC is an error whose message names the stored alert;
// retrying with the same id stores nothing more and presses again.
func (s *Server) interruptAgent(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("id")
	var req api.InterruptRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.Validate(agent); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !s.admit(w, r, "from", req.From) {
		return
	}
	ctx := r.Context()
	if IsForwarded(ctx) {
		s.interruptForwarded(w, r, agent, req)
		return
	}

	p, perr := s.presence.AgentPresence(ctx, agent)
	if perr != nil && !errors.Is(perr, api.ErrNotFound) {
		s.writeError(w, r, perr)
		return
	}
	if req.Channel == "" && perr == nil {
		req.Channel = p.Channel
	}
	if req.Channel == "" {
		s.writeError(w, r, &api.FieldError{Field: "channel", Reason: "required: the presence of " + agent + " names no channel to post the alert in"})
		return
	}
	m := fsm.NewInterrupt(req.From, agent, req.Channel, req.Reason)
	m.ID = req.ID
	m.Normalize(s.opts.Now())
	if err := m.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The reason is text the alert stores, like any message's: commit
	// guards it.
	raw, err := s.commit(r, api.OpSend, api.SendCommand{Message: *m,
		Interrupt: &api.Interrupt{Moderator: IdentityFrom(ctx).Moderates()}})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var sent fsm.SendResult
	if err := json.Unmarshal(raw, &sent); err != nil {
		s.writeError(w, r, fmt.Errorf("interrupt %s: decode the alert's result: %w", agent, err))
		return
	}
	res := api.InterruptResponse{Agent: agent, ID: sent.ID, Seq: sent.Seq, Timestamp: sent.Timestamp}
	if perr == nil {
		res.Node = p.Node
	}
	s.opts.Logger.Info("interrupt alert committed", "agent", agent, "from", req.From, "id", sent.ID, "seq", sent.Seq)

	// The alert is in the log: now ESC.
	switch {
	case req.LocalPane:
		res.NoEscape = "the caller presses ESC in its own pane"
	case perr != nil:
		res.NoEscape = fmt.Sprintf("%s has no presence, so no node to reach its pane", agent)
	default:
		req.ID = sent.ID // the relayed request names the alert it follows
		if err := s.escapeAfterAlert(ctx, agent, p.Node, req, &res); err != nil {
			s.writeError(w, r, fmt.Errorf("interrupt %s: alert %s stored (seq %d), but no ESC: %w", agent, sent.ID, sent.Seq, err))
			return
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// interruptForwarded presses ESC in agent's pane on this node for a
// request another node forwarded: the node that took it committed the
// alert.
func (s *Server) interruptForwarded(w http.ResponseWriter, r *http.Request, agent string, req api.InterruptRequest) {
	ctx := r.Context()
	if err := s.pressLocal(ctx, agent, req.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	me, err := s.cluster.Members(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.InterruptResponse{Agent: agent, Node: me.NodeID, Escape: true})
}

// escapeAfterAlert presses ESC in agent's pane through node and records
// the outcome in res: Escape, or NoEscape when there is no pane (or no
// such agent) to press it in. Any other failure is returned.
func (s *Server) escapeAfterAlert(ctx context.Context, agent, node string, req api.InterruptRequest, res *api.InterruptResponse) error {
	err := s.press(ctx, agent, node, req)
	var nf *noPaneError
	switch {
	case err == nil:
		res.Escape = true
	case errors.As(err, &nf) || errors.Is(err, api.ErrNotFound):
		res.NoEscape = err.Error()
	default:
		return err
	}
	return nil
}

// noPaneError says why ESC could not be pressed because there is no pane
// to press it in: not a failure of the interrupt.
type noPaneError struct{ why string }

func (e *noPaneError) Error() string { return e.why }

// press sends ESC to agent's pane on node: here through the Interrupt
// hook, elsewhere relayed to that node (as a forwarded request, which
// only presses).
func (s *Server) press(ctx context.Context, agent, node string, req api.InterruptRequest) error {
	me, err := s.cluster.Members(ctx)
	if err != nil {
		return err
	}
	if node == me.NodeID {
		return s.pressLocal(ctx, agent, req.ID)
	}
	alive := false
	for _, m := range me.Members {
		alive = alive || m.NodeID == node && m.Status == MemberAlive
	}
	if !alive {
		return &noPaneError{fmt.Sprintf("its node %s is not an alive member", node)}
	}
	// Gossip says where the agent is, never where to call: the node must
	// be in the Raft configuration, and it is called at its registered
	// address, as a node (ServerOptions.PeerClient).
	if s.opts.PeerClient == nil {
		return &noPaneError{fmt.Sprintf("its node %s is another node, and this server relays to none", node)}
	}
	cl, err := s.opts.PeerClient(node)
	if err != nil {
		return &noPaneError{fmt.Sprintf("its node %s is not a node ESC may be relayed to: %v", node, err)}
	}
	_, err = cl.Forwarding().InterruptAgent(ctx, agent, req)
	return err
}

// pressLocal sends ESC to agent's pane on this node, through the
// Interrupt hook, after the alert alertID; api.ErrNotFound when this node
// has no pane for it.
func (s *Server) pressLocal(ctx context.Context, agent, alertID string) error {
	if s.opts.Interrupt == nil {
		return fmt.Errorf("node runs no watcher with a terminal pane for %s: %w", agent, api.ErrNotFound)
	}
	if err := s.opts.Interrupt(ctx, agent); err != nil {
		return fmt.Errorf("ESC to %s's pane: %w", agent, err)
	}
	s.opts.Logger.Info("interrupted agent", "agent", agent, "alert", alertID)
	return nil
}
