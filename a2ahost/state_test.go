package a2ahost_test

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
)

func TestStateMapsEveryMaosState(t *testing.T) {
	want := map[api.TaskState]a2a.TaskState{
		api.TaskWaiting:          a2a.TaskStateSubmitted,
		api.TaskReady:            a2a.TaskStateSubmitted,
		api.TaskRunning:          a2a.TaskStateWorking,
		api.TaskAwaitingApproval: a2a.TaskStateInputRequired,
		api.TaskSucceeded:        a2a.TaskStateCompleted,
		api.TaskFailed:           a2a.TaskStateFailed,
		api.TaskCancelled:        a2a.TaskStateCanceled,
		a2ahost.Refused:          a2a.TaskStateRejected,
		"no_such_state":          a2a.TaskStateUnspecified,
	}
	for from, to := range want {
		if got := a2ahost.State(from); got != to {
			t.Errorf("State(%q) = %q, want %q", from, got, to)
		}
	}
	// Every state maos has is in the table: a new one fails here.
	for _, s := range api.TaskStates {
		if _, ok := want[s]; !ok {
			t.Errorf("maos state %q has no row in the table", s)
		}
	}
}
