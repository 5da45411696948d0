package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Approval returns approval id with its decisions (Decisions, oldest
// first, the approvals a modify voided marked Voided), or a
// *NotFoundError.
func (f *FSM) Approval(id string) (*api.Approval, error) {
	var ap *api.Approval
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		if ap, err = approvalByID(tx, id); err != nil {
			return err
		}
		hist, err := approvalHistory(tx, ap.Seq)
		ap.Decisions = decisionsOf(hist)
		return err
	})
	return ap, err
}

// Approvals returns a page of approvals in creation order, with Seq >
// q.After, that match every filter of q, without their decisions.
// Approver matches the approvals that list the agent by id or by its
// registered role. Limit ≤ 0 means DefaultPageLimit; it is capped at
// MaxPageLimit.
//
// It reads one index range (two, merged, for an approver: its id and its
// role) and the approvals in it: that of the approver, else of the
// requester, else of the state, else the approvals themselves; the other
// filters are checked on each approval read.
func (f *FSM) Approvals(q api.ApprovalQuery) (api.ApprovalPage, error) {
	page := api.ApprovalPage{Approvals: []*api.Approval{}}
	if err := q.Validate(); err != nil {
		return page, err
	}
	err := f.view(func(tx *bbolt.Tx) error {
		var next func() (uint64, bool)
		var who *api.Agent
		switch {
		case q.Approver != "":
			var err error
			if who, err = loadAgent(tx, q.Approver); err != nil {
				return fmt.Errorf("fsm: approvals: %w", err)
			}
			next = approverSeqsAfter(tx, aidxApprover, q.Approver, who, q.After)
		case q.From != "":
			next = approvalSeqsAfter(tx, aidxFrom, q.From, q.After)
		case q.State != "":
			next = approvalSeqsAfter(tx, aidxState, string(q.State), q.After)
		default:
			next = approvalSeqsAfter(tx, 0, "", q.After)
		}
		match := func(ap *api.Approval) bool {
			return (q.State == "" || ap.State == q.State) && (q.From == "" || ap.From == q.From) &&
				(q.Approver == "" || MayDecide(q.Approver, who, ap))
		}
		var err error
		page.Approvals, page.HasMore, err = seqPage(next, q.Limit,
			func(seq uint64) (*api.Approval, error) { return getApproval(tx, seq) }, match)
		if err != nil {
			return fmt.Errorf("fsm: approvals: %w", err)
		}
		return nil
	})
	return page, err
}

// PendingApprovalsFor is how many pending approvals agent may decide (by
// id or its registered role) and has not decided on their current action:
// the status line's "🔐 N to approve". It reads the pending approvals
// that list the agent or its role, and their histories.
func (f *FSM) PendingApprovalsFor(agent string) (int, error) {
	if !api.ValidName(agent) {
		return 0, api.NameError("agent", agent)
	}
	n := 0
	err := f.view(func(tx *bbolt.Tx) error {
		who, err := loadAgent(tx, agent)
		if err != nil {
			return fmt.Errorf("fsm: pending approvals: %w", err)
		}
		next := approverSeqsAfter(tx, aidxPending, agent, who, 0)
	seqs:
		for seq, ok := next(); ok; seq, ok = next() {
			hist, err := approvalHistory(tx, seq)
			if err != nil {
				return fmt.Errorf("fsm: pending approvals: %w", err)
			}
			for _, ev := range liveDecisions(hist) {
				if ev.Actor == agent {
					continue seqs
				}
			}
			n++
		}
		return nil
	})
	return n, err
}

// approvalSeqsAfter yields, in order, the seqs above after under kind ‖
// name ‖ 0x00 in approval_index, or (kind 0) of every approval.
func approvalSeqsAfter(tx *bbolt.Tx, kind byte, name string, after uint64) func() (uint64, bool) {
	if kind == 0 {
		return keySeqsAfter(tx.Bucket(bucketApprovals), nil, after)
	}
	return indexSeqsAfter(tx.Bucket(bucketApprovalIndex), kind, name, after)
}

// approverSeqsAfter yields, in order and once each, the seqs above after
// under kind (the approver or pending keys) for agent and for its
// registered role (who; nil: none): two ranges merged.
func approverSeqsAfter(tx *bbolt.Tx, kind byte, agent string, who *api.Agent, after uint64) func() (uint64, bool) {
	byID := indexSeqsAfter(tx.Bucket(bucketApprovalIndex), kind, agent, after)
	if who == nil {
		return byID
	}
	byRole := indexSeqsAfter(tx.Bucket(bucketApprovalIndex), kind, api.RolePrefix+who.Role, after)
	a, aok := byID()
	b, bok := byRole()
	return func() (uint64, bool) {
		switch {
		case !aok && !bok:
			return 0, false
		case aok && (!bok || a < b):
			s := a
			a, aok = byID()
			return s, true
		case bok && (!aok || b < a):
			s := b
			b, bok = byRole()
			return s, true
		}
		s := a // listed by id and by role: once
		a, aok = byID()
		b, bok = byRole()
		return s, true
	}
}

// ApprovalEvents returns the approval updates of the entries after index
// after, oldest first, as TaskEvents does for tasks (the same page rule:
// whole entries only, at least limit updates unless the end comes first;
// ≤ 0: DefaultPageLimit; capped at MaxPageLimit). The stream interleaves
// them with the messages and task updates by Event.Seq.
func (f *FSM) ApprovalEvents(after uint64, limit int) (api.ApprovalUpdatePage, error) {
	page := api.ApprovalUpdatePage{Updates: []api.ApprovalUpdate{}}
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		page.Updates, page.HasMore, err = objectEvents(tx, bucketApprovalEvents, after, limit,
			func(seq, index uint64, v []byte) (api.ApprovalUpdate, error) {
				return approvalUpdate(tx, seq, index, v)
			})
		if err != nil {
			return fmt.Errorf("fsm: approval events: %w", err)
		}
		return nil
	})
	return page, err
}

// approvalUpdate builds the update of approval seq at entry index from its
// stored snapshot v: the event from the history, the context (it never
// changes) from the approval.
func approvalUpdate(tx *bbolt.Tx, seq, index uint64, v []byte) (api.ApprovalUpdate, error) {
	var u api.ApprovalUpdate
	var snap api.Approval
	if err := json.Unmarshal(v, &snap); err != nil {
		return u, fmt.Errorf("approval at seq %d, index %d: decode: %w", seq, index, err)
	}
	cur, err := getApproval(tx, seq)
	if err != nil {
		return u, err
	}
	snap.Context = cur.Context
	if u.Event, err = approvalEventAt(tx, seq, index); err != nil {
		return u, err
	}
	u.Approval = &snap
	return u, nil
}

// ApprovalCount is the number of approvals in state st, counted from the
// state index (a read for the node's metrics).
func (f *FSM) ApprovalCount(st api.ApprovalState) (int, error) {
	var n int
	err := f.view(func(tx *bbolt.Tx) error {
		n = countSeqs(indexSeqsAfter(tx.Bucket(bucketApprovalIndex), aidxState, string(st), 0))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fsm: approval count: %w", err)
	}
	return n, nil
}
