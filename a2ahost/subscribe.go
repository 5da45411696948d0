package a2ahost

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
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
// Every event carries its place in that stream (MetaEventID). With the
// header Last-Event-ID (HeaderLastEventID) set to one of those, the stream
// resumes there, on any node: see resumeAt. Error: a2a.ErrInvalidParams
// for a Last-Event-ID that is not "N:task".
func (a *agent) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		t, err := a.task(ctx, string(req.ID))
		if err != nil {
			yield(nil, err)
			return
		}
		after, err := lastEventID(ctx)
		switch {
		case err != nil:
			yield(nil, err)
		case after > 0:
			a.resumeAt(ctx, t, after, yield)
		default:
			a.follow(ctx, t, yield)
		}
	}
}

// MetaEventID is the metadata key, on every event SubscribeToTask and
// SendStreamingMessage send, of the event's place in the node's event
// stream: "N:task", where N is the index of the Raft entry whose state of
// the task the event shows (for the first event, the task as read, its
// last history event's). The entries are the cluster's, so the id means
// the same on every node.
const MetaEventID = "maos_event_id"

// EventID is ev's MetaEventID ("N:task"), or "" if it carries none.
func EventID(ev a2a.Event) string {
	id, _ := ev.Meta()[MetaEventID].(string)
	return id
}

// HeaderLastEventID is the request header (an a2aclient service
// parameter) a resubscription names the last MetaEventID it got by: the
// name Server-Sent Events give a reconnect's position.
const HeaderLastEventID = "Last-Event-ID"

// lastEventID reads the call's Last-Event-ID: 0 when absent, else N of
// "N:task". Error: a2a.ErrInvalidParams naming the header.
func lastEventID(ctx context.Context) (uint64, error) {
	cc, ok := a2asrv.CallContextFrom(ctx)
	if !ok {
		return 0, nil
	}
	vals, _ := cc.ServiceParams().Get(HeaderLastEventID)
	if len(vals) == 0 || vals[0] == "" {
		return 0, nil
	}
	n, kind, _ := strings.Cut(vals[0], ":")
	v, err := strconv.ParseUint(n, 10, 63)
	if kind != api.EventTask || err != nil || v == 0 {
		return 0, fmt.Errorf("%w: header %s %q: want N:task, the %s of an event this stream sent", a2a.ErrInvalidParams, HeaderLastEventID, vals[0], MetaEventID)
	}
	return v, nil
}

// eventID is MetaEventID's value for entry index.
func eventID(index uint64) string { return strconv.FormatUint(index, 10) + ":" + api.EventTask }

// resumeAt streams t from entry after on: first the task as entry after
// left it (the state the client last got, which it may drop as seen),
// then every update after it, as follow does. The node's event stream
// keeps every entry's task updates, so it replays them from entry after
// (its position "after-1:task"); an id from before t's creation starts at
// its creation, one past t's last update (t is read strongly, so the
// client cannot have seen a later one of t) at that update, t as it is,
// and one between two updates of t gives the task at the next.
func (a *agent) resumeAt(ctx context.Context, t *api.Task, after uint64, yield func(a2a.Event, error) bool) {
	if h := t.History; len(h) > 0 {
		after = min(max(after, h[0].Seq), h[len(h)-1].Seq)
	}
	f := a.follower(ctx, t.ID, yield)
	f.snapshot, f.resume = true, eventID(after-1)
	a.run(ctx, f)
}

// SendStreamingMessage creates (or continues) the task as SendMessage
// does and streams it as SubscribeToTask does. A refused create is the
// REJECTED task alone.
func (a *agent) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		res, err := a.send(ctx, req)
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
	id   string
	last statusKey // what was last sent
	// snapshot: the next update is sent as the Task (a resumed stream's
	// first event), whatever it changed.
	snapshot bool
	resume   string // where the stream goes on: the last event id seen
	view     func(*api.Task) *a2a.Task
	yield    func(a2a.Event, error) bool
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
	var last uint64
	if h := t.History; len(h) > 0 {
		last = h[len(h)-1].Seq
	}
	at := a.view(ctx, t)
	at.Metadata[MetaEventID] = eventID(last)
	if !yield(at, nil) || t.State.Final() {
		return
	}
	f := a.follower(ctx, t.ID, yield)
	f.last = keyOf(t)
	if last > 0 {
		f.resume = eventID(last)
	}
	a.run(ctx, f)
}

// follower is a follower of task id yielding to yield.
func (a *agent) follower(ctx context.Context, id string, yield func(a2a.Event, error) bool) *follower {
	return &follower{id: id, yield: yield, view: func(t *api.Task) *a2a.Task { return a.view(ctx, t) }}
}

// run reads the node's event stream for f until f is done, ctx ends or
// the API refuses the stream.
func (a *agent) run(ctx context.Context, f *follower) {
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
			f.yield(nil, fromAPI(err))
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
	index := ev.Seq
	if index == 0 {
		index = ev.Task.Event.Seq
	}
	return f.emit(ev.Task.Task, index)
}

// emit sends t, as entry index left it, if its status is new (an
// update that changes neither the A2A state nor the status words, such as
// a lease renewal, is not sent), and for a final state the result
// artifact first; each event names index (MetaEventID). errEnd once final
// or when the consumer stops.
func (f *follower) emit(t *api.Task, index uint64) error {
	k, id := keyOf(t), eventID(index)
	if f.snapshot {
		f.snapshot, f.last = false, k
		at := f.view(t)
		at.Metadata[MetaEventID] = id
		if !f.yield(at, nil) || t.State.Final() {
			return errEnd
		}
		return nil
	}
	if k == f.last {
		return nil
	}
	f.last = k
	at := f.view(t)
	final := t.State.Final()
	if final {
		for _, art := range at.Artifacts {
			ev := &a2a.TaskArtifactUpdateEvent{TaskID: at.ID, ContextID: at.ContextID, Artifact: art, LastChunk: true,
				Metadata: map[string]any{MetaEventID: id}}
			if !f.yield(ev, nil) {
				return errEnd
			}
		}
	}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: at.ID, ContextID: at.ContextID, Status: at.Status,
		Metadata: map[string]any{"maos_state": string(t.State), MetaEventID: id}}
	if !f.yield(ev, nil) || final {
		return errEnd
	}
	return nil
}

// settled reports whether a blocking send answers a task in state st:
// terminal, or interrupted (INPUT_REQUIRED, AUTH_REQUIRED).
func settled(st a2a.TaskState) bool {
	return st.Terminal() || st == a2a.TaskStateInputRequired || st == a2a.TaskStateAuthRequired
}

// settleRead bounds await's last read of the task, made after the
// request's context may have ended.
const settleRead = 10 * time.Second

// await is a blocking send's answer: task at, once it is settled (on the
// same stream as SubscribeToTask) or ctx ends, read again then (so with
// its artifacts); at as it was if that read fails. It never fails: the
// task exists, and an error would have the client send it again.
func (a *agent) await(ctx context.Context, at *a2a.Task) *a2a.Task {
	if settled(at.Status.State) {
		return at
	}
	if t, err := a.task(ctx, string(at.ID)); err == nil {
		a.follow(ctx, t, func(ev a2a.Event, err error) bool {
			switch e := ev.(type) {
			case *a2a.Task:
				return err == nil && !settled(e.Status.State)
			case *a2a.TaskStatusUpdateEvent:
				return err == nil && !settled(e.Status.State)
			}
			return err == nil
		})
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleRead)
	defer cancel()
	t, err := a.task(rctx, string(at.ID))
	if err != nil {
		return at
	}
	return a.view(rctx, t)
}
