package a2arelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/maos-project/maos/api"
)

// task relays maos task id: it resumes the remote task an earlier attempt
// recorded (or that the remote lists under the task's id as contextId),
// else sends the task; follows it, answering INPUT_REQUIRED through the
// task's creator, until it ends; and prints the completion (finish).
func (r *Relay) task(ctx context.Context, id string, o *out) error {
	t, err := r.Client.Task(ctx, id)
	if err != nil {
		return fmt.Errorf("maos task %s: %w", id, err)
	}
	rem, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rem.client.Destroy() }()
	dir := filepath.Join(r.Dir, id)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("a2arelay: artifact folder: %w", err)
	}
	f := &follower{o: o}
	at, err := r.start(ctx, rem, t, f)
	for err == nil && at.Status.State == a2a.TaskStateInputRequired {
		var reply string
		if reply, err = r.ask(ctx, t, at); err != nil {
			return err
		}
		f.answered = statusKey(at)
		at, err = r.send(ctx, rem, r.replyMessage(t, at, reply), f)
	}
	if err != nil {
		return err
	}
	if r.Logger != nil {
		r.Logger.Info("a2arelay: remote task settled", "agent", r.Agent, "task", id, "remote", at.ID, "state", stateWord(at.Status.State))
	}
	return finish(at, dir, o)
}

// start resumes or sends t's work.
func (r *Relay) start(ctx context.Context, rem *remote, t *api.Task, f *follower) (*a2a.Task, error) {
	id := recordedRemoteID(t)
	if id == "" {
		id = listedRemoteID(ctx, rem, t.ID)
	}
	if id != "" {
		at, err := r.resume(ctx, rem, a2a.TaskID(id), f)
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			return at, err
		}
		// The remote forgot it (restarted without a store): the work
		// must be sent again.
	}
	return r.send(ctx, rem, r.taskMessage(t), f)
}

// send sends m and follows the task it starts until it settles: as a
// stream when the remote streams, else polled.
func (r *Relay) send(ctx context.Context, rem *remote, m *a2a.Message, f *follower) (*a2a.Task, error) {
	req := &a2a.SendMessageRequest{Message: m}
	if rem.streams() {
		return f.stream(ctx, rem.client.SendStreamingMessage(ctx, req))
	}
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := rem.client.SendMessage(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("sending to the remote A2A agent: %w", err)
	}
	ev, ok := res.(a2a.Event)
	if !ok {
		return nil, fmt.Errorf("the remote answered %T", res)
	}
	if f.see(ev) {
		return f.task, nil
	}
	return f.poll(ctx, rem, f.task.ID)
}

// resume follows remote task id, which an earlier attempt started: read
// once, then subscribed to when the remote streams (polled if that
// fails), else polled. a2a.ErrTaskNotFound when the remote has no such
// task.
func (r *Relay) resume(ctx context.Context, rem *remote, id a2a.TaskID, f *follower) (*a2a.Task, error) {
	at, err := rem.client.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	if err != nil {
		return nil, fmt.Errorf("the remote's task %s: %w", id, err)
	}
	if f.see(at) {
		return f.task, nil
	}
	if rem.streams() {
		if at, err := f.stream(ctx, rem.client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id})); err == nil || ctx.Err() != nil {
			return at, err
		}
	}
	return f.poll(ctx, rem, id)
}

// recordedRemoteID is the remote task an earlier attempt of t recorded in
// its progress notes (RemoteTaskWords), the latest; "" for none.
func recordedRemoteID(t *api.Task) string {
	notes := []string{t.ProgressMessage}
	for _, e := range slices.Backward(t.History) {
		notes = append(notes, e.Detail)
	}
	for _, n := range notes {
		if rest, ok := strings.CutPrefix(n, RemoteTaskWords); ok {
			if id, _, _ := strings.Cut(rest, ": "); id != "" && !strings.ContainsAny(id, " \t") {
				return id
			}
		}
	}
	return ""
}

// listedRemoteID is a remote task the remote lists under contextId the
// maos task's id (an attempt that died before its first note reached the
// log), when the remote lists tasks; "" otherwise.
func listedRemoteID(ctx context.Context, rem *remote, taskID string) string {
	res, err := rem.client.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: taskID, PageSize: 10})
	if err != nil || res == nil || len(res.Tasks) == 0 {
		return ""
	}
	return string(res.Tasks[0].ID)
}

// taskMessage is t as an A2A message: its title and description as a text
// part, its context as a data part, messageId derived from the task (the
// same on every attempt, so a remote may know a resend), contextId the
// task's id, metadata naming the task, its creator and the agent.
func (r *Relay) taskMessage(t *api.Task) *a2a.Message {
	text := t.Title
	if t.Description != "" {
		text += "\n\n" + t.Description
	}
	parts := a2a.ContentParts{a2a.NewTextPart(text)}
	if len(t.Context) > 0 {
		parts = append(parts, a2a.NewDataPart(dataObject(t.Context)))
	}
	return &a2a.Message{ID: api.DerivedID(r.Agent, t.Created, "a2a\x00"+t.ID), ContextID: t.ID, Role: a2a.MessageRoleUser,
		Parts: parts, Metadata: map[string]any{"maos_task": t.ID, "maos_from": t.From, "maos_agent": r.Agent}}
}

// dataObject is raw as a data part's object: itself when it is one, else
// {"context": raw}.
func dataObject(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil && m != nil {
		return m
	}
	var v any
	_ = json.Unmarshal(raw, &v) // stored JSON: valid
	return map[string]any{"context": v}
}

// dataText is a data part's value as its JSON.
func dataText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
