package dialect

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/maos-project/maos/api"
)

// TypeApprovalRequest is seed 004's message_type of a human-in-the-loop
// approval request.
const TypeApprovalRequest = "hitl_approval_request"

// approvalFields are the fields of a hitl_approval_request MapApproval
// turns into the approval's; every other top-level field is kept under
// its context.
var approvalFields = []string{"id", "message_id", "type", "message_type", "from", "from_agent", "to", "to_agent",
	"approvers_tagged", "quorum", "title", "subject", "approval_needed_for", "proposed_action", "rationale",
	"confidence", "priority", "timeout_hours", "on_timeout", "human_decision_options", "task_id",
	"session_id", "channel"}

// MapApproval maps raw, a message in a seed's dialect, onto an approval
// request when seed 004 calls it a hitl_approval_request (its
// message_type, or type); for any other message it returns nil and no
// error. registered reports whether an agent id is registered in the
// cluster: the mapping stays pure, the caller reads the registry.
//
//   - id from id or message_id (one that breaks the maos rule becomes
//     "imp-" and a hash, the original kept as context.original_id);
//   - from from from or from_agent, sanitised like a message's sender;
//   - approvers from approvers_tagged: "@name" is the agent name when it
//     is registered (dropped otherwise, kept as
//     context.unresolved_approvers), "@role:NAME" the role; none left (or
//     no approvers_tagged), the message's to or to_agent (kept as
//     context.original_to when not used);
//   - title from title or subject, else approval_needed_for, else the
//     rationale's first line;
//   - proposed_action → action (required); approval_needed_for,
//     rationale, confidence, quorum, on_timeout, task_id as named;
//     timeout_hours; priority mapped as a message's (high/medium/low →
//     high/normal/low, the original kept as context.original_priority);
//   - human_decision_options → options (lower-cased);
//   - channel from session_id or channel, else the default;
//   - every other field (timestamp, github_comment_url, ...) under
//     context.
//
// The error is a *api.FieldError naming the field, from the mapping or
// from the command's Validate.
func MapApproval(raw []byte, registered func(id string) bool) (*api.ApprovalRequestCommand, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, nil // not an object: Map says why
	}
	typ, err := firstString(obj, "type", "message_type")
	if err != nil || typ != TypeApprovalRequest {
		return nil, err
	}
	ctx := map[string]json.RawMessage{}
	for k, v := range obj {
		if !slices.Contains(approvalFields, k) {
			ctx[k] = v
		}
	}
	setCtx := func(k string, v any) {
		b, _ := json.Marshal(v)
		ctx[k] = b
	}
	setCtxString := func(k, v string) { setCtx(k, v) }
	c := &api.ApprovalRequestCommand{}
	s := func(keys ...string) (string, error) { return firstString(obj, keys...) }

	id, err := s("id", "message_id")
	if err != nil {
		return nil, err
	}
	if id != "" {
		c.ID = mapID(id, "original_id", setCtxString)
	}
	if c.From, err = mapFrom(obj, "from_agent", setCtxString); err != nil {
		return nil, err
	}
	if c.Approvers, err = mapApprovers(obj, registered, setCtx); err != nil {
		return nil, err
	}
	if err := mapApprovalFields(c, obj, setCtxString); err != nil {
		return nil, err
	}
	if c.Channel, err = mapChannel(obj, setCtxString); err != nil {
		return nil, err
	}
	if c.Context, err = contextJSON("context", ctx); err != nil {
		return nil, err
	}
	return checked(c)
}

// mapApprovalFields fills c's texts (what needs approval, rationale,
// on_timeout, task_id, title), action, priority, numbers and options.
func mapApprovalFields(c *api.ApprovalRequestCommand, obj map[string]json.RawMessage, setCtx func(k, v string)) error {
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"approval_needed_for", &c.ApprovalNeededFor}, {"rationale", &c.Rationale}, {"on_timeout", &c.OnTimeout}, {"task_id", &c.TaskID}} {
		if *f.dst, err = firstString(obj, f.key); err != nil {
			return err
		}
	}
	title, err := firstString(obj, "title", "subject")
	if err != nil {
		return err
	}
	if title == "" {
		title = c.ApprovalNeededFor
	}
	if title == "" {
		title, _, _ = strings.Cut(c.Rationale, "\n")
	}
	c.Title = strings.TrimSpace(cleanTitle(title))
	if v, ok := obj["proposed_action"]; ok && !isNull(v) {
		c.Action = v
	} else {
		return fieldErr("proposed_action", "missing: the action the approvers decide on")
	}
	if p, err := firstString(obj, "priority"); err != nil {
		return err
	} else if p != "" {
		c.Priority = priorityOf(p, setCtx)
	}
	return mapApprovalNumbers(c, obj)
}

// mapApprovalNumbers fills c's confidence, timeout, quorum and decision
// options (lower-cased).
func mapApprovalNumbers(c *api.ApprovalRequestCommand, obj map[string]json.RawMessage) error {
	for _, f := range []struct {
		key  string
		dst  any
		want string
	}{
		{"confidence", &c.Confidence, "a number from 0 to 1"},
		{"timeout_hours", &c.TimeoutHours, "a number of hours"},
		{"quorum", &c.Quorum, "a whole number"},
		{"human_decision_options", &c.Options, "a list of " + strings.Join(api.Decisions, ", ")},
	} {
		if v, ok := obj[f.key]; ok && !isNull(v) {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return fieldErr(f.key, "want %s, got %s", f.want, truncate(string(v), 40))
			}
		}
	}
	for i, o := range c.Options {
		c.Options[i] = strings.ToLower(strings.TrimSpace(o))
	}
	return nil
}

// mapApprovers resolves approvers_tagged ("@name", "@role:NAME") against
// the registry, falling back on to / to_agent when none is left, and notes
// in the context (set) what it dropped or left unused.
func mapApprovers(obj map[string]json.RawMessage, registered func(string) bool, set func(string, any)) ([]string, error) {
	var tagged, out, dropped []string
	if v, ok := obj["approvers_tagged"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &tagged); err != nil {
			return nil, fieldErr("approvers_tagged", "want a list of @names, got %s", truncate(string(v), 40))
		}
	}
	for _, t := range tagged {
		name := sanitizeAssignee(strings.TrimPrefix(strings.TrimSpace(t), "@"))
		isRole := strings.HasPrefix(name, api.RolePrefix)
		switch {
		case name == "" || strings.HasPrefix(name, api.CapabilityPrefix) || (!isRole && (registered == nil || !registered(name))):
			dropped = append(dropped, t)
		case !slices.Contains(out, name):
			out = append(out, name)
		}
	}
	if len(dropped) > 0 {
		set("unresolved_approvers", dropped)
	}
	to, err := recipients(obj)
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		if len(to) > 0 {
			set("original_to", to)
		}
		return out, nil
	}
	changed := false
	for _, r := range to {
		name := sanitizeAssignee(r)
		if name == "" {
			return nil, fieldErr("to_agent", "%q has no letter or digit", r)
		}
		changed = changed || name != r
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if changed {
		set("original_to", to)
	}
	if len(out) == 0 {
		return nil, fieldErr("approvers_tagged", "no registered agent among %d tagged and no to_agent to fall back on", len(tagged))
	}
	return out, nil
}
