package dialect

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/maos-project/maos/fsm"
)

// Place is what a message's location says about it where its body does
// not: the folder layout of a file import reads. The zero Place is a
// message posted to the API, which has none.
type Place struct {
	// FileName is the file's base name ("" for a message not read from a
	// file). A msg*.json stem is the id of a file that has none, a
	// channel file's msg-YYYYMMDD-HHMMSS- prefix its timestamp; a file
	// with neither id nor such a stem is "imp-" and a hash of its bytes.
	FileName string
	// Sender is the outbox's agent: the sender of a message whose body
	// names none.
	Sender string
	// Recipient is the inbox's agent: the recipient of a message whose
	// body names none.
	Recipient string
	// Folder is the channel folder's name: the channel of a message whose
	// body names none and Options.Channel is "".
	Folder string
}

// Options are the defaults of a mapping.
type Options struct {
	// Channel is the channel of a message whose body names none (no
	// session_id or channel field). Empty means: Place.Folder, else
	// Fallback.
	Channel string
	// Fallback is the last-resort channel (an import root's name,
	// sanitised); Map fails if it is needed and empty.
	Fallback string
}

// channelFileRE is the seed's channel file name; its date and time give a
// timestamp to a file that has none.
var channelFileRE = regexp.MustCompile(`^msg-(\d{8}-\d{6})-`)

// consumed are the fields the mapping turns into message fields; every
// other top-level field is kept under metadata.
var consumed = []string{"id", "message_id", "timestamp", "session_id", "channel",
	"from", "from_agent", "to", "to_agent", "type", "message_type", "title",
	"subject", "content", "body", "priority", "in_reply_to", "thread_id",
	"correlation_id", "requires_response", "tags", "visibility", "metadata"}

// markers are the top-level fields only the seeds' dialects have: seed
// 001's session_id, seed 002's subject, body and context, seed 004's
// message_type, message_id, from_agent, to_agent and privacy_level.
var markers = []string{"session_id", "subject", "body", "context",
	"message_type", "message_id", "from_agent", "to_agent", "privacy_level"}

// Is reports whether obj, a message's top-level fields, is in one of the
// seeds' dialects rather than maos's own format: it has a marker field
// (markers), or a content that is a string (the mailbox format of seed
// 000). A body in maos's own format has none of them, so its unknown
// fields stay errors (a typo must not vanish into metadata).
func Is(obj map[string]json.RawMessage) bool {
	for _, k := range markers {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	c := bytes.TrimSpace(obj["content"])
	return len(c) > 0 && c[0] == '"'
}

// Map turns one message in any of the seeds' dialects (raw, a JSON
// object), found at p, into the message to send. The result depends only
// on raw, p and opt, so mapping the same file twice gives the same
// message (and the same content hash).
//
// Fields, first present wins:
//   - id: id, message_id, the file name's stem (msg*.json), else for a
//     file "imp-" + 16 hex digits of its SHA-256, for a message not read
//     from a file none (the send generates one). An id that breaks the
//     maos id rule becomes "imp-" + 16 hex digits of its SHA-256, the
//     original kept as metadata.original_id;
//   - from: from, from_agent, p.Sender; to: to, to_agent, p.Recipient.
//     Names are lower-cased and every character outside [a-z0-9._-]
//     becomes "-" (originals kept as metadata.original_from /
//     original_to when that changed them);
//   - channel: session_id, channel, opt.Channel, p.Folder, opt.Fallback
//     (sanitised like names);
//   - type: type, message_type; title: title, subject;
//   - content: a string, or {text, code, artifacts}; without text: body,
//     text, message, rationale, description, task.description, else the
//     whole body as compact JSON;
//   - priority: urgent/high/normal/low ("critical" → urgent, "medium" and
//     anything else → normal, the original kept as metadata.original_priority);
//   - in_reply_to: in_reply_to or metadata.in_reply_to; thread_id,
//     correlation_id, requires_response, tags, visibility as named;
//   - timestamp: RFC 3339 (a zone-less time is UTC) or Unix seconds, else
//     the channel file name's date, else none (the cluster stamps it);
//   - metadata: the body's metadata object plus every other field (seed
//     004's privacy_level among them: the state machine reads it there).
//
// The result is checked as fsm would check it (Normalize, Validate). The
// error is a *fsm.FieldError naming the field that could not be mapped,
// or says the body is not a JSON object.
func Map(raw []byte, p Place, opt Options) (*fsm.Message, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("not a JSON object: null")
	}
	meta := map[string]json.RawMessage{}
	if v, ok := obj["metadata"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &meta); err != nil || meta == nil {
			meta = map[string]json.RawMessage{"original_metadata": v}
		}
	}
	for k, v := range obj {
		if slices.Contains(consumed, k) {
			continue
		}
		if _, taken := meta[k]; taken {
			k = "x_" + k
		}
		meta[k] = v
	}
	setMeta := func(k, v string) {
		b, _ := json.Marshal(v)
		meta[k] = b
	}

	m := &fsm.Message{}
	var err error
	s := func(keys ...string) (string, error) { return firstString(obj, keys...) }

	// id
	id, err := s("id", "message_id")
	if err != nil {
		return nil, err
	}
	if id == "" && p.FileName != "" {
		stem := strings.TrimSuffix(p.FileName, ".json")
		if strings.HasPrefix(stem, "msg") && fsm.ValidID(stem) {
			id = stem
		} else {
			id = "imp-" + hash16(raw)
		}
	}
	if id != "" {
		m.ID = mapID(id, "original_id", setMeta)
	}

	// from, to
	from, err := s("from", "from_agent")
	if err != nil {
		return nil, err
	}
	if from == "" {
		from = p.Sender
	}
	if from == "" {
		return nil, fieldErr("from", "missing: no from or from_agent field%s", p.where(" (not in an outbox)"))
	}
	if m.From, err = sanitized("from", from, "original_from", setMeta); err != nil {
		return nil, err
	}
	to, err := recipients(obj)
	if err != nil {
		return nil, err
	}
	if len(to) == 0 && p.Recipient != "" {
		to = []string{p.Recipient}
	}
	if len(to) == 0 {
		return nil, fieldErr("to", "missing: no to or to_agent field%s", p.where(" (not in an inbox)"))
	}
	changed := false
	for _, r := range to {
		n := sanitizeRecipient(r)
		if n == "" {
			return nil, fieldErr("to", "%q has no letter or digit", r)
		}
		changed = changed || n != r
		if !slices.Contains(m.To, n) {
			m.To = append(m.To, n)
		}
	}
	if changed {
		b, _ := json.Marshal(to)
		meta["original_to"] = b
	}

	// channel
	ch, err := s("session_id", "channel")
	if err != nil {
		return nil, err
	}
	for _, c := range []string{ch, opt.Channel, p.Folder, opt.Fallback} {
		if c != "" {
			ch = c
			break
		}
	}
	m.Channel = SanitizeName(ch)
	if m.Channel == "" {
		return nil, fieldErr("channel", "missing: no session_id or channel field%s", p.where("; give a default channel"))
	}
	if m.Channel != ch && ch != opt.Channel && ch != p.Folder && ch != opt.Fallback {
		setMeta("original_session_id", ch)
	}
	// type, title, priority
	typ, err := s("type", "message_type")
	if err != nil {
		return nil, err
	}
	m.Type = SanitizeName(typ)
	if m.Type != typ && typ != "" {
		setMeta("original_type", typ)
	}
	title, err := s("title", "subject")
	if err != nil {
		return nil, err
	}
	m.Title = cleanTitle(title)
	if p, _ := s("priority"); p != "" {
		m.Priority = priorityOf(p, setMeta)
	}

	// content
	if err := mapContent(obj, raw, &m.Content); err != nil {
		return nil, err
	}

	// threading
	reply, err := s("in_reply_to")
	if err != nil {
		return nil, err
	}
	if reply == "" {
		reply, _ = firstString(meta, "in_reply_to")
	}
	if reply != "" {
		m.InReplyTo = mapID(reply, "original_in_reply_to", setMeta)
	}
	if th, err := s("thread_id"); err != nil {
		return nil, err
	} else if th != "" {
		m.ThreadID = mapID(th, "original_thread_id", setMeta)
	}
	if c, _ := s("correlation_id"); c != "" && len(c) <= fsm.MaxIDLen {
		m.CorrelationID = c
	} else if c != "" {
		setMeta("original_correlation_id", c)
	}
	if v, ok := obj["requires_response"]; ok {
		var b bool
		if json.Unmarshal(v, &b) == nil {
			m.RequiresResponse = b
		} else {
			meta["original_requires_response"] = v
		}
	}
	if v, ok := obj["tags"]; ok && !isNull(v) {
		var tags []string
		if err := json.Unmarshal(v, &tags); err != nil {
			return nil, fieldErr("tags", "want a list of strings")
		}
		for _, t := range tags {
			if n := SanitizeName(t); n != "" && !slices.Contains(m.Tags, n) && len(m.Tags) < fsm.MaxTags {
				m.Tags = append(m.Tags, n)
			}
		}
	}
	if v, _ := s("visibility"); v == fsm.VisibilityPublic || v == fsm.VisibilityPrivate || v == fsm.VisibilityModerators {
		m.Visibility = v
	}

	// timestamp
	ts, err := timestamp(obj, p)
	if err != nil {
		return nil, err
	}
	m.Timestamp = ts

	if m.Metadata, err = contextJSON("metadata", meta); err != nil {
		return nil, err
	}
	return checked(m)
}

// SanitizeName maps s onto the maos name rule (fsm.NamePattern):
// lower-cased, every other character "-", leading non-alphanumerics
// dropped, cut at 64 bytes. It returns "" when nothing is left.
func SanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() == 0:
			// a name starts with a letter or digit
		case r == '.' || r == '_' || r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= fsm.MaxNameLen {
			break
		}
	}
	out := b.String()
	if len(out) > fsm.MaxNameLen {
		out = out[:fsm.MaxNameLen]
	}
	return out
}

// sanitizeRecipient keeps "*", "all" and role:NAME, and sanitises the rest;
// a glob keeps its wildcards.
func sanitizeRecipient(r string) string {
	l := strings.ToLower(strings.TrimSpace(r))
	switch {
	case l == "*" || l == "all":
		return l
	case strings.HasPrefix(l, "role:"):
		if n := SanitizeName(l[5:]); n != "" {
			return "role:" + n
		}
		return ""
	case strings.ContainsAny(l, "*?"):
		var b strings.Builder
		for _, c := range l {
			if c == '*' || c == '?' || c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
				b.WriteRune(c)
			} else {
				b.WriteByte('-')
			}
		}
		return strings.TrimLeft(b.String(), "._-")
	}
	return SanitizeName(l)
}

// mapID keeps an id that meets the maos rule and otherwise derives one from
// its hash, keeping the original under metadata key.
func mapID(id, key string, setMeta func(k, v string)) string {
	if fsm.ValidID(id) {
		return id
	}
	setMeta(key, id)
	return "imp-" + hash16([]byte(id))
}

func hash16(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// firstString returns the first of keys present in obj as a non-empty
// string; a present non-string value is an error naming the key.
func firstString(obj map[string]json.RawMessage, keys ...string) (string, error) {
	for _, k := range keys {
		v, ok := obj[k]
		if !ok || isNull(v) {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fieldErr(k, "want a string, got %s", truncate(string(v), 40))
		}
		if s = strings.TrimSpace(s); s != "" {
			return s, nil
		}
	}
	return "", nil
}

func recipients(obj map[string]json.RawMessage) ([]string, error) {
	for _, k := range []string{"to", "to_agent"} {
		v, ok := obj[k]
		if !ok || isNull(v) {
			continue
		}
		var r fsm.Recipients
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fieldErr(k, "want a string or a list of strings")
		}
		var out []string
		for _, s := range r {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, nil
}

func mapPriority(p string) fsm.Priority {
	switch l := fsm.Priority(strings.ToLower(p)); {
	case fsm.ValidPriority(l):
		return l
	case l == "critical":
		return fsm.PriorityUrgent
	}
	return fsm.DefaultPriority
}

func mapContent(obj map[string]json.RawMessage, raw []byte, c *fsm.Content) error {
	if v, ok := obj["content"]; ok && !isNull(v) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			c.Text = s
		} else {
			var o struct {
				Text      *string           `json:"text"`
				Code      *string           `json:"code"`
				Artifacts []json.RawMessage `json:"artifacts"`
			}
			if err := json.Unmarshal(v, &o); err != nil {
				return fieldErr("content", "want a string or {text, code, artifacts}")
			}
			if o.Text != nil {
				c.Text = *o.Text
			}
			if o.Code != nil {
				c.Code = *o.Code
			}
			for _, a := range o.Artifacts {
				var s string
				if json.Unmarshal(a, &s) != nil {
					var buf bytes.Buffer
					_ = json.Compact(&buf, a)
					s = buf.String()
				}
				c.Artifacts = append(c.Artifacts, fsm.ArtifactRef{Ref: s})
			}
		}
	}
	if strings.TrimSpace(c.Text) != "" {
		return nil
	}
	for _, k := range []string{"body", "text", "message", "rationale", "description"} {
		if s, err := firstString(obj, k); err == nil && s != "" {
			c.Text = s
			return nil
		}
	}
	if v, ok := obj["task"]; ok {
		var t map[string]json.RawMessage
		if json.Unmarshal(v, &t) == nil {
			if s, err := firstString(t, "description"); err == nil && s != "" {
				c.Text = s
				return nil
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fieldErr("content", "%v", err)
	}
	c.Text = buf.String()
	return nil
}

func timestamp(obj map[string]json.RawMessage, p Place) (time.Time, error) {
	if v, ok := obj["timestamp"]; ok && !isNull(v) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
				if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
					return t.UTC(), nil
				}
			}
			return time.Time{}, fieldErr("timestamp", "%q is not an ISO-8601 time", truncate(s, 40))
		}
		var n float64
		if json.Unmarshal(v, &n) == nil && n > 0 {
			sec := int64(n)
			return time.Unix(sec, int64((n-float64(sec))*1e9)/1e6*1e6).UTC(), nil
		}
		return time.Time{}, fieldErr("timestamp", "want an ISO-8601 string or Unix seconds, got %s", truncate(string(v), 40))
	}
	if m := channelFileRE.FindStringSubmatch(p.FileName); m != nil {
		if t, err := time.Parse("20060102-150405", m[1]); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, nil
}

func cleanTitle(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	for len(s) > fsm.MaxTitleLen {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// fieldErr is the *fsm.FieldError (wrapping fsm.ErrInvalid) for field.
func fieldErr(field, format string, args ...any) error {
	return &fsm.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// where is note for a message read from a file, "" for one posted to the
// API: what the file's place could have said.
func (p Place) where(note string) string {
	if p.FileName == "" {
		return ""
	}
	return note
}
