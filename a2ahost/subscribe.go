package a2ahost

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// SubscribeToTask streams task req.ID (this agent's, as GetTask) from the
// node's own replicated state, so any node answers: first the task as it
// is now, then a TaskStatusUpdateEvent each time its A2A state or status
// message changes, and, when it reaches a final state, the result as a
// TaskArtifactUpdateEvent (if it has one) and the final status, and the
// stream ends. A task already final is answered as the task alone. The
// updates come from the node's event stream (GET /v1/stream, its task
// events, taken for this task), from just after the task as read and
// resumed after a cut by the last event id, so none is lost or repeated.
func (a *agent) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		t, err := a.task(ctx, string(req.ID))
		if err != nil {
			yield(nil, err)
			return
		}
		a.follow(ctx, t, yield)
	}
}

// SendStreamingMessage creates the task as SendMessage does and streams
// it as SubscribeToTask does. A refused create is the REJECTED task alone.
func (a *agent) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		res, err := a.SendMessage(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		at, _ := res.(*a2a.Task)
		if at == nil || at.Status.State == a2a.TaskStateRejected {
			yield(res, nil)
			return
		}
		t, err := a.task(ctx, string(at.ID))
		if err != nil {
			yield(nil, err)
			return
		}
		a.follow(ctx, t, yield)
	}
}

// errEnd ends a stream's callback: the follower is done.
var errEnd = errors.New("a2ahost: stream done")

// follower emits one task's updates from the node's event stream.
type follower struct {
	id     string
	last   statusKey // what was last sent
	resume string    // where the stream goes on: the last event id seen
	view   func(*api.Task) *a2a.Task
	yield  func(a2a.Event, error) bool
}

// statusKey is what makes a status update new: the A2A state and the
// status message's words.
type statusKey struct {
	state a2a.TaskState
	words string
}

func keyOf(t *api.Task) statusKey { return statusKey{State(t.State), statusWords(t)} }

// follow yields t as it is, then its updates until a final state, ctx's
// end or the consumer stops. The stream starts after the entry of t's
// last history event ("N:task": after all of entry N), so every update
// it carries is newer than t as read, and none between the read and the
// stream's start is missed; after a cut it resumes from the last id seen.
func (a *agent) follow(ctx context.Context, t *api.Task, yield func(a2a.Event, error) bool) {
	if !yield(a.view(ctx, t), nil) || t.State.Final() {
		return
	}
	f := &follower{id: t.ID, last: keyOf(t), yield: yield, view: func(t *api.Task) *a2a.Task { return a.view(ctx, t) }}
	if h := t.History; len(h) > 0 {
		f.resume = strconv.FormatUint(h[len(h)-1].Seq, 10) + ":" + api.EventTask
	}
	for ctx.Err() == nil {
		// Every task event, not ?agent=: that reads the agent's inbox,
		// which the API lets only the agent (or a moderator) stream.
		q := api.StreamQuery{Events: []string{api.EventTask}, Resume: f.resume}
		sctx, cancel := context.WithCancel(ctx)
		err := a.sc.Stream(sctx, q, f.event)
		cancel() // ends the in-process stream handler now, not with the call
		var apiErr *api.APIError
		switch {
		case errors.Is(err, errEnd) || ctx.Err() != nil:
			return
		case errors.As(err, &apiErr):
			yield(nil, fromAPI(err))
			return
		}
		// The stream was cut (or ended): resume after the last id seen.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// event takes one stream event; errEnd when the follower is done.
func (f *follower) event(ev api.StreamEvent) error {
	if ev.ID != "" {
		f.resume = ev.ID
	}
	if ev.Task == nil || ev.Task.Task == nil || ev.Task.Task.ID != f.id {
		return nil
	}
	return f.emit(ev.Task.Task)
}

// emit sends t's status if it is new (an update that changes neither the
// A2A state nor the status words, such as a lease renewal, is not sent), and for a final state the result
// artifact first; errEnd once final or when the consumer stops.
func (f *follower) emit(t *api.Task) error {
	k := keyOf(t)
	if k == f.last {
		return nil
	}
	f.last = k
	at := f.view(t)
	final := t.State.Final()
	if final {
		for _, art := range at.Artifacts {
			ev := &a2a.TaskArtifactUpdateEvent{TaskID: at.ID, ContextID: at.ContextID, Artifact: art, LastChunk: true}
			if !f.yield(ev, nil) {
				return errEnd
			}
		}
	}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: at.ID, ContextID: at.ContextID, Status: at.Status,
		Metadata: map[string]any{"maos_state": string(t.State)}}
	if !f.yield(ev, nil) || final {
		return errEnd
	}
	return nil
}
