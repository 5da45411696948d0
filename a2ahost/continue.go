package a2ahost

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// MaxReferenceTasks caps a message's referenceTaskIds.
const MaxReferenceTasks = 16

// followUp finds the task a message without a taskId continues, if any:
//
//   - referenceTaskIds, if given, must each name a task of this agent
//     (a2a.ErrTaskNotFound otherwise). The one among them that is not
//     final is continued; none open, the message makes a new task (a
//     refinement), in the message's contextId, else the first
//     reference's (ctxID); more than one open is a2a.ErrInvalidParams:
//     name the one to continue as taskId.
//   - Else a contextId continues the newest open task of this agent from
//     the same sender in that context (its A2A contextId, or its id when
//     it was made without one); none, the message makes a new task in
//     that context.
//
// open is the task to continue ("" for a new task).
func (a *agent) followUp(ctx context.Context, m *a2a.Message, from string) (open, ctxID string, err error) {
	if len(m.ReferenceTasks) > MaxReferenceTasks {
		return "", "", fmt.Errorf("%w: referenceTaskIds: %d tasks, at most %d", a2a.ErrInvalidParams, len(m.ReferenceTasks), MaxReferenceTasks)
	}
	if len(m.ReferenceTasks) == 0 {
		if m.ContextID == "" {
			return "", "", nil
		}
		open, err = a.openInContext(ctx, m.ContextID, from)
		return open, "", err
	}
	var opens []string
	for _, id := range m.ReferenceTasks {
		t, err := a.task(ctx, string(id))
		if err != nil {
			return "", "", fmt.Errorf("referenceTaskIds: %w", err)
		}
		if ctxID == "" {
			ctxID = ToTask(t).ContextID
		}
		if !t.State.Final() && !slices.Contains(opens, t.ID) {
			opens = append(opens, t.ID)
		}
	}
	switch len(opens) {
	case 0:
		return "", ctxID, nil
	case 1:
		return opens[0], "", nil
	}
	return "", "", fmt.Errorf("%w: referenceTaskIds name %d open tasks (%s): name the one to continue as taskId", a2a.ErrInvalidParams, len(opens), strings.Join(opens, ", "))
}

// openStates are the states of a task a message may continue.
var openStates = []api.TaskState{api.TaskWaiting, api.TaskReady, api.TaskRunning, api.TaskAwaitingApproval}

// openInContext is the newest task (highest seq) of this agent from from,
// not final, whose A2A contextId is contextID; "" if none. It reads the
// API's task list by state, at most maxScanPages pages of each.
func (a *agent) openInContext(ctx context.Context, contextID, from string) (string, error) {
	var best *api.Task
	for _, st := range openStates {
		q := api.TaskQuery{To: a.id, From: from, State: st, Limit: MaxPageSize}
		for range maxScanPages {
			page, err := a.c.Tasks(ctx, q)
			if err != nil {
				return "", fromAPI(err)
			}
			for _, t := range page.Tasks {
				q.After = t.Seq
				if ToTask(t).ContextID == contextID && (best == nil || t.Seq > best.Seq) {
					best = t
				}
			}
			if !page.HasMore {
				break
			}
		}
	}
	if best == nil {
		return "", nil
	}
	return best.ID, nil
}
