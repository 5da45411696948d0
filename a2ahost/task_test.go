package a2ahost_test

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
)

// A failed task says why in its status message; a task made without A2A
// (no A2A context) has its own id as contextId and its title as request;
// a completion's outputs are listed in the result artifact.
func TestToTaskFailedWithOutputs(t *testing.T) {
	mt := &api.Task{ID: "task-1", From: "lead", To: "bob", Title: "port it", MessageID: "msg-1",
		State: api.TaskFailed, Updated: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Completion: &api.TaskCompletion{Status: api.TaskStatusFailure, Result: "half done", Outputs: []string{"art-1"},
			Error: &api.TaskError{ErrorType: "tool", ErrorMessage: "the compiler crashed"}}}
	got := a2ahost.ToTask(mt)
	if got.ID != "task-1" || got.ContextID != "task-1" || got.Status.State != a2a.TaskStateFailed {
		t.Errorf("id %q context %q state %q", got.ID, got.ContextID, got.Status.State)
	}
	if got.Status.Message == nil || got.Status.Message.Parts[0].Text() != "the compiler crashed" {
		t.Errorf("status message %+v", got.Status.Message)
	}
	if len(got.History) != 1 || got.History[0].ID != "msg-1" || got.History[0].Parts[0].Text() != "port it" {
		t.Errorf("history %+v", got.History)
	}
	if len(got.Artifacts) != 1 || len(got.Artifacts[0].Parts) != 2 || got.Artifacts[0].Parts[0].Text() != "half done" {
		t.Fatalf("artifacts %+v", got.Artifacts)
	}
	data, _ := got.Artifacts[0].Parts[1].Data().(map[string]any)
	if outs, _ := data["maos_artifacts"].([]string); len(outs) != 1 || outs[0] != "art-1" {
		t.Errorf("outputs part %+v", got.Artifacts[0].Parts[1].Data())
	}
	if got.Metadata["maos_state"] != "failed" || got.Metadata["maos_from"] != "lead" {
		t.Errorf("metadata %v", got.Metadata)
	}
}
