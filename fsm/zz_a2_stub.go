package fsm

// TEMPORARY: stands in for a1-fsm's approval queries (the same
// signatures) so that transport and maosctl build; the lead deletes this
// file when a1-fsm merges.

type ApprovalUpdate struct {
	Event    ApprovalDecision `json:"event"`
	Approval *Approval        `json:"approval"`
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
