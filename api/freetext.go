package api

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextKind says how a free-text field is checked before it is proposed.
type TextKind int

const (
	// TextLine is a title, an id or a label, shown on one line: no
	// control characters other than tab and newline.
	TextLine TextKind = iota
	// TextBody is free text: any character (a terminal shows it only
	// escaped; see maosctl's output).
	TextBody
	// TextJSON is a JSON value whose strings are text (keys included).
	TextJSON
)

// TextField is one field of a command that stores text a client wrote.
// Name is the API's name for it ("content.text", "metadata",
// "completion.outputs[2]"); exactly one of Text and JSON is set, pointing
// into the command so the secret guard can redact in place.
type TextField struct {
	Name string
	Kind TextKind
	Text *string
	JSON *json.RawMessage
}

func lines(name string, list []string, kind TextKind) []TextField {
	out := make([]TextField, len(list))
	for i := range list {
		out[i] = TextField{Name: fmt.Sprintf("%s[%d]", name, i), Kind: kind, Text: &list[i]}
	}
	return out
}

// FreeText of a message: its id, title, text, code, tags, the ids it
// refers to, its artifacts' names and metadata.
func (m *Message) FreeText() []TextField {
	out := []TextField{
		{Name: "id", Kind: TextLine, Text: &m.ID},
		{Name: "title", Kind: TextLine, Text: &m.Title},
		{Name: "content.text", Kind: TextBody, Text: &m.Content.Text},
		{Name: "content.code", Kind: TextBody, Text: &m.Content.Code},
		{Name: "in_reply_to", Kind: TextLine, Text: &m.InReplyTo},
		{Name: "thread_id", Kind: TextLine, Text: &m.ThreadID},
		{Name: "correlation_id", Kind: TextLine, Text: &m.CorrelationID},
		{Name: "metadata", Kind: TextJSON, JSON: &m.Metadata},
	}
	out = append(out, lines("tags", m.Tags, TextLine)...)
	for i := range m.Content.Artifacts {
		a := &m.Content.Artifacts[i]
		out = append(out, TextField{Name: fmt.Sprintf("content.artifacts[%d]", i), Kind: TextLine, Text: &a.Ref})
		if a.Name != "" {
			out = append(out, TextField{Name: fmt.Sprintf("content.artifacts[%d].name", i), Kind: TextLine, Text: &a.Name})
		}
	}
	return out
}

// FreeText of a send is its message's.
func (c *SendCommand) FreeText() []TextField { return c.Message.FreeText() }

// FreeText of a task's creation.
func (c *TaskCreateCommand) FreeText() []TextField {
	return []TextField{
		{Name: "id", Kind: TextLine, Text: &c.ID},
		{Name: "title", Kind: TextLine, Text: &c.Title},
		{Name: "description", Kind: TextBody, Text: &c.Description},
		{Name: "context", Kind: TextJSON, JSON: &c.Context},
	}
}

// FreeText of a progress report: its words.
func (c *TaskProgressCommand) FreeText() []TextField {
	return []TextField{{Name: "message", Kind: TextBody, Text: &c.Message}}
}

// FreeText of a completion: every text and JSON field of seed 004's
// task_completion.
func (c *TaskCompleteCommand) FreeText() []TextField {
	tc := &c.Completion
	out := []TextField{
		{Name: "completion.result", Kind: TextBody, Text: &tc.Result},
		{Name: "completion.rationale", Kind: TextBody, Text: &tc.Rationale},
		{Name: "completion.flags", Kind: TextJSON, JSON: &tc.Flags},
		{Name: "completion.metrics", Kind: TextJSON, JSON: &tc.Metrics},
		{Name: "completion.proposed_action", Kind: TextJSON, JSON: &tc.ProposedAction},
	}
	for i := range tc.ActionsTaken {
		out = append(out, TextField{Name: fmt.Sprintf("completion.actions_taken[%d]", i), Kind: TextJSON, JSON: &tc.ActionsTaken[i]})
	}
	out = append(out, lines("completion.next_steps", tc.NextSteps, TextBody)...)
	out = append(out, lines("completion.outputs", tc.Outputs, TextBody)...)
	if e := tc.Error; e != nil {
		out = append(out,
			TextField{Name: "completion.error.error_type", Kind: TextLine, Text: &e.ErrorType},
			TextField{Name: "completion.error.error_message", Kind: TextBody, Text: &e.ErrorMessage},
			TextField{Name: "completion.error.error_code", Kind: TextLine, Text: &e.ErrorCode},
			TextField{Name: "completion.error.suggested_action", Kind: TextBody, Text: &e.SuggestedAction})
	}
	return out
}

// FreeText of a handoff: its reason.
func (c *TaskHandoffCommand) FreeText() []TextField {
	return []TextField{{Name: "reason", Kind: TextBody, Text: &c.Reason}}
}

// FreeText of a task's cancel: its reason.
func (c *TaskCancelCommand) FreeText() []TextField {
	return []TextField{{Name: "reason", Kind: TextBody, Text: &c.Reason}}
}

// FreeText of a claim: none (ids and fences).
func (c *TaskClaimCommand) FreeText() []TextField { return nil }

// FreeText of an approval request.
func (c *ApprovalRequestCommand) FreeText() []TextField {
	return []TextField{
		{Name: "id", Kind: TextLine, Text: &c.ID},
		{Name: "title", Kind: TextLine, Text: &c.Title},
		{Name: "approval_needed_for", Kind: TextBody, Text: &c.ApprovalNeededFor},
		{Name: "rationale", Kind: TextBody, Text: &c.Rationale},
		{Name: "action", Kind: TextJSON, JSON: &c.Action},
		{Name: "context", Kind: TextJSON, JSON: &c.Context},
	}
}

// FreeText of a decision: its comment and a modify's action.
func (c *ApprovalDecideCommand) FreeText() []TextField {
	return []TextField{
		{Name: "comment", Kind: TextBody, Text: &c.Comment},
		{Name: "action", Kind: TextJSON, JSON: &c.Action},
	}
}

// FreeText of an approval's cancel: its reason.
func (c *ApprovalCancelCommand) FreeText() []TextField {
	return []TextField{{Name: "reason", Kind: TextBody, Text: &c.Reason}}
}

// FreeText of a bulletin write: the document (or patch).
func (c *BulletinCommand) FreeText() []TextField {
	return []TextField{{Name: "bulletin", Kind: TextJSON, JSON: &c.Doc}}
}

// FreeText of a lock's grant: its path.
func (c *LockAcquireCommand) FreeText() []TextField {
	return []TextField{{Name: "path", Kind: TextLine, Text: &c.Path}}
}

// FreeText of a lock's renewal: its path.
func (c *LockRenewCommand) FreeText() []TextField {
	return []TextField{{Name: "path", Kind: TextLine, Text: &c.Path}}
}

// FreeText of a lock's release: its path.
func (c *LockReleaseCommand) FreeText() []TextField {
	return []TextField{{Name: "path", Kind: TextLine, Text: &c.Path}}
}

// FreeText of an agent's registration: its description and an A2A
// remote's URL. Not the A2A credential: it is a secret on purpose (the
// relay's bearer token), which the guard would refuse or redact.
func (c *RegisterAgentCommand) FreeText() []TextField {
	f := []TextField{{Name: "description", Kind: TextBody, Text: &c.Description}}
	if c.A2A != nil {
		f = append(f, TextField{Name: "a2a.url", Kind: TextLine, Text: &c.A2A.URL})
	}
	return f
}

// FreeText of an artifact's record: its name (the bytes are scanned as
// they are stored, before the record is proposed).
func (c *ArtifactPutCommand) FreeText() []TextField {
	return []TextField{{Name: "name", Kind: TextLine, Text: &c.Name}}
}

func (c *ArtifactDeleteCommand) FreeText() []TextField { return nil }

func (c *AgentLeaseAcquireCommand) FreeText() []TextField { return nil }

func (c *AgentLeaseRenewCommand) FreeText() []TextField     { return nil }
func (c *AgentLeaseRenewManyCommand) FreeText() []TextField { return nil }

func (c *AgentLeaseReleaseCommand) FreeText() []TextField { return nil }

func (c *AuditDenialCommand) FreeText() []TextField { return nil }

func (c *ClusterIDCommand) FreeText() []TextField { return nil }

func (c *ClusterVersionCommand) FreeText() []TextField { return nil }

func (c *CreateTokenCommand) FreeText() []TextField { return nil }

func (c *MarkReadCommand) FreeText() []TextField { return nil }

func (c *NodeEventCommand) FreeText() []TextField { return nil }

func (c *ReceiptStateCommand) FreeText() []TextField { return nil }

func (c *RegisterNodeCommand) FreeText() []TextField { return nil }

func (c *ReleaseHolderLocksCommand) FreeText() []TextField { return nil }

func (c *RevokeTokenCommand) FreeText() []TextField { return nil }

func (c *SetConfigCommand) FreeText() []TextField { return nil }

func (c *SetCursorCommand) FreeText() []TextField { return nil }

// FreeText of a push config: its URL. Not its token or credentials:
// secrets on purpose (the receiver's), which the guard would refuse.
func (c *PushConfigSetCommand) FreeText() []TextField {
	return []TextField{{Name: "config.url", Kind: TextLine, Text: &c.Config.URL}}
}

func (c *PushConfigDeleteCommand) FreeText() []TextField { return nil }

func (c *PushCursorCommand) FreeText() []TextField { return nil }

func (c *SetPolicyCommand) FreeText() []TextField { return nil }

func (c *SetRetentionCommand) FreeText() []TextField { return nil }

func (c *TickCommand) FreeText() []TextField { return nil }

func (c *TrimCommand) FreeText() []TextField { return nil }

func (c *UnregisterAgentCommand) FreeText() []TextField { return nil }

// FreeText of a rules document: none the guard scans. Only an admin
// writes it, and its reasons are the words refusals quote back.
func (c *SetRulesCommand) FreeText() []TextField { return nil }

func (m *Message) Actor() string { return m.From }

func (c *SendCommand) Actor() string { return c.Message.From }

func (c *TaskCreateCommand) Actor() string { return c.From }

func (c *TaskProgressCommand) Actor() string { return c.Agent }

func (c *TaskCompleteCommand) Actor() string { return c.Agent }

func (c *TaskHandoffCommand) Actor() string { return c.Agent }

func (c *TaskCancelCommand) Actor() string { return c.From }

func (c *PushConfigSetCommand) Actor() string { return c.From }

func (c *ApprovalRequestCommand) Actor() string { return c.From }

func (c *ApprovalDecideCommand) Actor() string { return c.Approver }

func (c *ApprovalCancelCommand) Actor() string { return c.From }

func (c *BulletinCommand) Actor() string { return c.By }

func (c *LockAcquireCommand) Actor() string { return c.Holder }

func (c *LockRenewCommand) Actor() string { return c.Holder }

func (c *LockReleaseCommand) Actor() string { return cmp.Or(c.By, c.Holder) }

func (c *RegisterAgentCommand) Actor() string { return c.ID }

func (c *ArtifactPutCommand) Actor() string { return c.From }

// FreeTexter is a command body: FreeText lists its free-text fields (nil
// when it stores none a client wrote: ids checked by a pattern, numbers,
// or text the node writes itself).
type FreeTexter interface {
	FreeText() []TextField
}

// Actor is implemented by the commands that store free text: the agent
// the command acts as (the name the audit trail gives a refusal of it).
type Actor interface {
	Actor() string
}

// MaxJSONDepth is how deeply any JSON a command carries may nest: objects
// and arrays, the command's own included (Encode refuses deeper). Go's
// decoder stops at 10,000, and every reader adds a few levels around a
// stored value (a page, an event), so a bound far below keeps every entry
// decodable at apply and every stored value readable by every client.
const MaxJSONDepth = 64

// CheckText checks a command's free text before it is proposed, naming
// the field: valid UTF-8 everywhere, no control characters other than tab
// and newline in a TextLine, and a TextJSON value valid JSON nested at most
// MaxJSONDepth deep. The error is a *FieldError.
func CheckText(fields []TextField) error {
	for _, f := range fields {
		switch {
		case f.Text != nil:
			if !utf8.ValidString(*f.Text) {
				return FieldErrorf(f.Name, "not valid UTF-8")
			}
			if f.Kind == TextLine {
				if i := strings.IndexFunc(*f.Text, lineControl); i >= 0 {
					r, _ := utf8.DecodeRuneInString((*f.Text)[i:])
					return FieldErrorf(f.Name, "control character %U at byte %d: a title, id or label may hold tab and newline, no other control character", r, i)
				}
			}
		case f.JSON != nil && len(*f.JSON) > 0:
			if err := checkJSON(f.Name, *f.JSON, MaxJSONDepth); err != nil {
				return err
			}
		}
	}
	return nil
}

func lineControl(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }

// checkJSON refuses b unless it is one valid JSON value of valid UTF-8
// nested at most max deep.
func checkJSON(field string, b []byte, max int) error {
	if err := CheckShape(field, b, max); err != nil {
		return err
	}
	if !json.Valid(b) {
		return FieldErrorf(field, "not valid JSON")
	}
	return nil
}

// CheckShape refuses JSON text b that is not valid UTF-8 or nests deeper
// than max (b is known to be valid JSON, or checked after).
func CheckShape(field string, b []byte, max int) error {
	if !utf8.Valid(b) {
		return FieldErrorf(field, "not valid UTF-8")
	}
	if d := jsonDepth(b); d > max {
		return FieldErrorf(field, "JSON nested %d deep, at most %d", d, max)
	}
	return nil
}

// jsonDepth is how deeply b's objects and arrays nest; strings are
// skipped, escapes included. It does not validate: json.Valid does.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}
