package a2ahost

import (
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
