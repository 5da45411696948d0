package transporttest

import (
	"encoding/json"
	"sync"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Approvals: what transport and its clients do with approvals (routes,
// admission, the wire, the stream, maosctl's verbs) is tested apart from
// what the state machine decides (quorum, stale hashes, who may decide),
// which fsm's tests cover. ApprovalReads answers the approval queries
// from what a test puts in; AnswerApprovals makes Apply answer the
// approval ops as the test says.

// ApprovalReads is a transport.Reader that answers the approval queries
// (Approval, Approvals, PendingApprovalsFor, ApprovalEvents) from what a
// test put in, and every other read from the Reader it wraps. Safe for
// concurrent use.
type ApprovalReads struct {
	transport.Reader
	mu        sync.Mutex
	approvals map[string]*api.Approval
	order     []string
	events    []api.ApprovalUpdate
	pending   map[string]int
	queries   []api.ApprovalQuery
}

// NewApprovalReads wraps r, with no approvals.
func NewApprovalReads(r transport.Reader) *ApprovalReads {
	return &ApprovalReads{Reader: r, approvals: map[string]*api.Approval{}, pending: map[string]int{}}
}

// Put stores a (replacing the approval of its id) for Approval and
// Approvals, which list in the order of first Put.
func (r *ApprovalReads) Put(a *api.Approval) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.approvals[a.ID]; !ok {
		r.order = append(r.order, a.ID)
	}
	r.approvals[a.ID] = a
}

// Event adds an update of a made by the entry at index (its event says
// a's state, by a's requester), for ApprovalEvents; add them in index
// order. A stream sends it once the state has applied index.
func (r *ApprovalReads) Event(index uint64, a api.Approval) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := api.ApprovalEvent{Seq: index, Actor: a.From, Event: string(a.State), State: a.State, ActionHash: a.ActionHash}
	r.events = append(r.events, api.ApprovalUpdate{Event: ev, Approval: &a})
}

// SetPending makes PendingApprovalsFor(agent) answer n.
func (r *ApprovalReads) SetPending(agent string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[agent] = n
}

// Queries are the queries Approvals received, in order.
func (r *ApprovalReads) Queries() []api.ApprovalQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.ApprovalQuery(nil), r.queries...)
}

// Approval returns the approval Put under id, or a *api.NotFoundError.
func (r *ApprovalReads) Approval(id string) (*api.Approval, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.approvals[id]; ok {
		return a, nil
	}
	return nil, &api.NotFoundError{What: "approval " + id}
}

// Approvals records q and returns every approval Put, whatever q asks.
func (r *ApprovalReads) Approvals(q api.ApprovalQuery) (api.ApprovalPage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, q)
	page := api.ApprovalPage{}
	for _, id := range r.order {
		page.Approvals = append(page.Approvals, r.approvals[id])
	}
	return page, nil
}

// PendingApprovalsFor answers what SetPending set (0 by default).
func (r *ApprovalReads) PendingApprovalsFor(agent string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[agent], nil
}

// ApprovalEvents returns the events after index after, whole entries, at
// least limit updates a page when there are more, as fsm's pages do.
func (r *ApprovalReads) ApprovalEvents(after uint64, limit int) (api.ApprovalUpdatePage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	page := api.ApprovalUpdatePage{Updates: []api.ApprovalUpdate{}}
	for _, u := range r.events {
		if u.Event.Seq <= after {
			continue
		}
		if n := len(page.Updates); n >= limit && page.Updates[n-1].Event.Seq != u.Event.Seq {
			page.HasMore = true
			break
		}
		page.Updates = append(page.Updates, u)
	}
	return page, nil
}

// ApprovalNode is a Service whose state reads go through Reads.
type ApprovalNode struct {
	*Service
	Reads *ApprovalReads
}

// WithApprovalReads is s served with an ApprovalReads over its state.
func WithApprovalReads(s *Service) ApprovalNode {
	return ApprovalNode{Service: s, Reads: NewApprovalReads(s.State())}
}

// State is Reads.
func (n ApprovalNode) State() transport.Reader { return n.Reads }

// AnswerApprovals makes Apply answer the approval ops (request, decide,
// cancel) with fn(op, body as JSON), and apply every other command as
// before; it replaces any OnApply.
func (s *Service) AnswerApprovals(fn func(op api.Op, body json.RawMessage) (any, error)) {
	s.OnApply(func(op api.Op, body json.RawMessage) (any, error) {
		switch op {
		case api.OpApprovalRequest, api.OpApprovalDecide, api.OpApprovalCancel:
			return fn(op, body)
		}
		return s.ApplyCommand(op, body)
	})
}

// PendingResult is an answer for AnswerApprovals: every approval op
// answers a pending approval of the command's id, its hash the command's
// action's (none: ""), seq 7.
func PendingResult(op api.Op, body json.RawMessage) (any, error) {
	var cmd struct {
		ID     string          `json:"id"`
		Quorum int             `json:"quorum"`
		Action json.RawMessage `json:"action"`
	}
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, err
	}
	h, _ := api.ActionHash(cmd.Action)
	return api.ApprovalResult{ID: cmd.ID, Seq: 7, State: api.ApprovalPending, ActionHash: h, Quorum: max(cmd.Quorum, 1)}, nil
}
