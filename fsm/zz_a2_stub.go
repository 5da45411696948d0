package fsm

import (
	"encoding/json"
	"time"
)

// TEMPORARY: stands in for a1-fsm's approval queries and their types (the
// same names, signatures and fields as a1-fsm's fsm/approval_query.go) so
// that transport and maosctl build; the lead deletes this file when
// a1-fsm merges.

type ApprovalEvent struct {
	Seq        uint64          `json:"seq"`
	Time       time.Time       `json:"time"`
	Actor      string          `json:"actor"`
	Event      string          `json:"event"`
	State      ApprovalState   `json:"state"`
	ActionHash string          `json:"action_hash"`
	Comment    string          `json:"comment,omitempty"`
	Action     json.RawMessage `json:"action,omitempty"`
}

type ApprovalUpdate struct {
	Event    ApprovalEvent `json:"event"`
	Approval *Approval     `json:"approval"`
}

type ApprovalUpdatePage struct {
	Updates []ApprovalUpdate `json:"updates"`
	HasMore bool             `json:"has_more"`
}

func (f *FSM) Approval(id string) (*Approval, error)           { return nil, notFound("approval %s", id) }
func (f *FSM) Approvals(q ApprovalQuery) (ApprovalPage, error) { return ApprovalPage{}, nil }
func (f *FSM) PendingApprovalsFor(agent string) (int, error)   { return 0, nil }
func (f *FSM) ApprovalEvents(after uint64, limit int) (ApprovalUpdatePage, error) {
	return ApprovalUpdatePage{Updates: []ApprovalUpdate{}}, nil
}
