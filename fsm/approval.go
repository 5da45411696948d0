package fsm

import (
	"github.com/maos-project/maos/api"
)

// Approvals: k-of-n human decisions bound to the exact action.
//
// An approval is requested by an agent (or a task's completion with status
// requires_approval, or a coding agent's gated tool call) for a proposed
// action: any JSON. Its ActionHash is "sha256:" and the hex SHA-256 of the
// action's canonical JSON (CanonicalJSON), computed at apply. A decision
// names the hash it was made on, so nobody approves something other than
// what they saw: a decision on another hash is refused (409). The shape
// comes from seed 004's hitl_approval_request (approval_needed_for,
// proposed_action, rationale, confidence, timeout_hours, approve / reject /
// modify, approvers_tagged); maos adds the quorum and the hash.
//
//	pending ──(quorum distinct approvals)──▶ approved
//	   │ ──(one reject)──────────────────▶ rejected
//	   │ ──(deadline; on_timeout reject)──▶ expired
//	   │ ──(deadline; on_timeout escalate: the escalation target is
//	   │    notified and the deadline moves one timeout on; the next
//	   │    deadline expires it)
//	   │ ──(cancel, by its requester)─────▶ cancelled
//	   └─(modify: the action is replaced, a new hash; the approvals so far
//	      are void; still pending)
//
// Each approver counts once per action: a second decision by the same
// approver on the same hash is refused (409); after a modify, everyone may
// decide again. Only a listed approver (by id, or by its registered role
// for "role:NAME") may decide (403).
//
// Time. Deadlines are entry times, like task leases: the leader's tick
// expires or escalates every approval whose deadline is at or before the
// tick's time; nothing in apply reads a clock.

// ApprovalPage is one page of an approval list.
type ApprovalPage struct {
	Approvals []*api.Approval `json:"approvals"`
	HasMore   bool            `json:"has_more"`
}
