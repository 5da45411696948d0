package transport

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/maos-project/maos/api"
)

// The approval endpoints (fsm/approval.go has the lifecycle and the
// fields):
//
//	POST /v1/approvals                 api.ApprovalRequestCommand → api.ApprovalResult {id, seq, state, action_hash, approvals, quorum}
//	GET  /v1/approvals?state=&approver=&from=&after=&limit= → api.ApprovalPage {approvals, has_more}
//	GET  /v1/approvals/{id}            api.Approval, with its decisions
//	POST /v1/approvals/{id}/decide     {approver, decision, action_hash, comment, action} → api.Approval, with its decisions
//	POST /v1/approvals/{id}/cancel     {from, reason} → api.ApprovalResult
//
// A body may repeat the path's id as "id"; another id is 400. Every write
// is normalized and validated (400 naming the field and the limit),
// admitted for the agent it acts as (from for a request and a cancel,
// approver for a decision: a token acts only for its own agent, an admin
// for anyone), its text scanned for secrets (title, approval_needed_for,
// rationale, comment, reason and the action's JSON) and proposed. The
// state machine decides the rest: 403 for an approver the approval does
// not list or a cancel by another than the requester; 409 for an
// approval that is no longer pending, a decision on a hash that is no
// longer the action's, or an approver deciding twice on the same hash;
// 404 for an unknown approval.

// maxApprovalBody caps an approval request: an action and a context at
// their 64 KiB limits, with room for the text fields; small enough that
// the entry a follower forwards stays under the forwarded ceiling.
const maxApprovalBody = 256 << 10

// approvalBodyWhy ends an approval request's 413.
const approvalBodyWhy = " (an approval's action is at most 64 KiB of canonical JSON)"

// The approval writes, each one command through the one pipeline
// (pipeline.go).
var (
	approvalRequest = writeSpec[api.ApprovalRequestCommand, *api.ApprovalRequestCommand]{op: api.OpApprovalRequest,
		actor:  func(c *api.ApprovalRequestCommand) (string, string) { return "from", c.From },
		answer: answerApproval}
	approvalDecide = writeSpec[api.ApprovalDecideCommand, *api.ApprovalDecideCommand]{op: api.OpApprovalDecide,
		bind:   pathID("approval", func(c *api.ApprovalDecideCommand) *string { return &c.ID }),
		actor:  func(c *api.ApprovalDecideCommand) (string, string) { return "approver", c.Approver },
		answer: answerDecided}
	approvalCancel = writeSpec[api.ApprovalCancelCommand, *api.ApprovalCancelCommand]{op: api.OpApprovalCancel,
		bind:   pathID("approval", func(c *api.ApprovalCancelCommand) *string { return &c.ID }),
		actor:  func(c *api.ApprovalCancelCommand) (string, string) { return "from", c.From },
		answer: answerApproval}
)

// answerDecided answers a decision with the approval and its decisions,
// as of a strong read after the decision: on a follower that forwarded
// it, the local state may not have applied it yet.
func answerDecided(s *Server, w http.ResponseWriter, r *http.Request, op api.Op, raw json.RawMessage) {
	var res api.ApprovalResult
	if err := json.Unmarshal(raw, &res); err != nil || !approvalDone(res) {
		s.writeError(w, r, fmt.Errorf("transport: unexpected %s result %.200s (%v)", op, raw, err))
		return
	}
	if err := s.prop.Linearize(r.Context(), api.Strong); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.state.Approval(res.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.query(w, r, func(st Reader) (any, error) { return st.Approval(id) })
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	q, err := approvalQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) {
		page, err := st.Approvals(q)
		if err == nil && page.Approvals == nil {
			page.Approvals = []*api.Approval{}
		}
		return page, err
	})
}

// approvalQuery reads GET /v1/approvals' parameters; an unknown or bad
// one is 400 naming it.
func approvalQuery(r *http.Request) (api.ApprovalQuery, error) {
	v := r.URL.Query()
	if err := checkParams(v, "state", "approver", "from", "after", "limit"); err != nil {
		return api.ApprovalQuery{}, err
	}
	q := api.ApprovalQuery{State: api.ApprovalState(v.Get("state")), Approver: v.Get("approver"), From: v.Get("from")}
	if q.State != "" && !slices.Contains(api.ApprovalStates, q.State) {
		return q, &api.FieldError{Field: "state", Reason: fmt.Sprintf("%q: want one of %v", q.State, api.ApprovalStates)}
	}
	for _, f := range []struct{ name, v string }{{"approver", q.Approver}, {"from", q.From}} {
		if f.v != "" && !api.ValidName(f.v) {
			return q, api.NameError(f.name, f.v)
		}
	}
	var err error
	q.After, q.Limit, err = pageParams(v)
	return q, err
}

// Seed 004's approval request on POST /v1/messages (dialect.MapApproval).

// ApprovalMessageResponse answers a seed 004 hitl_approval_request posted
// to POST /v1/messages: Action "requested" and the approval's result.
type ApprovalMessageResponse struct {
	Action string `json:"action"`
	api.ApprovalResult
}

// ApprovalActionRequested is the Action of an ApprovalMessageResponse.
const ApprovalActionRequested = "requested"

// sendApproval serves a seed 004 hitl_approval_request as POST
// /v1/approvals serves a request; the sender (from_agent) is admitted as
// any sender.
func (s *Server) sendApproval(w http.ResponseWriter, r *http.Request, cmd api.ApprovalRequestCommand) {
	spec := approvalRequest
	spec.answer = answerAs(approvalDone, func(res api.ApprovalResult) any {
		return ApprovalMessageResponse{Action: ApprovalActionRequested, ApprovalResult: res}
	})
	spec.serve(s, w, r, &cmd)
}
