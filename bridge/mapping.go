package bridge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/maos-project/maos/fsm"
)

// Options are the defaults of a mapping.
type Options struct {
	// Channel is the channel of a message whose file names none
	// (no session_id or channel field). Empty means: the channel folder's
	// name for the channel layout, else Fallback.
	Channel string
	// Fallback is the last-resort channel (the import root's name,
	// sanitised); Map fails if it is needed and empty.
	Fallback string
}

// idRE is fsm's rule for message ids (fsm/message.go).
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// channelFileRE is the seed's channel file name; its date and time give a
// timestamp to a file that has none.
var channelFileRE = regexp.MustCompile(`^msg-(\d{8}-\d{6})-`)

// consumed are the fields the mapping turns into message fields; every
// other top-level field is kept under metadata.
var consumed = []string{"id", "message_id", "timestamp", "session_id", "channel",
	"from", "from_agent", "to", "to_agent", "type", "message_type", "title",
	"subject", "content", "body", "priority", "in_reply_to", "thread_id",
	"correlation_id", "requires_response", "tags", "visibility", "metadata"}

// Map turns one message file (its bytes raw, found at f) into the message to
// send. The result depends only on raw, f's place and opt, so mapping the
// same file twice gives the same message (and the same content hash).
//
// Fields, first present wins:
//   - id: id, message_id, the file name's stem (msg*.json), else
//     "imp-" + 16 hex digits of the file's SHA-256. An id that breaks the
//     maos id rule becomes "imp-" + 16 hex digits of its SHA-256, the
//     original kept as metadata.original_id;
//   - from: from, from_agent, the outbox's agent; to: to, to_agent, the
//     inbox's agent. Names are lower-cased and every character outside
//     [a-z0-9._-] becomes "-" (originals kept as metadata.original_from /
//     original_to when that changed them);
//   - channel: session_id, channel, opt.Channel, the channel folder's name,
//     opt.Fallback (sanitised like names);
//   - type: type, message_type; title: title, subject;
//   - content: a string, or {text, code, artifacts}; without text: body,
//     text, message, rationale, description, task.description, else the
//     whole file as compact JSON;
//   - priority: urgent/high/normal/low ("critical" → urgent, "medium" and
//     anything else → normal, the original kept as metadata.original_priority);
//   - in_reply_to: in_reply_to or metadata.in_reply_to; thread_id,
//     correlation_id, requires_response, tags, visibility as named;
//   - timestamp: RFC 3339 (a zone-less time is UTC) or Unix seconds, else
//     the channel file name's date, else none (the cluster stamps it);
//   - metadata: the file's metadata object plus every other field.
//
// The error names the field that could not be mapped.
func Map(f File, raw []byte, opt Options) (*fsm.Message, error) {
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
	if id == "" {
		stem := strings.TrimSuffix(filepath.Base(f.Path), ".json")
		if strings.HasPrefix(stem, "msg") && idRE.MatchString(stem) {
			id = stem
		} else {
			id = "imp-" + hash16(raw)
		}
	}
	m.ID = mapID(id, "original_id", setMeta)

	// from, to
	from, err := s("from", "from_agent")
	if err != nil {
		return nil, err
	}
	if from == "" && f.Box == "outbox" {
		from = f.Agent
	}
	if from == "" {
		return nil, errors.New("from: missing (no from or from_agent field, not in an outbox)")
	}
	m.From = SanitizeName(from)
	if m.From == "" {
		return nil, fmt.Errorf("from: %q has no letter or digit", from)
	}
	if m.From != from {
		setMeta("original_from", from)
	}
	to, err := recipients(obj)
	if err != nil {
		return nil, err
	}
	if len(to) == 0 && f.Box == "inbox" {
		to = []string{f.Agent}
	}
	if len(to) == 0 {
		return nil, errors.New("to: missing (no to or to_agent field, not in an inbox)")
	}
	changed := false
	for _, r := range to {
		n := sanitizeRecipient(r)
		if n == "" {
			return nil, fmt.Errorf("to: %q has no letter or digit", r)
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
	for _, c := range []string{ch, opt.Channel, folderOf(f), opt.Fallback} {
		if c != "" {
			ch = c
			break
		}
	}
	m.Channel = SanitizeName(ch)
	if m.Channel == "" {
		return nil, errors.New("channel: none (no session_id or channel field); give a default channel")
	}
	if m.Channel != ch && ch != opt.Channel && ch != folderOf(f) && ch != opt.Fallback {
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
		m.Priority = mapPriority(p)
		if string(m.Priority) != p {
			setMeta("original_priority", p)
		}
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
			return nil, errors.New("tags: want a list of strings")
		}
		for _, t := range tags {
			if n := SanitizeName(t); n != "" && !slices.Contains(m.Tags, n) && len(m.Tags) < fsm.MaxTags {
				m.Tags = append(m.Tags, n)
			}
		}
	}
	if v, _ := s("visibility"); v == "private" || v == "public" {
		m.Visibility = v
	}

	// timestamp
	ts, err := timestamp(obj, f)
	if err != nil {
		return nil, err
	}
	m.Timestamp = ts

	if len(meta) > 0 {
		b, err := json.Marshal(meta) // keys sorted, values compacted
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		m.Metadata = b
	}
	check := *m
	check.Normalize(time.Time{})
	if err := check.Validate(); err != nil {
		return nil, err
	}
	return m, nil
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
	if idRE.MatchString(id) {
		return id
	}
	setMeta(key, id)
	return "imp-" + hash16([]byte(id))
}

func hash16(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func folderOf(f File) string {
	if f.Layout == LayoutChannel {
		return f.Folder
	}
	return ""
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
			return "", fmt.Errorf("%s: want a string, got %s", k, truncate(string(v), 40))
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
			return nil, fmt.Errorf("%s: want a string or a list of strings", k)
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
				return errors.New("content: want a string or {text, code, artifacts}")
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
				c.Artifacts = append(c.Artifacts, s)
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
		return fmt.Errorf("content: %w", err)
	}
	c.Text = buf.String()
	return nil
}

func timestamp(obj map[string]json.RawMessage, f File) (time.Time, error) {
	if v, ok := obj["timestamp"]; ok && !isNull(v) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
				if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
					return t.UTC(), nil
				}
			}
			return time.Time{}, fmt.Errorf("timestamp: %q is not an ISO-8601 time", truncate(s, 40))
		}
		var n float64
		if json.Unmarshal(v, &n) == nil && n > 0 {
			sec := int64(n)
			return time.Unix(sec, int64((n-float64(sec))*1e9)/1e6*1e6).UTC(), nil
		}
		return time.Time{}, fmt.Errorf("timestamp: want an ISO-8601 string or Unix seconds, got %s", truncate(string(v), 40))
	}
	if m := channelFileRE.FindStringSubmatch(filepath.Base(f.Path)); m != nil {
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
