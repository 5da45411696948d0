package a2ahost

import (
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// continueTask answers a message whose taskId names a task of this agent
// that is not final: maos has no "append to a task" (progress is the
// claimant's alone), so the message becomes a maos message in the task's
// thread, as maos's own task messages are (channel the task's, in reply
// to its announcement, correlation id the task's id), from the sender to
// the task's claimant, or to its assignee while unclaimed. Its text is
// the message's text, its file parts are stored as artifacts
// (putFiles) and named in content.artifacts, its ids and data parts are
// the message's metadata (A2AContext). The answer is the task, unchanged
// by the message. Errors: a2a.ErrTaskNotFound as GetTask;
// a2a.ErrUnsupportedOperation for a task already final;
// a2a.ErrInvalidParams for a contextId that is not the task's, a message
// without text, or a field maos refuses; the API's refusals wrapped.
func (a *agent) continueTask(ctx context.Context, m *a2a.Message, from string) (*a2a.Task, error) {
	t, err := a.task(ctx, string(m.TaskID))
	if err != nil {
		return nil, err
	}
	at := ToTask(t)
	if m.ContextID != "" && m.ContextID != at.ContextID {
		return nil, fmt.Errorf("%w: contextId %q is not task %s's (%q)", a2a.ErrInvalidParams, m.ContextID, t.ID, at.ContextID)
	}
	if t.State.Final() {
		return nil, fmt.Errorf("%w: task %s is %s: a final task takes no more messages; send a new one", a2a.ErrUnsupportedOperation, t.ID, at.Status.State)
	}
	plain := *m
	plain.TaskID = ""
	cmd, err := TaskFromMessage(&plain) // the same reading of the parts as a new task's
	if err != nil {
		return nil, err
	}
	files, err := a.putFiles(ctx, m, from)
	if err != nil {
		return nil, err
	}
	to := t.ClaimedBy
	if to == "" {
		to = t.To
	}
	msg := &api.Message{
		ID: api.NewID(from, time.Now()), Channel: t.Channel, From: from, To: api.Recipients{to},
		Title: cmd.Title, Content: api.Content{Text: cmd.Description},
		InReplyTo: t.MessageID, CorrelationID: t.ID, Tags: []string{"a2a"}, Metadata: cmd.Context,
	}
	for _, f := range files {
		msg.Content.Artifacts = append(msg.Content.Artifacts, api.ArtifactRef{Ref: f.Artifact, Name: f.Name})
	}
	if _, err := a.c.Send(ctx, msg); err != nil {
		return nil, fromAPI(err)
	}
	if t, err = a.task(ctx, t.ID); err != nil {
		return nil, err
	}
	return a.view(ctx, t), nil
}
