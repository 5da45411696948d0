package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Approvals in the state file: typed accessors over the approval buckets,
// as task_store.go is for tasks.
//
//	approvals:          approval seq (8) → Approval JSON (no decisions)
//	approval_ids:       approval id → seq (8) ‖ SHA-256 of the request (32)
//	approval_index:     one kind byte, then:
//	    's' state ‖ 0x00 ‖ seq (8)             approvals by state
//	    'f' from ‖ 0x00 ‖ seq (8)              approvals by requester
//	    'a' approver ‖ 0x00 ‖ seq (8)          approvals by listed approver (an id or role:NAME), as written
//	    'p' approver ‖ 0x00 ‖ seq (8)          the same, pending approvals only
//	    'd' deadline (8, Unix ns) ‖ seq (8)    pending approvals by deadline
//	approval_history:   approval seq (8) ‖ entry index (8) → ApprovalEvent JSON
//	approval_events:    entry index (8) ‖ approval seq (8) → the approval after
//	                    the entry (Approval JSON without context and decisions)
//
// An approval's seq is the index of the entry that opened it, so lists come
// in creation order. An entry makes at most one event per approval, which
// keys approval_history and approval_events as task_history and
// task_events are keyed. Index values are empty; the keys of an approval
// are derived from its record (putApproval). The buckets are empty until
// the first approval, so a state without approvals holds the same bytes
// as before they existed.

// Index key kinds of bucketApprovalIndex.
const (
	aidxState    = 's'
	aidxFrom     = 'f'
	aidxApprover = 'a'
	aidxPending  = 'p'
	aidxDeadline = 'd'
)

// approvalKeys is what moves in approval_index when an approval changes
// (its requester and approvers never change).
type approvalKeys struct {
	state    api.ApprovalState
	deadline int64 // pending only; 0: none
}

func approvalKeysOf(ap *api.Approval) approvalKeys {
	k := approvalKeys{state: ap.State}
	if ap.State == api.ApprovalPending {
		k.deadline = ap.Deadline.UnixNano()
	}
	return k
}

// index writes (put) or deletes (!put) the moving keys k of ap.
func (k approvalKeys) index(b *bbolt.Bucket, ap *api.Approval, put bool) {
	set := func(key []byte) {
		if put {
			mustPut(b, key, nil)
		} else {
			mustDelete(b, key)
		}
	}
	if k.state == "" {
		return
	}
	set(taskIndexKey(aidxState, string(k.state), ap.Seq))
	if k.state == api.ApprovalPending {
		for _, a := range ap.Approvers {
			set(taskIndexKey(aidxPending, a, ap.Seq))
		}
		set(taskPairKey(aidxDeadline, uint64(k.deadline), ap.Seq))
	}
}

// getApproval reads the approval stored at seq.
func getApproval(tx *bbolt.Tx, seq uint64) (*api.Approval, error) {
	return getRecord[api.Approval](tx.Bucket(bucketApprovals), seq, "approval")
}

// getApprovalID reads the approval_ids record of id (readIDRecord).
func getApprovalID(tx *bbolt.Tx, id string) (idRecord, bool) {
	return readIDRecord(tx.Bucket(bucketApprovalIDs), id)
}

// approvalByID reads approval id, or a *NotFoundError naming it.
func approvalByID(tx *bbolt.Tx, id string) (*api.Approval, error) {
	return objectByID(tx, bucketApprovalIDs, id, getApproval, ApprovalNotFound)
}

// ApprovalNotFound is the *NotFoundError for approval id.
func ApprovalNotFound(id string) error { return notFound("approval %s", id) }

// requestSum is the SHA-256 of a request as applied, so a retry of the
// same request matches and another under the same id does not. The
// known_names flag is not the approval's: a retry through a node of
// another build is the same request.
func requestSum(c *api.ApprovalRequestCommand) [32]byte {
	k := *c
	k.KnownNames = false
	return commandSum(&k, "approval "+c.ID, "request")
}

// addApprovalID records the id of a new approval ap (its seq set), opened
// by a request hashing to sum, and its keys that never move.
func addApprovalID(tx *bbolt.Tx, ap *api.Approval, sum [32]byte) {
	writeIDRecord(tx.Bucket(bucketApprovalIDs), ap.ID, idRecord{seq: ap.Seq, sum: sum})
	idx := tx.Bucket(bucketApprovalIndex)
	mustPut(idx, taskIndexKey(aidxFrom, ap.From, ap.Seq), nil)
	for _, a := range ap.Approvers {
		mustPut(idx, taskIndexKey(aidxApprover, a, ap.Seq), nil)
	}
}

// putApproval writes ap after a transition: its record (without
// decisions), its keys moved from before (the zero approvalKeys for a new
// approval), and ev (its state set from ap) in its history and in the
// stream's index.
func putApproval(tx *bbolt.Tx, before approvalKeys, ap *api.Approval, ev api.ApprovalEvent) {
	ap.Updated = ev.Time
	ap.Decisions = nil
	ev.State = ap.State
	data, err := json.Marshal(ap)
	if err != nil {
		panic(fmt.Sprintf("fsm: approval %s: encode: %v", ap.ID, err))
	}
	mustPut(tx.Bucket(bucketApprovals), u64(ap.Seq), data)
	if after := approvalKeysOf(ap); after != before {
		idx := tx.Bucket(bucketApprovalIndex)
		before.index(idx, ap, false)
		after.index(idx, ap, true)
	}
	snap := *ap
	snap.Context = nil
	putObjectEvent(tx, bucketApprovalHistory, bucketApprovalEvents, "approval", ap.ID, ap.Seq, ev.Seq, ev, &snap)
}

// approvalHistory reads the events of approval seq, oldest first.
func approvalHistory(tx *bbolt.Tx, seq uint64) ([]api.ApprovalEvent, error) {
	return objectHistory[api.ApprovalEvent](tx, bucketApprovalHistory, "approval", seq)
}

// approvalEventAt reads the event of approval seq at entry index.
func approvalEventAt(tx *bbolt.Tx, seq, index uint64) (api.ApprovalEvent, error) {
	return objectEventAt[api.ApprovalEvent](tx, bucketApprovalHistory, "approval", seq, index)
}

// approvalsDueBy lists the seqs of the pending approvals whose deadline is
// at or before ts, earliest first.
func approvalsDueBy(tx *bbolt.Tx, ts int64) []uint64 {
	return pairSeqsUpTo(tx.Bucket(bucketApprovalIndex), aidxDeadline, ts)
}

// firstApprovalDeadline is the earliest deadline of a pending approval.
func firstApprovalDeadline(tx *bbolt.Tx) (int64, bool) {
	return firstPairAt(tx.Bucket(bucketApprovalIndex), aidxDeadline)
}

// liveDecisions are the decisions of history that count on the current
// action: those after its last modify (the modify itself voids the
// approvals before it).
func liveDecisions(hist []api.ApprovalEvent) []api.ApprovalEvent {
	start := 0
	for i, ev := range hist {
		if ev.Event == api.DecisionModify {
			start = i + 1
		}
	}
	var out []api.ApprovalEvent
	for _, ev := range hist[start:] {
		if isDecision(ev.Event) {
			out = append(out, ev)
		}
	}
	return out
}

func isDecision(event string) bool {
	return event == api.DecisionApprove || event == api.DecisionReject || event == api.DecisionModify
}

// decisionsOf are the decisions in hist, in order, the approvals a later
// modify voided marked Voided.
func decisionsOf(hist []api.ApprovalEvent) []api.ApprovalDecision {
	lastModify := -1
	for i, ev := range hist {
		if ev.Event == api.DecisionModify {
			lastModify = i
		}
	}
	out := []api.ApprovalDecision{}
	for i, ev := range hist {
		if !isDecision(ev.Event) {
			continue
		}
		out = append(out, api.ApprovalDecision{Seq: ev.Seq, Time: ev.Time, Approver: ev.Actor, Decision: ev.Event,
			ActionHash: ev.ActionHash, Comment: ev.Comment, Action: ev.Action,
			Voided: ev.Event == api.DecisionApprove && i < lastModify})
	}
	return out
}

// unixUTC is a Unix-ns time as a stored time.
func unixUTC(ns int64) time.Time { return time.Unix(0, ns).UTC() }
