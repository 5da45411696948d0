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

	"github.com/maos-project/maos/api"
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
// error is a *api.FieldError naming the field that could not be mapped,
// or says the body is not a JSON object.
func Map(raw []byte, p Place, opt Options) (*api.Message, error) {
	mp, err := newMapping(raw, p, opt)
	if err != nil {
		return nil, err
	}
	for _, step := range mapSteps {
		if err := step(mp); err != nil {
			return nil, err
		}
	}
	if mp.m.Metadata, err = contextJSON("metadata", mp.meta); err != nil {
		return nil, err
	}
	return checked(mp.m)
}

// mapping is one Map in progress: the body's fields, the metadata being
// gathered and the message being filled.
type mapping struct {
	raw  []byte
	p    Place
	opt  Options
	obj  map[string]json.RawMessage
	meta map[string]json.RawMessage
	m    *api.Message
}

// mapSteps fill the message, field by field, in this order; the first
// error stops Map.
var mapSteps = []func(*mapping) error{
	(*mapping).id,
	(*mapping).from,
	(*mapping).to,
	(*mapping).channel,
	(*mapping).kind,
	func(mp *mapping) error { return mapContent(mp.obj, mp.raw, &mp.m.Content) },
	(*mapping).threading,
	(*mapping).flags,
	(*mapping).timestamp,
}

// newMapping parses raw and gathers its metadata: the body's metadata
// object (kept whole as original_metadata when it is not an object) and
// every field the mapping does not consume ("x_" + name when metadata has
// the name already).
func newMapping(raw []byte, p Place, opt Options) (*mapping, error) {
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
	return &mapping{raw: raw, p: p, opt: opt, obj: obj, meta: meta, m: &api.Message{}}, nil
}

// setMeta keeps v as metadata k.
func (mp *mapping) setMeta(k, v string) {
	b, _ := json.Marshal(v)
	mp.meta[k] = b
}

// s is the first of keys present in the body, as a string.
func (mp *mapping) s(keys ...string) (string, error) { return firstString(mp.obj, keys...) }

// id: id, message_id, else the file name's stem or a hash of the file.
func (mp *mapping) id() error {
	id, err := mp.s("id", "message_id")
	if err != nil {
		return err
	}
	if id == "" && mp.p.FileName != "" {
		stem := strings.TrimSuffix(mp.p.FileName, ".json")
		if strings.HasPrefix(stem, "msg") && api.ValidID(stem) {
			id = stem
		} else {
			id = "imp-" + hash16(mp.raw)
		}
	}
	if id != "" {
		mp.m.ID = mapID(id, "original_id", mp.setMeta)
	}
	return nil
}

// from: from, from_agent, else the outbox's agent.
func (mp *mapping) from() error {
	from, err := mp.s("from", "from_agent")
	if err != nil {
		return err
	}
	if from == "" {
		from = mp.p.Sender
	}
	if from == "" {
		return fieldErr("from", "missing: no from or from_agent field%s", mp.p.where(" (not in an outbox)"))
	}
	mp.m.From, err = sanitized("from", from, "original_from", mp.setMeta)
	return err
}

// to: to, to_agent, else the inbox's agent; sanitised and deduplicated.
func (mp *mapping) to() error {
	to, err := recipients(mp.obj)
	if err != nil {
		return err
	}
	if len(to) == 0 && mp.p.Recipient != "" {
		to = []string{mp.p.Recipient}
	}
	if len(to) == 0 {
		return fieldErr("to", "missing: no to or to_agent field%s", mp.p.where(" (not in an inbox)"))
	}
	changed := false
	for _, r := range to {
		n := sanitizeRecipient(r)
		if n == "" {
			return fieldErr("to", "%q has no letter or digit", r)
		}
		changed = changed || n != r
		if !slices.Contains(mp.m.To, n) {
			mp.m.To = append(mp.m.To, n)
		}
	}
	if changed {
		b, _ := json.Marshal(to)
		mp.meta["original_to"] = b
	}
	return nil
}

// channel: session_id, channel, the options' channel, the folder, the
// fallback.
func (mp *mapping) channel() error {
	ch, err := mp.s("session_id", "channel")
	if err != nil {
		return err
	}
	for _, c := range []string{ch, mp.opt.Channel, mp.p.Folder, mp.opt.Fallback} {
		if c != "" {
			ch = c
			break
		}
	}
	mp.m.Channel = SanitizeName(ch)
	if mp.m.Channel == "" {
		return fieldErr("channel", "missing: no session_id or channel field%s", mp.p.where("; give a default channel"))
	}
	if mp.m.Channel != ch && ch != mp.opt.Channel && ch != mp.p.Folder && ch != mp.opt.Fallback {
		mp.setMeta("original_session_id", ch)
	}
	return nil
}

// kind: type, title and priority.
func (mp *mapping) kind() error {
	typ, err := mp.s("type", "message_type")
	if err != nil {
		return err
	}
	mp.m.Type = SanitizeName(typ)
	if mp.m.Type != typ && typ != "" {
		mp.setMeta("original_type", typ)
	}
	title, err := mp.s("title", "subject")
	if err != nil {
		return err
	}
	mp.m.Title = cleanTitle(title)
	if p, _ := mp.s("priority"); p != "" {
		mp.m.Priority = priorityOf(p, mp.setMeta)
	}
	return nil
}

// threading: in_reply_to (or metadata's), thread_id, correlation_id.
func (mp *mapping) threading() error {
	reply, err := mp.s("in_reply_to")
	if err != nil {
		return err
	}
	if reply == "" {
		reply, _ = firstString(mp.meta, "in_reply_to")
	}
	if reply != "" {
		mp.m.InReplyTo = mapID(reply, "original_in_reply_to", mp.setMeta)
	}
	if th, err := mp.s("thread_id"); err != nil {
		return err
	} else if th != "" {
		mp.m.ThreadID = mapID(th, "original_thread_id", mp.setMeta)
	}
	if c, _ := mp.s("correlation_id"); c != "" && len(c) <= api.MaxIDLen {
		mp.m.CorrelationID = c
	} else if c != "" {
		mp.setMeta("original_correlation_id", c)
	}
	return nil
}

// flags: requires_response, tags and visibility.
func (mp *mapping) flags() error {
	if v, ok := mp.obj["requires_response"]; ok {
		var b bool
		if json.Unmarshal(v, &b) == nil {
			mp.m.RequiresResponse = b
		} else {
			mp.meta["original_requires_response"] = v
		}
	}
	if v, ok := mp.obj["tags"]; ok && !isNull(v) {
		var tags []string
		if err := json.Unmarshal(v, &tags); err != nil {
			return fieldErr("tags", "want a list of strings")
		}
		for _, t := range tags {
			if n := SanitizeName(t); n != "" && !slices.Contains(mp.m.Tags, n) && len(mp.m.Tags) < api.MaxTags {
				mp.m.Tags = append(mp.m.Tags, n)
			}
		}
	}
	if v, _ := mp.s("visibility"); v == api.VisibilityPublic || v == api.VisibilityPrivate || v == api.VisibilityModerators {
		mp.m.Visibility = v
	}
	return nil
}

// timestamp: the body's, else the channel file name's, else none.
func (mp *mapping) timestamp() error {
	ts, err := timestamp(mp.obj, mp.p)
	mp.m.Timestamp = ts
	return err
}

// SanitizeName maps s onto the maos name rule (api.NamePattern):
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
		if b.Len() >= api.MaxNameLen {
			break
		}
	}
	out := b.String()
	if len(out) > api.MaxNameLen {
		out = out[:api.MaxNameLen]
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
	if api.ValidID(id) {
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
		var r api.Recipients
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

func mapPriority(p string) api.Priority {
	switch l := api.Priority(strings.ToLower(p)); {
	case api.ValidPriority(l):
		return l
	case l == "critical":
		return api.PriorityUrgent
	}
	return api.DefaultPriority
}

func mapContent(obj map[string]json.RawMessage, raw []byte, c *api.Content) error {
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
				c.Artifacts = append(c.Artifacts, api.ArtifactRef{Ref: s})
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
	for len(s) > api.MaxTitleLen {
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

// fieldErr is the *api.FieldError (wrapping api.ErrInvalid) for field.
func fieldErr(field, format string, args ...any) error {
	return &api.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// where is note for a message read from a file, "" for one posted to the
// API: what the file's place could have said.
func (p Place) where(note string) string {
	if p.FileName == "" {
		return ""
	}
	return note
}
