package a2arelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/maos-project/maos/watcher"
)

// PollEvery is how often a remote that does not stream is asked for its
// task (GetTask).
const PollEvery = 500 * time.Millisecond

// out is what a run "prints": seed 002 §6 lines and text, each passed to
// the watcher's OnLine as it comes (a status line renews the claim at
// once, with its words as the task's progress), all of it the Result's
// Stdout.
type out struct {
	on    func(string)
	lines []string
}

func (o *out) print(line string) {
	o.lines = append(o.lines, line)
	if o.on != nil {
		o.on(line)
	}
}

// json prints v, a §6 line, as one JSON line.
func (o *out) json(v any) {
	b, _ := json.Marshal(v) // maps and strings: never fails
	o.print(string(b))
}

// status prints a status line with msg.
func (o *out) status(msg string) { o.json(map[string]any{"type": watcher.LineStatus, "message": msg}) }

func (o *out) String() string { return strings.Join(o.lines, "\n") }

// RemoteTaskWords begins every progress note of a relayed task: "a2a task
// ID" and what follows. A later attempt finds the remote task's id in the
// maos task's progress history by it (recordedRemoteID) and resumes that
// task rather than send the work again.
const RemoteTaskWords = "a2a task "

// note is the progress note of remote task t: its id, state and status
// words, so that every note names the remote task.
func note(t *a2a.Task) string {
	s := RemoteTaskWords + string(t.ID) + ": " + stateWord(t.Status.State)
	if txt := messageText(t.Status.Message); txt != "" {
		s += ": " + strings.Join(strings.Fields(txt), " ")
	}
	return s
}

// stateWord is an A2A state as a note says it: "working", "input-required".
func stateWord(s a2a.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}

// settled reports whether the relay stops following t: a final state, or
// one that waits for someone (input or auth required).
func settled(t *a2a.Task) bool {
	s := t.Status.State
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// follower keeps the remote task as a stream or polls tell of it, and
// prints a note whenever its state or words change.
type follower struct {
	o    *out
	task *a2a.Task
	last string // the last note printed
	// answered is the status (statusKey) of the INPUT_REQUIRED the relay
	// answered last: a stream that shows it again has not moved on yet.
	answered string
}

// see takes one event; it returns true once the task is settled. A
// Message (the remote answered without a task) settles as a completed
// task whose status message is it.
func (f *follower) see(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.Task:
		f.task = e
	case *a2a.Message:
		id := a2a.TaskID(e.TaskID)
		if f.task != nil {
			id = f.task.ID
		}
		f.task = &a2a.Task{ID: id, ContextID: e.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: e}}
		if id == "" {
			return true // a plain answer: no task to note
		}
	case *a2a.TaskStatusUpdateEvent:
		if f.task == nil {
			f.task = &a2a.Task{ID: e.TaskID, ContextID: e.ContextID}
		}
		f.task.Status = e.Status
	case *a2a.TaskArtifactUpdateEvent:
		if f.task == nil {
			f.task = &a2a.Task{ID: e.TaskID, ContextID: e.ContextID}
		}
		f.task.Artifacts = mergeArtifact(f.task.Artifacts, e)
	}
	if f.task == nil {
		return false
	}
	if f.task.Status.State == a2a.TaskStateInputRequired && f.answered != "" && statusKey(f.task) == f.answered {
		return false
	}
	if n := note(f.task); n != f.last {
		f.last = n
		f.o.status(n)
	}
	return settled(f.task)
}

// statusKey tells one status of t from another: its message's id, else
// its time, else its words.
func statusKey(t *a2a.Task) string {
	switch st := t.Status; {
	case st.Message != nil && st.Message.ID != "":
		return "m:" + st.Message.ID
	case st.Timestamp != nil:
		return "t:" + st.Timestamp.UTC().Format(time.RFC3339Nano)
	default:
		return "w:" + messageText(st.Message)
	}
}

// mergeArtifact adds e's artifact to arts, or its parts to the artifact
// of the same id when e appends.
func mergeArtifact(arts []*a2a.Artifact, e *a2a.TaskArtifactUpdateEvent) []*a2a.Artifact {
	if e.Artifact == nil {
		return arts
	}
	for i, a := range arts {
		if a.ID == e.Artifact.ID {
			if e.Append {
				cp := *a
				cp.Parts = append(append(a2a.ContentParts{}, a.Parts...), e.Artifact.Parts...)
				arts[i] = &cp
			} else {
				arts[i] = e.Artifact
			}
			return arts
		}
	}
	return append(arts, e.Artifact)
}

// stream follows events until the task settles: the settled task, or why
// not (the stream broke or ended first, ctx ended).
func (f *follower) stream(ctx context.Context, events iter.Seq2[a2a.Event, error]) (*a2a.Task, error) {
	for ev, err := range events {
		if err != nil {
			return nil, fmt.Errorf("the remote's stream: %w", err)
		}
		if f.see(ev) {
			return f.task, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if f.task != nil {
		return nil, fmt.Errorf("the remote's stream of task %s ended while it was %s", f.task.ID, stateWord(f.task.Status.State))
	}
	return nil, errors.New("the remote's stream ended before it named a task")
}

// poll asks the remote for task id every PollEvery until it settles.
func (f *follower) poll(ctx context.Context, r *remote, id a2a.TaskID) (*a2a.Task, error) {
	for {
		t, err := r.client.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			return nil, fmt.Errorf("the remote's task %s: %w", id, err)
		}
		if f.see(t) {
			return f.task, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(PollEvery):
		}
	}
}

// messageText is the text of m's text parts, one per line.
func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

func partsText(parts a2a.ContentParts) string {
	var b []string
	for _, p := range parts {
		if t := strings.TrimSpace(p.Text()); t != "" {
			b = append(b, t)
		}
	}
	return strings.Join(b, "\n")
}
