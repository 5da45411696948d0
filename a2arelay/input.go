package a2arelay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/maos-project/maos/api"
)

// InputTag tags the relay's questions: the message a remote's
// INPUT_REQUIRED becomes, to the task's creator (ask).
const InputTag = "a2a-input"

// ask puts remote task at's question (INPUT_REQUIRED) to t's creator as a
// message from the agent in t's thread (in reply to its delegation,
// correlation id t's id, tagged InputTag), its id derived from t and the
// status asked, so an attempt that asks again posts nothing new; then
// waits (until ctx ends: the watcher renews t's claim meanwhile) for the
// creator's reply to it, whose text it returns.
func (r *Relay) ask(ctx context.Context, t *api.Task, at *a2a.Task) (string, error) {
	q := messageText(at.Status.Message)
	if q == "" {
		q = "(the remote agent asks for input and says no more)"
	}
	m := &api.Message{
		ID: api.DerivedID(r.Agent, t.Created, "a2a-input\x00"+t.ID+"\x00"+string(at.ID)+"\x00"+statusKey(at)), Channel: t.Channel,
		From: r.Agent, To: api.Recipients{t.From}, Title: api.TruncateUTF8("input needed: "+t.Title, api.MaxTitleLen),
		Content: api.Content{Text: q}, InReplyTo: t.MessageID, CorrelationID: t.ID, Tags: []string{"a2a", InputTag},
	}
	if _, err := r.Client.Send(ctx, m); err != nil && !errors.Is(err, api.ErrConflict) {
		return "", fmt.Errorf("asking %s for the remote's input: %w", t.From, err)
	}
	for {
		if reply, err := r.replyTo(ctx, m.ID, t.From); err != nil || reply != nil {
			if err != nil {
				return "", err
			}
			return reply.Content.Text, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(PollEvery):
		}
	}
}

// replyTo is from's first reply to message id in its thread, nil while
// there is none.
func (r *Relay) replyTo(ctx context.Context, id, from string) (*api.Message, error) {
	after := uint64(0)
	for {
		page, err := r.Client.Thread(ctx, id, after, api.MaxPageLimit, api.Strong)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, nil // read again at the next poll
		}
		if i := slices.IndexFunc(page.Messages, func(m *api.Message) bool { return m.InReplyTo == id && m.From == from }); i >= 0 {
			return page.Messages[i], nil
		}
		if !page.HasMore || len(page.Messages) == 0 {
			return nil, nil
		}
		after = page.Messages[len(page.Messages)-1].Seq
	}
}

// replyMessage continues remote task at with the creator's reply: same
// taskId and contextId, messageId derived from the status it answers.
func (r *Relay) replyMessage(t *api.Task, at *a2a.Task, reply string) *a2a.Message {
	return &a2a.Message{ID: api.DerivedID(r.Agent, t.Created, "a2a-reply\x00"+t.ID+"\x00"+statusKey(at)), TaskID: at.ID,
		ContextID: at.ContextID, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(reply)},
		Metadata: map[string]any{"maos_task": t.ID, "maos_from": t.From, "maos_agent": r.Agent}}
}

// Skip is the relay agent's message filter (watcher.AgentConfig.Skip): a
// reply to one of its questions (InputTag) is read by the task's run
// (ask), never relayed as a message of its own; nor is other talk about
// a task (a correlation id), which maos delivers to a task's claimant.
func (r *Relay) Skip(m *api.Message) string {
	if m.CorrelationID != "" {
		return "a2a relay: talk about task " + m.CorrelationID + " is not relayed"
	}
	if m.InReplyTo == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := r.Client.Message(ctx, m.InReplyTo, api.Local)
	if err == nil && p.From == r.Agent && slices.Contains(p.Tags, InputTag) {
		return "a2a relay: the answer to its question " + p.ID + ", read by the task's run"
	}
	return ""
}
