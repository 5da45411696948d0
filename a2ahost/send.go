package a2ahost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// SendMessage creates a maos task for this agent from req.Message, or
// continues one (send), and answers it as an A2A task: unless
// configuration.returnImmediately is set, once the task is terminal or
// interrupted (await), else at once. Errors: send's.
func (a *agent) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	res, err := a.send(ctx, req)
	if err != nil || (req.Config != nil && req.Config.ReturnImmediately) {
		return res, err
	}
	if at, ok := res.(*a2a.Task); ok {
		return a.await(ctx, at), nil
	}
	return res, nil
}

// send creates a maos task for this agent from req.Message (see
// TaskFromMessage; file parts with their bytes are stored as artifacts,
// putFiles) through the API, as the caller, and answers it as an A2A
// task, as it is just after. A create the API refuses as forbidden (the
// rules, or the token's authority) is answered as a task in REJECTED with
// the refusal's words, and no maos task exists. A message with a taskId
// continues that task (continueTask: a message in its thread, no new
// task); so does one whose referenceTaskIds or contextId name an open
// task (followUp). A push notification config is set on the task
// (push.go; refused after a create: MetaPushError). Errors:
// a2a.ErrPushNotificationNotSupported for a push config on a node without
// an allowlist, a2a.ErrInvalidParams for a bad one, a2a.ErrUnsupportedContentType
// for file parts by URL, a2a.ErrInvalidParams for a message with no text
// or a field maos refuses (the secret guard included), followUp's, the
// API's other errors wrapped.
func (a *agent) send(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if req.Message == nil {
		return nil, fmt.Errorf("%w: no message", a2a.ErrInvalidParams)
	}
	var push *api.PushConfig
	if req.Config != nil && req.Config.PushConfig != nil {
		c, err := a.checkPush("pending", req.Config.PushConfig)
		if err != nil {
			return nil, fmt.Errorf("configuration.taskPushNotificationConfig: %w", err)
		}
		push = &c
	}
	meta := map[string]any{}
	for _, m := range []map[string]any{req.Metadata, req.Message.Metadata} {
		for k, v := range m {
			meta[k] = v
		}
	}
	from, err := a.caller(meta)
	if err != nil {
		return nil, err
	}
	if req.Message.TaskID != "" {
		if err := a.pushOnContinue(ctx, string(req.Message.TaskID), push); err != nil {
			return nil, err
		}
		return a.continueTask(ctx, req.Message, from)
	}
	open, ctxID, err := a.followUp(ctx, req.Message, from)
	if err != nil {
		return nil, err
	}
	if open != "" {
		if err := a.pushOnContinue(ctx, open, push); err != nil {
			return nil, err
		}
		m := *req.Message
		m.TaskID = a2a.TaskID(open)
		return a.continueTask(ctx, &m, from)
	}
	m := req.Message
	if m.ContextID == "" && ctxID != "" {
		c := *m
		c.ContextID = ctxID
		m = &c
	}
	cmd, err := TaskFromMessage(m)
	if err != nil {
		return nil, err
	}
	files, err := a.putFiles(ctx, m, from)
	if err != nil {
		return nil, err
	}
	if err := attachFiles(&cmd, files); err != nil {
		return nil, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	cmd.From, cmd.To = from, a.id
	cmd.ID = api.NewTaskID(from, time.Now())
	res, err := a.c.CreateTask(ctx, cmd)
	if errors.Is(err, api.ErrForbidden) {
		return rejected(cmd, m, err), nil
	}
	if err != nil {
		return nil, fromAPI(err)
	}
	t, err := a.task(ctx, res.ID)
	if err != nil {
		return nil, err
	}
	at := a.view(ctx, t)
	if push != nil {
		// The task exists: a refusal now is said in the answer, never as an
		// error a client would answer by sending (and creating) again.
		if _, err := a.setPush(ctx, t, *push); err != nil {
			at.Metadata[MetaPushError] = err.Error()
		}
	}
	return at, nil
}

// MetaPushError is the metadata key of a created task whose push config
// (configuration.taskPushNotificationConfig) was refused after the task
// was made: the refusal's words. Set it again with
// CreateTaskPushConfig.
const MetaPushError = "maos_push_error"

// pushOnContinue sets push (if any) on the open task id a message
// continues, before the message is sent.
func (a *agent) pushOnContinue(ctx context.Context, id string, push *api.PushConfig) error {
	if push == nil {
		return nil
	}
	t, err := a.task(ctx, id)
	if err != nil {
		return err
	}
	_, err = a.setPush(ctx, t, *push)
	return err
}

// rejected is the A2A answer to a create the API refused: the task it
// would have been, in REJECTED, its status message the refusal.
func rejected(cmd api.TaskCreateCommand, m *a2a.Message, refusal error) *a2a.Task {
	now := time.Now().UTC()
	ctxID := m.ContextID
	if ctxID == "" {
		ctxID = cmd.ID
	}
	tid := a2a.TaskID(cmd.ID)
	return &a2a.Task{ID: tid, ContextID: ctxID, Status: a2a.TaskStatus{
		State: State(Refused), Timestamp: &now,
		Message: &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleAgent, TaskID: tid, ContextID: ctxID,
			Parts: a2a.ContentParts{a2a.NewTextPart(refusal.Error())}},
	}}
}

// A2AContext is the part of a task's context that SendMessage fills:
// {"a2a": {"contextId", "messageId"}, "data": [the data parts' values],
// "files": [the file parts, stored as artifacts]}.
type A2AContext struct {
	A2A   A2AIDs    `json:"a2a"`
	Data  []any     `json:"data,omitempty"`
	Files []FileRef `json:"files,omitempty"`
}

// A2AIDs are the A2A ids of the message a task was created from: its
// contextId, messageId and referenceTaskIds.
type A2AIDs struct {
	ContextID  string   `json:"contextId,omitempty"`
	MessageID  string   `json:"messageId,omitempty"`
	References []string `json:"referenceTaskIds,omitempty"`
}

// TaskFromMessage is the task an A2A message asks for (From, To and ID
// left empty): its text parts, joined by blank lines, are the
// description, and their first line (up to api.MaxTitleLen bytes) the
// title; its data parts and ids (referenceTaskIds too) are the context
// (A2AContext). Errors: a2a.ErrUnsupportedOperation for a message with a
// taskId (SendMessage takes it to continueTask before this),
// a2a.ErrInvalidParams for more than MaxReferenceTasks references,
// a2a.ErrUnsupportedContentType for a file part by URL (a file part with
// its bytes is left to SendMessage, which stores it as an artifact),
// a2a.ErrInvalidParams for a message without text.
func TaskFromMessage(m *a2a.Message) (api.TaskCreateCommand, error) {
	var cmd api.TaskCreateCommand
	if m.TaskID != "" {
		return cmd, fmt.Errorf("%w: a message with a taskId continues that task; it makes no new one", a2a.ErrUnsupportedOperation)
	}
	if len(m.ReferenceTasks) > MaxReferenceTasks {
		return cmd, fmt.Errorf("%w: referenceTaskIds: %d tasks, at most %d", a2a.ErrInvalidParams, len(m.ReferenceTasks), MaxReferenceTasks)
	}
	var texts []string
	actx := A2AContext{A2A: A2AIDs{ContextID: m.ContextID, MessageID: m.ID}}
	for _, id := range m.ReferenceTasks {
		actx.A2A.References = append(actx.A2A.References, string(id))
	}
	for i, p := range m.Parts {
		switch c := p.Content.(type) {
		case a2a.Text:
			if s := strings.TrimSpace(string(c)); s != "" {
				texts = append(texts, s)
			}
		case a2a.Data:
			actx.Data = append(actx.Data, c.Value)
		case a2a.Raw:
			// A file's bytes: SendMessage stores it as an artifact
			// (putFiles) and names it in the context (attachFiles).
		default:
			return cmd, fmt.Errorf("%w: part %d is a file by URL (%T): the node fetches nothing for a caller; send the file's bytes", a2a.ErrUnsupportedContentType, i, c)
		}
	}
	if len(texts) == 0 {
		return cmd, fmt.Errorf("%w: the message has no text part: its text is the task's title and description", a2a.ErrInvalidParams)
	}
	cmd.Description = strings.Join(texts, "\n\n")
	cmd.Title = title(texts[0])
	raw, err := json.Marshal(actx)
	if err != nil {
		return cmd, fmt.Errorf("%w: data parts: %w", a2a.ErrInvalidParams, err)
	}
	cmd.Context = raw
	return cmd, nil
}

// title is s's first line, cut to api.MaxTitleLen bytes on a rune boundary.
func title(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s = strings.TrimSpace(s)
	for len(s) > api.MaxTitleLen {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
