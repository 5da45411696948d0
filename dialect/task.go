package dialect

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/maos-project/maos/api"
)

// TaskMessage is a seed 004 task message mapped onto a task command:
// exactly one of Create and Complete is set. Posted to the API, a
// task_delegation creates a task and a task_completion completes one,
// instead of being stored as messages (the state machine then makes the
// task's own delegation and completion messages).
type TaskMessage struct {
	// Create is a task_delegation's task, normalized only as far as the
	// body says (the API's send fills the id and defaults).
	Create *api.TaskCreateCommand
	// Complete is a task_completion. Seed 004 has no fence, so Fence is 0:
	// the API accepts it from the task's current claimant only, under the
	// current claim's fence.
	Complete *api.TaskCompleteCommand
}

// taskCreateFields are the fields of a task_delegation MapTask turns into
// the task's; every other top-level field is kept under the task's
// context. taskObjectFields are those it takes from the "task" object.
var (
	taskCreateFields = []string{"id", "message_id", "type", "message_type", "from", "from_agent", "to", "to_agent",
		"title", "subject", "description", "priority", "session_id", "channel", "depends_on", "max_attempts",
		"timeout_seconds", "requires_hitl", "task"}
	taskObjectFields = []string{"description", "priority", "timeout_seconds", "requires_hitl", "depends_on", "max_attempts"}
)

// taskCompletionFields are the fields of a task_completion MapTask turns
// into the completion. taskEnvelopeFields are the envelope it drops: the
// completion reply the state machine posts has its own id and time (the
// entry's), answers the delegation and goes to the task's creator. Any
// other top-level field (seed 004's requires_human_review and
// human_review_reason among them) is kept under the completion's flags.
var (
	taskCompletionFields = []string{"status", "result", "confidence_score", "execution_time_ms", "actions_taken",
		"rationale", "next_steps", "flags", "metrics", "outputs", "error"}
	taskEnvelopeFields = []string{"id", "message_id", "type", "message_type", "timestamp", "from", "from_agent",
		"to", "to_agent", "task_id", "in_reply_to", "session_id", "channel"}
)

// MapTask maps raw, a message in a seed's dialect, onto a task command
// when seed 004 calls it a task_delegation or task_completion (its
// message_type, or type); for any other message it returns nil and no
// error, and the message is Map's. Pure, like Map.
//
// A task_delegation: id from id or message_id (an id that breaks the maos
// rule becomes "imp-" and a hash, the original kept under the context's
// original_id); from, to (one assignee: an agent, role:NAME or
// capability:NAME) sanitised like a message's names; title from title or
// subject, else the description's first line; description, priority,
// timeout_seconds, requires_hitl, depends_on and max_attempts from the
// "task" object, else the top level (priorities mapped as a message's);
// channel from session_id or channel, else the default; every other field,
// and what the task object holds besides, under context.
//
// A task_completion: the claimant from from or from_agent; the task from
// task_id, else in_reply_to (seed 004's delegation's message_id is the
// task's id); status, result, confidence_score, execution_time_ms,
// actions_taken, rationale, next_steps, flags, metrics, outputs and error
// as named (an error's fields the completion has no name for, such as its
// timestamp, are dropped); other fields under flags (taskEnvelopeFields
// are dropped).
//
// The error is a *api.FieldError naming the field, from the mapping or
// from the command's Validate (a completion's fence is not checked: it has
// none yet).
func MapTask(raw []byte) (*TaskMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, nil // not an object: Map says why
	}
	typ, err := firstString(obj, "type", "message_type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case api.TypeTaskDelegation:
		c, err := mapTaskCreate(obj)
		if err != nil {
			return nil, err
		}
		return &TaskMessage{Create: c}, nil
	case api.TypeTaskCompletion:
		c, err := mapTaskCompletion(obj)
		if err != nil {
			return nil, err
		}
		return &TaskMessage{Complete: c}, nil
	}
	return nil, nil
}

func mapTaskCreate(obj map[string]json.RawMessage) (*api.TaskCreateCommand, error) {
	ctx := map[string]json.RawMessage{}
	for k, v := range obj {
		if !slices.Contains(taskCreateFields, k) {
			ctx[k] = v
		}
	}
	setCtx := func(k, v string) {
		b, _ := json.Marshal(v)
		ctx[k] = b
	}
	// The task object's fields win over the top level's.
	task, err := taskObject(obj, ctx)
	if err != nil {
		return nil, err
	}
	field := func(k string) (json.RawMessage, string) {
		if v, ok := task[k]; ok && !isNull(v) {
			return v, "task." + k
		}
		if v, ok := obj[k]; ok && !isNull(v) {
			return v, k
		}
		return nil, ""
	}
	c := &api.TaskCreateCommand{}
	s := func(keys ...string) (string, error) { return firstString(obj, keys...) }

	id, err := s("id", "message_id")
	if err != nil {
		return nil, err
	}
	if id != "" {
		c.ID = mapID(id, "original_id", setCtx)
	}
	if c.From, err = mapFrom(obj, "from", setCtx); err != nil {
		return nil, err
	}
	if c.To, err = mapAssignee(obj, setCtx); err != nil {
		return nil, err
	}
	if err := mapTaskFields(c, field, s, setCtx); err != nil {
		return nil, err
	}
	if c.Channel, err = mapChannel(obj, setCtx); err != nil {
		return nil, err
	}
	if c.Context, err = contextJSON("context", ctx); err != nil {
		return nil, err
	}
	return checked(c)
}

// taskObject is the body's task object, its fields the mapping does not
// read kept as context.task; none is an empty object.
func taskObject(obj, ctx map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	task := map[string]json.RawMessage{}
	v, ok := obj["task"]
	if !ok || isNull(v) {
		return task, nil
	}
	if err := json.Unmarshal(v, &task); err != nil || task == nil {
		return nil, fieldErr("task", "want an object {description, priority, timeout_seconds, requires_hitl}")
	}
	rest := map[string]json.RawMessage{}
	for k, v := range task {
		if !slices.Contains(taskObjectFields, k) {
			rest[k] = v
		}
	}
	if len(rest) > 0 {
		b, _ := json.Marshal(rest)
		ctx["task"] = b
	}
	return task, nil
}

// mapAssignee is the task's one assignee (to, to_agent), sanitised, the
// original kept as context.original_to when that changed it.
func mapAssignee(obj map[string]json.RawMessage, setCtx func(k, v string)) (string, error) {
	to, err := recipients(obj)
	if err != nil {
		return "", err
	}
	switch len(to) {
	case 0:
		return "", fieldErr("to", "missing: no to or to_agent field")
	case 1:
	default:
		return "", fieldErr("to", "%d assignees: a task has one (an agent, role:NAME or capability:NAME)", len(to))
	}
	a := sanitizeAssignee(to[0])
	if a == "" {
		return "", fieldErr("to", "%q has no letter or digit", to[0])
	}
	if a != to[0] {
		setCtx("original_to", to[0])
	}
	return a, nil
}

// mapTaskFields fills c's description, title, priority and numbers; field
// finds a field in the task object, else the top level, and names it.
func mapTaskFields(c *api.TaskCreateCommand, field func(string) (json.RawMessage, string),
	s func(...string) (string, error), setCtx func(k, v string)) error {
	if v, name := field("description"); v != nil {
		if err := json.Unmarshal(v, &c.Description); err != nil {
			return fieldErr(name, "want a string, got %s", truncate(string(v), 40))
		}
	}
	title, err := s("title", "subject")
	if err != nil {
		return err
	}
	if title == "" {
		title, _, _ = strings.Cut(strings.TrimSpace(c.Description), "\n")
	}
	c.Title = strings.TrimSpace(cleanTitle(title))
	if v, name := field("priority"); v != nil {
		var p string
		if err := json.Unmarshal(v, &p); err != nil {
			return fieldErr(name, "want a string, got %s", truncate(string(v), 40))
		}
		c.Priority = priorityOf(p, setCtx)
	}
	for _, f := range []struct {
		key string
		dst any
	}{{"timeout_seconds", &c.TimeoutSeconds}, {"max_attempts", &c.MaxAttempts}, {"requires_hitl", &c.RequiresHITL}, {"depends_on", &c.DependsOn}} {
		if v, name := field(f.key); v != nil {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return fieldErr(name, "want %s, got %s", kindOf(f.dst), truncate(string(v), 40))
			}
		}
	}
	return nil
}

func mapTaskCompletion(obj map[string]json.RawMessage) (*api.TaskCompleteCommand, error) {
	c := &api.TaskCompleteCommand{}
	agent, err := firstString(obj, "from", "from_agent")
	if err != nil {
		return nil, err
	}
	if agent == "" {
		return nil, fieldErr("from_agent", "missing: the claimant that completes the task")
	}
	if c.Agent = SanitizeName(agent); c.Agent == "" {
		return nil, fieldErr("from_agent", "%q has no letter or digit", agent)
	}
	id, err := firstString(obj, "task_id", "in_reply_to")
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, fieldErr("task_id", "missing: no task_id or in_reply_to naming the task")
	}
	c.ID = mapID(id, "", func(string, string) {})

	known := map[string]json.RawMessage{}
	extra := map[string]json.RawMessage{}
	for k, v := range obj {
		switch {
		case slices.Contains(taskCompletionFields, k):
			if !isNull(v) {
				known[k] = v
			}
		case !slices.Contains(taskEnvelopeFields, k):
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		flags := map[string]json.RawMessage{}
		if v, ok := known["flags"]; ok {
			if err := json.Unmarshal(v, &flags); err != nil || flags == nil {
				flags = map[string]json.RawMessage{"original_flags": v}
			}
		}
		for k, v := range extra {
			if _, taken := flags[k]; taken {
				k = "x_" + k
			}
			flags[k] = v
		}
		b, err := json.Marshal(flags)
		if err != nil {
			return nil, fieldErr("flags", "%v", err)
		}
		known["flags"] = b
	}
	b, err := json.Marshal(known)
	if err != nil {
		return nil, fieldErr("completion", "%v", err)
	}
	// Decoded leniently: an error's fields the completion has no name for
	// (seed 004's error.timestamp) are dropped.
	if err := json.Unmarshal(b, &c.Completion); err != nil {
		return nil, completionFieldError(err)
	}
	if err := c.Completion.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// completionFieldError names the field a completion could not be decoded
// at.
func completionFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fieldErr(te.Field, "want %s, got a JSON %s", te.Type, te.Value)
	}
	return fieldErr("completion", "%v", err)
}

// sanitizeAssignee is a task's assignee mapped onto the maos names: an
// agent id, role:NAME or capability:NAME ("" when nothing is left).
func sanitizeAssignee(to string) string {
	l := strings.ToLower(strings.TrimSpace(to))
	for _, prefix := range []string{api.RolePrefix, api.CapabilityPrefix} {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			if n := SanitizeName(rest); n != "" {
				return prefix + n
			}
			return ""
		}
	}
	return SanitizeName(l)
}

// kindOf says what JSON a decoding target wants, for an error.
func kindOf(dst any) string {
	switch dst.(type) {
	case *int:
		return "a whole number"
	case *bool:
		return "true or false"
	case *[]string:
		return "a list of task ids"
	}
	return fmt.Sprintf("%T", dst)
}
