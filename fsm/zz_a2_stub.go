package fsm

// TEMPORARY (uncommitted): stands in for A1's queries until a1-fsm lands.

type ApprovalUpdate struct {
	Event    ApprovalDecision `json:"event"`
	Approval *Approval        `json:"approval"`
}

func (f *FSM) Approval(id string) (*Approval, error)                { return nil, ErrNotFound }
func (f *FSM) Approvals(q ApprovalQuery) (ApprovalPage, error)      { return ApprovalPage{}, nil }
func (f *FSM) PendingApprovalsFor(agent string) (int, error)        { return 0, nil }
