package api

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/maos-project/maos/rules"
)

// Message is one entry of the mail log. Its JSON form is the union of the
// formats agent farms use today (see shared/seeds/): the file-based mailbox
// messages ("id", "timestamp", "from", "to", "type", "content") with the
// channel ("session_id" there) and the routing fields of the router designs.
//
// The first six fields (id, seq, timestamp, channel, from, to) are always
// present on a stored message; every other field is optional.
type Message struct {
	// ID is unique in the cluster and fixed before the first proposal, so a
	// retried send is never stored twice. Generated ids have the seed format
	// msg-YYYYMMDD-HHMMSS-{from}-{hex} (UTC, 8 hex digits).
	ID string `json:"id"`
	// Seq is the Raft index of the entry that stored the message: one total
	// order for the cluster, the same on every node. Zero before it is stored.
	Seq uint64 `json:"seq,omitempty"`
	// Timestamp is when the message was stored (UTC). Unless the sender gave
	// one, it is the proposer's clock made monotonic in seq order by apply.
	Timestamp time.Time `json:"timestamp,omitzero"`
	// Channel groups a conversation ("session_id" in the seed format).
	Channel string `json:"channel"`
	From    string `json:"from"`
	// To lists recipients: agent ids, "all" or "*", "role:NAME",
	// "capability:NAME" or a glob.
	// A single JSON string is accepted as a one-element list.
	To Recipients `json:"to"`
	// Recipients is the resolved delivery list: the agents whose inboxes
	// received the message, in the order "to" named them, then @mentions.
	// The state machine sets it at apply time from "to", the agent registry
	// and the rules (blocked recipients are left out); a value a client
	// sends is replaced.
	Recipients []string `json:"recipients,omitempty"`
	Type       string   `json:"type,omitempty"`
	Title      string   `json:"title,omitempty"`
	Priority   Priority `json:"priority,omitempty"`
	Content    Content  `json:"content"`
	Tags       []string `json:"tags,omitempty"`
	// InReplyTo is the id of the message this one answers.
	InReplyTo string `json:"in_reply_to,omitempty"`
	// ThreadID is the id of the thread's root message. A reply sent without
	// one gets its parent's thread (or the parent's id) at apply time; a
	// root keeps it empty and its thread is its own id.
	ThreadID         string `json:"thread_id,omitempty"`
	CorrelationID    string `json:"correlation_id,omitempty"`
	RequiresResponse bool   `json:"requires_response,omitempty"`
	// Visibility is "public" (the default), "private" (its parties and
	// moderators read it) or "moderators" (moderators, its sender and the
	// agents "to" names by id); see visibility.go.
	Visibility string `json:"visibility,omitempty"`
	// Metadata is free-form JSON kept as sent (compacted).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// MayInterrupt is true when its sender may interrupt its recipients:
	// set at apply by the interrupt rule (a moderator's token, else the
	// rules document's interrupt list with the sender's registered role;
	// interrupt.go), a value a client sends is replaced. Watchers go by it
	// alone before they press a pane's interrupt key or preempt a running
	// invocation. A message stored before it existed reads false: no
	// authority.
	MayInterrupt bool `json:"may_interrupt,omitempty"`
}

// Content is the body of a message, as in the seed format.
type Content struct {
	Text string `json:"text"`
	Code string `json:"code,omitempty"`
	// Artifacts are paths (as the seeds write them), artifact ids
	// ("sha256:…") or {"id","name"} objects (ArtifactRef).
	Artifacts []ArtifactRef `json:"artifacts,omitempty"`
}

// Recipients is the "to" list. It unmarshals from a JSON list or a single
// string (the seed format's "to": "codex").
type Recipients []string

// UnmarshalJSON accepts a string or a list of strings.
func (r *Recipients) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*r = Recipients{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("to: want a string or a list of strings")
	}
	*r = list
	return nil
}

// Limits on a message. The size limit is configured per node
// (--max-message-bytes) and checked on the wire; these are fixed.
const (
	MaxIDLen         = 128  // message ids
	MaxRecipients    = 256  // entries in "to"
	MaxTags          = 64   // entries in "tags"
	MaxArtifacts     = 256  // entries in "content.artifacts"
	MaxTitleLen      = 1024 // bytes
	DefaultMaxBytes  = 100 << 10
	DefaultPriority  = PriorityNormal
	DefaultType      = "chat"
	VisibilityPublic = "public"
)

// MaxNameLen bounds agent ids, channels, types and tags, in bytes.
const MaxNameLen = rules.MaxNameLen

// DefaultChannel is the channel a client sends to when nothing names one
// (maosctl send without --channel or $MAOS_CHANNEL, the MCP send_message).
// The API itself wants a channel on every message.
const DefaultChannel = "general"

var (
	// idRE admits generated ids and the ids of the seed systems (uuids,
	// "msg_001"); it stays a safe URL path segment.
	idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	// recipientRE admits agent ids, "all", "*", "role:NAME",
	// "capability:NAME" and globs.
	recipientRE = regexp.MustCompile(`^(\*|role:[a-z0-9][a-z0-9._-]{0,63}|capability:[a-z0-9][a-z0-9._-]{0,63}|[a-z0-9*?\[][a-z0-9._*?\[\]^-]{0,127})$`)
)

// ValidName reports whether s is a valid agent id or channel name: whether
// it matches NamePattern. NameError says why it does not.
func ValidName(s string) bool { return rules.ValidName(s) }

// nameUnfit matches the runs of characters outside the id alphabet.
var nameUnfit = regexp.MustCompile(`[^a-z0-9._-]+`)

// NameFrom derives an id matching NamePattern from free text such as a
// host name: lower-cased, each run of other characters made "-", trimmed
// of leading and trailing punctuation, cut to 64 bytes; fallback when
// nothing valid is left. maosd's default node id and a watcher's node
// name beside no node are the host's name through it.
func NameFrom(s, fallback string) string {
	id := strings.Trim(nameUnfit.ReplaceAllString(strings.ToLower(s), "-"), "-._")
	if len(id) > 64 {
		id = id[:64]
	}
	if !ValidName(id) {
		return fallback
	}
	return id
}

// ValidID reports whether s may be a message id
// (^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$, the rule Validate applies to id,
// in_reply_to and thread_id): also a safe file name and URL path segment.
func ValidID(s string) bool { return idRE.MatchString(s) }

// NewID returns a message id in the seed format
// msg-YYYYMMDD-HHMMSS-{from}-{8 hex digits}, with t in UTC.
func NewID(from string, t time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return seedID(from, t, b[:])
}

// DerivedID returns a message id in the seed format whose hex part is
// derived, not random: msg-YYYYMMDD-HHMMSS-{from}-{16 hex digits}, the
// first 8 bytes of the SHA-256 of key, with t in UTC. The same from, t and
// key give the same id, so a client that derives an id from what it
// answers stores its answer once however often it retries.
func DerivedID(from string, t time.Time, key string) string {
	sum := sha256.Sum256([]byte(key))
	return seedID(from, t, sum[:8])
}

// seedID is msg-YYYYMMDD-HHMMSS-{from}-{hex of suffix}, t in UTC.
func seedID(from string, t time.Time, suffix []byte) string {
	return "msg-" + t.UTC().Format("20060102-150405") + "-" + from + "-" + hex.EncodeToString(suffix)
}

// Normalize fills the defaults of a message about to be sent: an id (from
// now), priority "normal", type "chat", visibility "public", and compacts
// metadata. It does not validate; call Validate after it.
func (m *Message) Normalize(now time.Time) {
	if m.Priority == "" {
		m.Priority = DefaultPriority
	}
	if m.Type == "" {
		m.Type = DefaultType
	}
	if m.Visibility == "" {
		m.Visibility = VisibilityPublic
	}
	if m.ID == "" && m.From != "" {
		m.ID = NewID(m.From, now)
	}
	if len(m.Metadata) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, m.Metadata) == nil {
			m.Metadata = buf.Bytes()
		}
	}
}

// Validate checks a message as a client sends it. The error is a
// *FieldError (wrapping ErrInvalid) naming the first bad field and the rule.
// Seq must be zero: the log assigns it. "from" is checked before "id"
// because a generated id is built from it.
func (m *Message) Validate() error {
	for _, check := range []func() error{m.validateHeader, m.validateTo, m.validateBody, m.validateArtifacts, m.validateRefs} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateHeader checks the sender, id, seq (unset) and channel.
func (m *Message) validateHeader() error {
	if m.From == "" {
		return FieldErrorf("from", "required")
	}
	if !ValidName(m.From) {
		return NameError("from", m.From)
	}
	if m.ID == "" {
		return FieldErrorf("id", "required")
	}
	if !idRE.MatchString(m.ID) {
		return FieldErrorf("id", "must match %s", idRE)
	}
	if m.Seq != 0 {
		return FieldErrorf("seq", "is assigned by the log; leave it out")
	}
	if m.Channel == "" {
		return FieldErrorf("channel", "required")
	}
	if !ValidName(m.Channel) {
		return NameError("channel", m.Channel)
	}
	return nil
}

// validateTo checks the recipients named (to) and resolved (recipients).
func (m *Message) validateTo() error {
	if len(m.To) == 0 {
		return FieldErrorf("to", "required: at least one recipient")
	}
	if len(m.To) > MaxRecipients {
		return FieldErrorf("to", "%d recipients, at most %d", len(m.To), MaxRecipients)
	}
	for i, r := range m.To {
		if !recipientRE.MatchString(r) {
			return FieldErrorf(fmt.Sprintf("to[%d]", i), "%q is not an agent id, \"all\", \"*\", \"role:NAME\", \"capability:NAME\" or a glob", r)
		}
		switch AddressKindOf(r) {
		case AddressGlob:
			// path.Match checks the whole pattern, whatever the name.
			if _, err := path.Match(r, ""); err != nil {
				return FieldErrorf(fmt.Sprintf("to[%d]", i), "%q is not a valid glob: %v", r, err)
			}
		case AddressAgent:
			if !ValidName(r) {
				return FieldErrorf(fmt.Sprintf("to[%d]", i), "not a valid agent id: %s", NameRule(r))
			}
		}
	}
	for i, r := range m.Recipients {
		if !ValidName(r) {
			return NameError(fmt.Sprintf("recipients[%d]", i), r)
		}
	}
	return nil
}

// validateBody checks the text, type, priority, visibility, title and tags.
func (m *Message) validateBody() error {
	if strings.TrimSpace(m.Content.Text) == "" {
		return FieldErrorf("content.text", "required")
	}
	if !ValidName(m.Type) {
		return NameError("type", m.Type)
	}
	if !ValidPriority(m.Priority) {
		return FieldErrorf("priority", "must be one of %s", PriorityList())
	}
	if m.Visibility != VisibilityPublic && m.Visibility != VisibilityPrivate && m.Visibility != VisibilityModerators {
		return FieldErrorf("visibility", "must be public, private or moderators")
	}
	if len(m.Title) > MaxTitleLen {
		return FieldErrorf("title", "%d bytes, at most %d", len(m.Title), MaxTitleLen)
	}
	if strings.IndexFunc(m.Title, unicode.IsControl) >= 0 {
		return FieldErrorf("title", "must not contain control characters")
	}
	return CheckNames("tags", m.Tags, MaxTags, "tags")
}

// validateArtifacts checks the artifact references of the content.
func (m *Message) validateArtifacts() error {
	if len(m.Content.Artifacts) > MaxArtifacts {
		return FieldErrorf("content.artifacts", "%d entries, at most %d", len(m.Content.Artifacts), MaxArtifacts)
	}
	for i, a := range m.Content.Artifacts {
		field := fmt.Sprintf("content.artifacts[%d]", i)
		switch {
		case a.Ref == "":
			return FieldErrorf(field, "empty: a path, an artifact id or {\"id\", \"name\"}")
		case a.Name != "" && !ValidArtifactID(a.Ref):
			return ArtifactIDError(field+".id", a.Ref)
		case a.Name != "":
			if err := ValidArtifactName(field+".name", a.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateRefs checks in_reply_to, thread_id, correlation_id and metadata.
func (m *Message) validateRefs() error {
	for _, f := range []struct{ name, v string }{{"in_reply_to", m.InReplyTo}, {"thread_id", m.ThreadID}} {
		if f.v != "" && !idRE.MatchString(f.v) {
			return FieldErrorf(f.name, "must be a message id matching %s", idRE)
		}
	}
	if len(m.CorrelationID) > MaxIDLen {
		return FieldErrorf("correlation_id", "%d bytes, at most %d", len(m.CorrelationID), MaxIDLen)
	}
	if len(m.Metadata) > 0 && !json.Valid(m.Metadata) {
		return FieldErrorf("metadata", "must be valid JSON")
	}
	return nil
}

// Priority is how urgent a message is: one of PriorityUrgent, PriorityHigh,
// PriorityNormal and PriorityLow. On the wire (JSON, in command bodies as
// in the API) and in a stored message it is the name; in the inbox index
// (an entry's value, an unread entry's value, the order of the unread
// counters) it is its byte (priorityByte), fixed here because the state
// file holds it. A defined type, so a plain string (a flag, a query
// parameter) becomes one only where the code says so.
type Priority string

// The priorities.
const (
	PriorityUrgent Priority = "urgent"
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Priorities lists the priorities in the order a watcher serves them, which
// is also the order of their bytes.
var Priorities = []Priority{PriorityUrgent, PriorityHigh, PriorityNormal, PriorityLow}

// ValidPriority reports whether p is one of the four priorities (exactly:
// lower case, no blanks).
func ValidPriority(p Priority) bool {
	switch p {
	case PriorityUrgent, PriorityHigh, PriorityNormal, PriorityLow:
		return true
	}
	return false
}

// PriorityList is the priorities as an error message or a flag's help
// lists them: "urgent, high, normal, low".
func PriorityList() string {
	names := make([]string, len(Priorities))
	for i, p := range Priorities {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// replyTitlePrefix starts the title of a reply to a titled message.
const replyTitlePrefix = "Re: "

// NewReply is from's answer to orig with text, as every client builds it
// (maosctl reply, the MCP send_message with reply_to, a watcher's answer): to orig's
// sender, in orig's channel and thread (ThreadID the thread's root),
// InReplyTo orig, titled "Re: " and orig's title (none for an untitled
// orig, no second "Re: ", cut to MaxTitleLen bytes), of type
// "task_result" for a "task_assign" and "response" otherwise,
// priority normal, and private or for moderators when orig is (the state
// machine makes it so anyway; see applySend). The ID is left empty: the caller sets one
// (derived, so that a retry is stored once) or the send generates it.
func NewReply(orig *Message, from, text string) *Message {
	r := &Message{
		Channel:    orig.Channel,
		From:       from,
		To:         Recipients{orig.From},
		Type:       replyType(orig.Type),
		Title:      replyTitle(orig.Title),
		Priority:   PriorityNormal,
		Content:    Content{Text: text},
		InReplyTo:  orig.ID,
		ThreadID:   ThreadOf(orig),
		Visibility: VisibilityPublic,
	}
	if !orig.Public() {
		r.Visibility = orig.Visibility
	}
	return r
}

// replyType is the type of an answer to a message of type typ.
func replyType(typ string) string {
	if typ == "task_assign" {
		return "task_result"
	}
	return "response"
}

// replyTitle is the title of a reply to a message titled title.
func replyTitle(title string) string {
	if title == "" || strings.HasPrefix(title, replyTitlePrefix) {
		return title
	}
	return TruncateUTF8(replyTitlePrefix+title, MaxTitleLen)
}

// TruncateUTF8 is s cut to at most n bytes without splitting a character.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ThreadOf is the thread a stored message belongs to.
func ThreadOf(m *Message) string {
	if m.ThreadID != "" {
		return m.ThreadID
	}
	return m.ID
}

// forkInfix separates a parent's id and a fork's slot.
const forkInfix = "-fork-"

// ForkName is the id of agent's fork in slot n (n ≥ 1): "A-fork-N". It is
// a ValidName only when A is short enough; callers check.
func ForkName(agent string, n int) string {
	return agent + forkInfix + strconv.Itoa(n)
}

// ForkParent returns the agent whose fork name is, and true, when name is
// "A-fork-N" with A a ValidName and N a positive decimal without leading
// zeros; otherwise "", false.
func ForkParent(name string) (string, bool) {
	i := strings.LastIndex(name, forkInfix)
	if i <= 0 {
		return "", false
	}
	parent, slot := name[:i], name[i+len(forkInfix):]
	if slot == "" || slot[0] == '0' || len(slot) > 4 || strings.Trim(slot, "0123456789") != "" || !ValidName(parent) {
		return "", false
	}
	return parent, true
}

// IsForkOf reports whether name is a fork of agent ("A-fork-N").
func IsForkOf(name, agent string) bool {
	p, ok := ForkParent(name)
	return ok && p == agent
}

// VisibilityPrivate is the Visibility of a message only its parties and
// moderators may read.
const VisibilityPrivate = "private"

// VisibilityModerators is the Visibility of a message only moderators,
// its sender and the agents its "to" names by id may read.
const VisibilityModerators = "moderators"

// Restricted reports whether a message of visibility vis is not for
// everyone: private or for moderators ("" is public, as stored before
// visibility was normalized).
func Restricted(vis string) bool { return vis != "" && vis != VisibilityPublic }

// Public reports whether everyone may read m: it is neither private nor
// for moderators only.
func (m *Message) Public() bool { return !Restricted(m.Visibility) }

// Viewer is who reads: the agent of an authenticated request, and whether
// it moderates (may read every private message). A nil *Viewer is a read
// on a node without authentication: unrestricted.
type Viewer struct {
	Agent     string
	Moderator bool
}

// CanRead reports whether v may read m: always for a public message, a
// nil viewer or a moderator; for a private message only when v.Agent is
// its sender, one of its Recipients or an agent its "to" names by id; for
// a message for moderators only when v.Agent is its sender or an agent
// its "to" names by id. An identity with no agent (Agent "") reads
// neither.
func (v *Viewer) CanRead(m *Message) bool {
	if v == nil || v.Moderator || m.Public() {
		return true
	}
	if v.Agent == "" {
		return false
	}
	if v.Agent == m.From || NamesAgent(m.To, v.Agent) {
		return true
	}
	return m.Visibility == VisibilityPrivate && slices.Contains(m.Recipients, v.Agent)
}

// CanReadEvent reports whether v may see audit event e whole: always for
// an event that is not Private, a nil viewer or a moderator; otherwise
// only when v.Agent is its From, in its To or in its Readers. (An event
// stored before Readers existed is judged on From and To alone.)
func (v *Viewer) CanReadEvent(e *AuditEvent) bool {
	if v == nil || v.Moderator || !e.Private {
		return true
	}
	if v.Agent == "" {
		return false
	}
	return v.Agent == e.From || slices.Contains(e.To, v.Agent) || slices.Contains(e.Readers, v.Agent)
}

// NamesAgent reports whether a "to" list names agent by its id (not
// through "all", a role or a glob).
func NamesAgent(to []string, agent string) bool {
	for _, r := range to {
		if r == agent && AddressKindOf(r) == AddressAgent {
			return true
		}
	}
	return false
}

// AddressKind is one of the addressing forms of a "to" entry.
type AddressKind int

const (
	AddressAgent      AddressKind = iota // a plain agent id
	AddressAll                           // "all" or "*": every registered agent but the sender
	AddressRole                          // "role:NAME": every agent of the role but the sender
	AddressCapability                    // "capability:NAME": every agent with the capability but the sender
	AddressGlob                          // a path.Match pattern over registered agent ids
)

// AddressKindOf classifies one "to" entry (already matching recipientRE).
func AddressKindOf(r string) AddressKind {
	switch {
	case r == "all" || r == "*":
		return AddressAll
	case strings.HasPrefix(r, RolePrefix):
		return AddressRole
	case strings.HasPrefix(r, CapabilityPrefix):
		return AddressCapability
	case strings.ContainsAny(r, "*?["):
		return AddressGlob
	}
	return AddressAgent
}
