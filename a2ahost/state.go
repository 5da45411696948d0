package a2ahost

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// Refused is the maos state a task the rules refused would have had: it is
// never stored (the create is refused, no task exists), but SendMessage
// answers it as an A2A task in TASK_STATE_REJECTED, so the one mapping
// below covers it too.
const Refused api.TaskState = "refused"

// State maps a maos task state to its A2A state, one to one:
// waiting/ready → SUBMITTED, running → WORKING, awaiting_approval →
// INPUT_REQUIRED, succeeded → COMPLETED, failed → FAILED, cancelled →
// CANCELED, Refused → REJECTED. Any other value (a state a newer node
// added) is TASK_STATE_UNSPECIFIED.
func State(s api.TaskState) a2a.TaskState {
	switch s {
	case api.TaskWaiting, api.TaskReady:
		return a2a.TaskStateSubmitted
	case api.TaskRunning:
		return a2a.TaskStateWorking
	case api.TaskAwaitingApproval:
		return a2a.TaskStateInputRequired
	case api.TaskSucceeded:
		return a2a.TaskStateCompleted
	case api.TaskFailed:
		return a2a.TaskStateFailed
	case api.TaskCancelled:
		return a2a.TaskStateCanceled
	case Refused:
		return a2a.TaskStateRejected
	}
	return a2a.TaskStateUnspecified
}

// question makes the status message of at, task t awaiting approval
// (INPUT_REQUIRED), the question its approval asks: the rationale (else
// the title), then which approval, of what, who decides it, and the
// action with its hash, as the approvers' request says it. When the
// caller may not read the approval (GET /v1/approvals/{id}), the status
// message stays the completion's rationale (ToTask).
func (a *agent) question(ctx context.Context, t *api.Task, at *a2a.Task) {
	if t.State != api.TaskAwaitingApproval || t.ApprovalID == "" {
		return
	}
	ap, err := a.c.Approval(ctx, t.ApprovalID)
	if err != nil {
		return
	}
	words := fmt.Sprintf("%s\n\napproval %s (%s) waits for %s (%d of %d): action %s:\n%s",
		cmp.Or(ap.Rationale, ap.Title), ap.ID, cmp.Or(ap.ApprovalNeededFor, "task "+t.ID), strings.Join(ap.Approvers, ", "),
		ap.Approvals, ap.Quorum, ap.ActionHash, ap.Action)
	at.Status.Message = &a2a.Message{ID: t.ID + "-status", Role: a2a.MessageRoleAgent, TaskID: at.ID, ContextID: at.ContextID,
		Parts: a2a.ContentParts{a2a.NewTextPart(words)}}
}
