package transport

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/maos-project/maos/api"
)

// The mailbox endpoints: the agent registry, inboxes and read marks,
// threads and delivery receipts.
//
//	POST   /v1/agents                     register (body api.RegisterAgentCommand) → api.Agent
//	GET    /v1/agents?role=&capability=&after=&limit=  → api.AgentPage
//	GET    /v1/agents/{id}                → api.Agent
//	GET    /v1/agents/{id}/a2a            → api.A2ARemote, its credential included (admin only)
//	DELETE /v1/agents/{id}                unregister → the removed api.Agent
//	GET    /v1/roles                      → RolesResponse (role → agents)
//	GET    /v1/agents/{id}/inbox?unread=&priority=&type=&from=&after=&limit= → api.InboxPage
//	GET    /v1/agents/{id}/inbox/counts   → api.InboxCounts
//	POST   /v1/agents/{id}/read           body MarkReadRequest → api.MarkReadResult
//	PUT    /v1/agents/{id}/receipts/{msg} body ReceiptStateRequest → api.Receipt
//	GET    /v1/threads/{id}?after=&limit= → api.ThreadPage
//	GET    /v1/messages/{id}/receipts     → api.Receipts
//
// Reads take ?consistency=strong like every read.

// pathAgent is the {id} of the path, checked as an agent id.
func pathAgent(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !api.ValidName(id) {
		return "", api.NameError("agent", id)
	}
	return id, nil
}

// queryAgent answers a read about the agent the path names (pathAgent's
// check first, then query's).
func queryAgent[T any](s *Server, w http.ResponseWriter, r *http.Request, read func(st Reader, agent string) (T, error)) {
	agent, err := pathAgent(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return read(st, agent) })
}

// checkParams refuses query parameters other than known (and consistency),
// so a misspelt filter is an error rather than a silently wider answer.
func checkParams(q url.Values, known ...string) error {
	for k := range q {
		if k != "consistency" && !slices.Contains(known, k) {
			return fmt.Errorf("%w: unknown query parameter %q; this endpoint takes %s and consistency",
				api.ErrBadRequest, k, strings.Join(known, ", "))
		}
	}
	return nil
}

// pageParams reads a page's ?after= (a seq, default 0) and ?limit= (see
// pageLimit).
func pageParams(q url.Values) (after uint64, limit int, err error) {
	if after, err = uintParam(q.Get("after"), "after", 0, 1<<63); err != nil {
		return 0, 0, err
	}
	limit, err = pageLimit(q)
	return after, limit, err
}

// pageLimit reads ?limit= (1..MaxPageLimit, default DefaultPageLimit).
func pageLimit(q url.Values) (int, error) {
	limit, err := uintParam(q.Get("limit"), "limit", api.DefaultPageLimit, api.MaxPageLimit)
	if err != nil {
		return 0, err
	}
	if limit == 0 {
		return 0, fmt.Errorf("%w: limit: must be 1..%d", api.ErrBadRequest, api.MaxPageLimit)
	}
	return int(limit), nil
}

// agentRegister is POST /v1/agents: the agent registers itself (or an
// admin registers it); who grants a role or a capability is decided once,
// by mayRegister, after an omitted role became the token's grant.
var agentRegister = writeSpec[api.RegisterAgentCommand, *api.RegisterAgentCommand]{op: api.OpRegisterAgent,
	bind: func(r *http.Request, c *api.RegisterAgentCommand) error {
		if id := IdentityFrom(r.Context()); c.Role == "" && id != nil && id.AgentRole != "" {
			c.Role = id.AgentRole
		}
		return nil
	},
	actor:     func(c *api.RegisterAgentCommand) (string, string) { return "id", c.ID },
	authorize: mayRegister,
}

func (s *Server) unregisterAgent(w http.ResponseWriter, r *http.Request) {
	id, err := pathAgent(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: id})
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	queryAgent(s, w, r, Reader.Agent)
}

// getAgentA2A serves an A2A remote's URL and credential to an admin
// token (the route's rule): what maosd's relay (a2arelay) needs to call
// the remote. No other read carries the credential.
func (s *Server) getAgentA2A(w http.ResponseWriter, r *http.Request) {
	queryAgent(s, w, r, Reader.AgentA2A)
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := checkParams(q, "role", "capability", "after", "limit"); err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := pageLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	aq := api.AgentQuery{Role: q.Get("role"), Capability: q.Get("capability"), After: q.Get("after"), Limit: limit}
	if err := aq.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.Agents(aq) })
}

func (s *Server) roles(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) {
		roles, err := st.Roles()
		return api.RolesResponse{Roles: roles}, err
	})
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	agent, err := pathAgent(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	if err := checkParams(q, "unread", "priority", "type", "from", "after", "before", "order", "limit"); err != nil {
		s.writeError(w, r, err)
		return
	}
	iq := api.InboxQuery{Priority: api.Priority(q.Get("priority")), Type: q.Get("type"), From: q.Get("from")}
	switch o := q.Get("order"); o {
	case "", "oldest":
	case "newest":
		iq.Newest = true
	default:
		s.writeError(w, r, fmt.Errorf("%w: order: %q is not oldest or newest", api.ErrBadRequest, o))
		return
	}
	if iq.Before, err = uintParam(q.Get("before"), "before", 0, 1<<63); err != nil {
		s.writeError(w, r, err)
		return
	}
	if v := q.Get("unread"); v != "" {
		if iq.Unread, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, fmt.Errorf("%w: unread: %q is not true or false", api.ErrBadRequest, v))
			return
		}
	}
	if iq.After, err = uintParam(q.Get("after"), "after", 0, 1<<63); err != nil {
		s.writeError(w, r, err)
		return
	}
	if iq.Limit, err = pageLimit(q); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := iq.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) {
		page, err := st.Inbox(agent, iq)
		return visibleInbox(viewerFrom(r.Context()), page), err
	})
}

// agentSummary serves what a status line shows in one request: the inbox
// counters (zero for an agent with no inbox), the pending approvals it
// may decide, and the bulletin.
func (s *Server) agentSummary(w http.ResponseWriter, r *http.Request) {
	queryAgent(s, w, r, func(st Reader, agent string) (any, error) {
		out := api.AgentSummary{Agent: agent, HasInbox: true}
		counts, err := st.InboxCounts(agent)
		switch {
		case errors.Is(err, api.ErrNotFound):
			out.HasInbox = false
		case err != nil:
			return nil, err
		default:
			out.Counts = counts
		}
		if out.PendingApprovals, err = st.PendingApprovalsFor(agent); err != nil {
			return nil, err
		}
		if out.Bulletin, err = st.Bulletin(); err != nil {
			return nil, err
		}
		return out, nil
	})
}

func (s *Server) inboxCounts(w http.ResponseWriter, r *http.Request) {
	queryAgent(s, w, r, Reader.InboxCounts)
}

func (s *Server) markRead(w http.ResponseWriter, r *http.Request) {
	agent, err := pathAgent(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.MarkReadRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := api.MarkReadCommand{Agent: agent, ID: req.ID, Upto: req.Upto}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpMarkRead, cmd)
}

func (s *Server) receiptState(w http.ResponseWriter, r *http.Request) {
	agent, err := pathAgent(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.ReceiptStateRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := api.ReceiptStateCommand{ID: r.PathValue("msg"), Agent: agent, State: req.State}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpReceiptState, cmd)
}

func (s *Server) thread(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := checkParams(q, "after", "limit"); err != nil {
		s.writeError(w, r, err)
		return
	}
	after, limit, err := pageParams(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	s.query(w, r, func(st Reader) (any, error) { return visibleThread(st, viewerFrom(r.Context()), id, after, limit) })
}

func (s *Server) receipts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.query(w, r, func(st Reader) (any, error) { return visibleReceipts(st, viewerFrom(r.Context()), id) })
}

// cursor serves GET /v1/agents/{id}/cursor: the seq of the last message the
// agent's watcher handled.
func (s *Server) cursor(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !api.ValidName(id) {
		s.writeError(w, r, api.NameError("id", id))
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.CursorOf(id) })
}

// setCursor serves PUT /v1/agents/{id}/cursor, body {"seq":N}; the cursor
// never moves back.
// cursorSet is PUT /v1/agents/{id}/cursor: a watcher's cursor, the
// agent the path's (the route's rule admits it).
var cursorSet = writeSpec[api.SetCursorCommand, *api.SetCursorCommand]{op: api.OpSetCursor,
	bind: pathAgentInto(func(c *api.SetCursorCommand) *string { return &c.Agent })}
