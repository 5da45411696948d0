package a2ahost

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// ToTask is maos task t as an A2A task: the same id; the contextId of the
// message it came from (A2AContext), else the task's id; its state by
// State, at its last update; the status message the task's progress
// message or its failure's; the original request (with its
// referenceTaskIds) as the history's one user message; a completion's result as the artifact "result" (a text
// part, and a data part listing the completion's output artifact ids);
// metadata "maos_state", "maos_from", "maos_claimed_by".
func ToTask(t *api.Task) *a2a.Task {
	ctxID := t.ID
	var actx A2AContext
	if json.Unmarshal(t.Context, &actx) == nil && actx.A2A.ContextID != "" {
		ctxID = actx.A2A.ContextID
	}
	tid := a2a.TaskID(t.ID)
	updated := t.Updated
	out := &a2a.Task{ID: tid, ContextID: ctxID,
		Status:   a2a.TaskStatus{State: State(t.State), Timestamp: &updated},
		Metadata: map[string]any{"maos_state": string(t.State), "maos_from": t.From},
	}
	if t.ClaimedBy != "" {
		out.Metadata["maos_claimed_by"] = t.ClaimedBy
	}
	if words := statusWords(t); words != "" {
		out.Status.Message = &a2a.Message{ID: t.ID + "-status", Role: a2a.MessageRoleAgent, TaskID: tid, ContextID: ctxID,
			Parts: a2a.ContentParts{a2a.NewTextPart(words)}}
	}
	req := &a2a.Message{ID: actx.A2A.MessageID, Role: a2a.MessageRoleUser, TaskID: tid, ContextID: ctxID,
		Parts: a2a.ContentParts{a2a.NewTextPart(t.Description)}}
	if req.ID == "" {
		req.ID = t.MessageID
	}
	for _, id := range actx.A2A.References {
		req.ReferenceTasks = append(req.ReferenceTasks, a2a.TaskID(id))
	}
	if t.Description == "" {
		req.Parts[0] = a2a.NewTextPart(t.Title)
	}
	for _, d := range actx.Data {
		req.Parts = append(req.Parts, a2a.NewDataPart(d))
	}
	out.History = []*a2a.Message{req}
	if c := t.Completion; c != nil && (c.Result != "" || len(c.Outputs) > 0) {
		art := &a2a.Artifact{ID: a2a.ArtifactID(t.ID + "-result"), Name: "result",
			Parts: a2a.ContentParts{a2a.NewTextPart(c.Result)}}
		if len(c.Outputs) > 0 {
			art.Parts = append(art.Parts, a2a.NewDataPart(map[string]any{"maos_artifacts": c.Outputs}))
		}
		out.Artifacts = []*a2a.Artifact{art}
	}
	return out
}

// statusWords is what the task's status message says: a failure's error,
// the completion's rationale, or the last progress message.
func statusWords(t *api.Task) string {
	if c := t.Completion; c != nil {
		if c.Error != nil && c.Error.ErrorMessage != "" {
			return c.Error.ErrorMessage
		}
		if c.Rationale != "" {
			return c.Rationale
		}
	}
	return t.ProgressMessage
}
