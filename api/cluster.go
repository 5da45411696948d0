package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maos-project/maos/rules"
)

// OpClusterID fixes the cluster's id (body: ClusterIDCommand): the leader
// proposes it once, at the first term of a new cluster (or the first term
// after an upgrade, for a data dir written before cluster ids: the
// cluster adopts one then). The first applied wins; a later one naming
// another id is refused, the same one is a no-op. So every member's state
// file holds the same id, nodes carry it on their calls to each other, and
// a node of another cluster (another data dir, another id) is refused.
const OpClusterID Op = "cluster_id"

// ClusterIDCommand is the body of OpClusterID.
type ClusterIDCommand struct {
	ClusterID string `json:"cluster_id"`
}

// ValidClusterID reports whether id can be a cluster id: a name
// (NamePattern), as the leader makes them ("c" and 32 hex digits).
func ValidClusterID(id string) bool { return ValidName(id) }

// Validate checks the id.
func (c *ClusterIDCommand) Validate() error {
	if !ValidClusterID(c.ClusterID) {
		return NameError("cluster_id", c.ClusterID)
	}
	return nil
}

// OpClusterVersion raises the cluster's state version (body:
// ClusterVersionCommand): the highest state-machine version every node of
// the Raft configuration can apply. Only the leader proposes it, once
// every server reports (Status.StateVersion) a build that applies at
// least that version, so a node of an older build never receives it; apply
// never lowers the version (a lower one is refused, the same one is a
// no-op). An op that needs a newer version than the committed one is
// refused before it is proposed (ClusterVersionError).
const OpClusterVersion Op = "cluster_version"

// ClusterVersionCommand is the body of OpClusterVersion.
type ClusterVersionCommand struct {
	Version int `json:"version"`
}

// Validate wants a version of 1 or more.
func (c *ClusterVersionCommand) Validate() error {
	if c.Version < 1 {
		return FieldErrorf("version", "%d: want 1 or more", c.Version)
	}
	return nil
}

// OpSetConfig changes one cluster setting (body: SetConfigCommand).
const OpSetConfig Op = "set_config"

// ClusterConfig holds the cluster settings.
type ClusterConfig struct {
	// StrictSenders refuses sends from agents that are not registered
	// (403) instead of registering them on the spot. Default false.
	StrictSenders bool `json:"strict_senders"`
	// AuthRequired records that the cluster runs with authentication: a
	// leader started with --auth sets it, and a node restarted without
	// --auth then refuses to start rather than serve its copy of the
	// mailbox to anyone. Default false.
	AuthRequired bool `json:"auth_required"`
	// SecretGuard is what the node that accepts a send does with a secret
	// (an API key, a token) found in its title, text or code: refuse it
	// (the default), redact it, or let it through. The node decides
	// before it proposes, never at apply (see package secrets).
	SecretGuard SecretGuard `json:"secret_guard"`
	// EscalationTarget also receives the incident of a task that failed
	// because its lease expired max_attempts times, and receives the alert
	// of an approval with on_timeout escalate whose deadline passed: an
	// agent id or role:NAME. Default "": the task's creator alone, the
	// approval's requester.
	EscalationTarget string `json:"escalation_target"`
	// ArtifactQuotaBytes bounds, per agent, the bytes of the artifacts it
	// uploaded first (artifact_put refuses one that does not fit with a
	// *QuotaError). 0 means no quota. Default DefaultArtifactQuota
	// (1 GiB) while unset.
	ArtifactQuotaBytes int64 `json:"artifact_quota_bytes"`
	// ArtifactRetentionSeconds is how long an artifact no stored message
	// references is kept after the entry that recorded it: the leader
	// then proposes its delete (ArtifactsDue). 0 keeps them forever.
	// Default DefaultArtifactRetention (7 days) while unset.
	ArtifactRetentionSeconds int64 `json:"artifact_retention_seconds"`
	// UnknownRecipients is what apply does with a send, a task or an
	// approval that addresses an agent that is neither registered nor has
	// ever sent, or a role or capability no agent has (known.go): refuse
	// it (the default: 404 naming each name, with the closest known ones)
	// or accept it (its inbox fills before its agent exists).
	UnknownRecipients UnknownRecipients `json:"unknown_recipients"`
}

// Defaults and limits of the artifact settings.
const (
	// DefaultArtifactQuota is artifact_quota_bytes while unset: 1 GiB.
	DefaultArtifactQuota int64 = 1 << 30
	// DefaultArtifactRetention is artifact_retention_seconds while unset:
	// 7 days.
	DefaultArtifactRetention int64 = 7 * 24 * 3600
	// MaxArtifactRetention bounds artifact_retention_seconds: 100 years
	// (so Created plus it stays within a time's nanoseconds).
	MaxArtifactRetention int64 = 100 * 365 * 24 * 3600
)

// SecretGuard is the value of the secret_guard setting.
type SecretGuard string

// The secret_guard values.
const (
	// SecretGuardRefuse refuses a send holding a secret: 422 naming the
	// field and the detection rule, never the secret. The default.
	SecretGuardRefuse SecretGuard = "refuse"
	// SecretGuardRedact stores the message with each secret replaced by
	// "[REDACTED:rule]".
	SecretGuardRedact SecretGuard = "redact"
	// SecretGuardOff stores the message as sent.
	SecretGuardOff SecretGuard = "off"
)

// secretGuards are the secret_guard values, in the order errors list them.
var secretGuards = []SecretGuard{SecretGuardRefuse, SecretGuardRedact, SecretGuardOff}

// configKeys lists the settings and checks a value for each.
var configKeys = map[string]func(json.RawMessage) error{
	"strict_senders":    checkBool,
	"auth_required":     checkBool,
	"secret_guard":      checkSecretGuard,
	"escalation_target": checkEscalationTarget,

	"artifact_quota_bytes":       checkInt("bytes", math.MaxInt64),
	"artifact_retention_seconds": checkInt("seconds", MaxArtifactRetention),
	"unknown_recipients":         checkUnknownRecipients,
}

// checkInt wants a whole number 0..max of unit.
func checkInt(unit string, max int64) func(json.RawMessage) error {
	return func(v json.RawMessage) error {
		var n int64
		if json.Unmarshal(v, &n) != nil || n < 0 || n > max {
			return fmt.Errorf("want a whole number of %s from 0 (none) to %d, got %s", unit, max, clipValue(v))
		}
		return nil
	}
}

func checkSecretGuard(v json.RawMessage) error {
	var s SecretGuard
	if json.Unmarshal(v, &s) != nil || !slices.Contains(secretGuards, s) {
		return fmt.Errorf("want %q, %q or %q, got %s", SecretGuardRefuse, SecretGuardRedact, SecretGuardOff, clipValue(v))
	}
	return nil
}

func checkUnknownRecipients(v json.RawMessage) error {
	var s UnknownRecipients
	if json.Unmarshal(v, &s) != nil || (s != UnknownRecipientsRefuse && s != UnknownRecipientsAccept) {
		return fmt.Errorf("want %q or %q, got %s", UnknownRecipientsRefuse, UnknownRecipientsAccept, clipValue(v))
	}
	return nil
}

// clipValue is a value as an error quotes it: at most 40 bytes.
func clipValue(v json.RawMessage) string {
	if len(v) > 40 {
		return TruncateUTF8(string(v), 40) + "…"
	}
	return string(v)
}

func checkBool(v json.RawMessage) error {
	var b bool
	if json.Unmarshal(v, &b) != nil {
		return fmt.Errorf("want true or false")
	}
	return nil
}

// checkEscalationTarget wants "" (unset), an agent id other than
// SystemSender, or role:NAME.
func checkEscalationTarget(v json.RawMessage) error {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return fmt.Errorf("want a string: an agent id or role:NAME (\"\" unsets it)")
	}
	name, isRole := strings.CutPrefix(s, RolePrefix)
	switch {
	case s == "":
		return nil
	case !ValidName(name):
		return fmt.Errorf("%q: want an agent id or role:NAME; %s", s, NameRule(name))
	case !isRole && s == SystemSender:
		return fmt.Errorf("%q is maos itself; name an agent or role:NAME", s)
	case !isRole && AddressKindOf(s) == AddressAll:
		return fmt.Errorf("%q would page every agent; name an agent or role:NAME", s)
	}
	return nil
}

// ConfigKeys lists the known setting names.
func ConfigKeys() []string {
	keys := make([]string, 0, len(configKeys))
	for k := range configKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SetConfigCommand sets Key to Value (JSON).
type SetConfigCommand struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Validate checks the key is known and the value fits it.
func (c *SetConfigCommand) Validate() error {
	check, ok := configKeys[c.Key]
	if !ok {
		return FieldErrorf("key", "unknown setting %q; known: %s", c.Key, strings.Join(ConfigKeys(), ", "))
	}
	if err := check(c.Value); err != nil {
		return FieldErrorf("value", "%s: %v", c.Key, err)
	}
	return nil
}

// RegisterNodeCommand is the body of OpRegisterNode: a node tells the
// cluster where its HTTP API is, so followers can forward to the leader.
type RegisterNodeCommand struct {
	NodeID   string `json:"node_id"`
	APIAddr  string `json:"api_addr"`  // host:port clients and peers reach
	RaftAddr string `json:"raft_addr"` // host:port of the Raft transport
}

// OpNodeEvent records a change of membership in the audit trail (body:
// NodeEventCommand): of gossip (join, leave, dead, as the leader's
// memberlist observes them) and of the Raft configuration (join, remove,
// replace, leadership transfer, as the leader carries them out). Only the
// leader proposes it, once per event; presence itself never reaches the
// log.
const OpNodeEvent Op = "node_event"

// Node events: of gossip, as observed by memberlist on the leader, and of
// the Raft configuration, as the leader changes it. Join is both: the
// reason says which (a voter added, or a member seen on gossip).
const (
	NodeEventJoin  = "join"  // a voter was added, or a node joined gossip (or came back after dying)
	NodeEventLeave = "leave" // a node left gracefully (maosd stopped)
	NodeEventDead  = "dead"  // failure detection declared a node dead
	// NodeEventRemove: a voter was taken out of the Raft configuration.
	NodeEventRemove = "remove"
	// NodeEventReplace: a voter was replaced by a node of the same id (or
	// Raft address) on purpose (JoinRequest.Replace).
	NodeEventReplace = "replace"
	// NodeEventTransfer: leadership was handed over on request; NodeID is
	// the new leader.
	NodeEventTransfer = "transfer"
)

// MaxNodeEventReason caps NodeEventCommand.Reason, in bytes.
const MaxNodeEventReason = 256

// NodeEventCommand is the body of OpNodeEvent.
type NodeEventCommand struct {
	// ID, fixed by the leader before its first proposal, makes the event
	// idempotent: a proposal that timed out (maybe committed) and is
	// proposed again is audited once. "" (logs written before it): no
	// dedup.
	ID     string `json:"id,omitempty"`
	NodeID string `json:"node_id"`
	Event  string `json:"event"`            // join, leave, dead, remove, replace or transfer
	Reason string `json:"reason,omitempty"` // free text for the audit line
}

// NodeEventLabels maps each event to its audit label.
var NodeEventLabels = map[string]string{
	NodeEventJoin:  "NODE_JOIN",
	NodeEventLeave: "NODE_LEAVE",
	NodeEventDead:  "NODE_DEAD",

	NodeEventRemove:   "NODE_REMOVE",
	NodeEventReplace:  "NODE_REPLACE",
	NodeEventTransfer: "LEADER_TRANSFER",
}

// Validate checks the node id, the event and the reason's length, naming
// the field at fault.
func (c *NodeEventCommand) Validate() error {
	if !ValidName(c.NodeID) {
		return NameError("node_id", c.NodeID)
	}
	if _, ok := NodeEventLabels[c.Event]; !ok {
		return FieldErrorf("event", "%q is not join, leave, dead, remove, replace or transfer", c.Event)
	}
	if len(c.Reason) > MaxNodeEventReason {
		return FieldErrorf("reason", "%d bytes, at most %d", len(c.Reason), MaxNodeEventReason)
	}
	if !utf8.ValidString(c.Reason) {
		return FieldErrorf("reason", "not valid UTF-8")
	}
	if len(c.ID) > MaxIDLen {
		return FieldErrorf("id", "%d bytes, at most %d", len(c.ID), MaxIDLen)
	}
	return nil
}

// Retention ops.
const (
	// OpSetRetention sets a channel's policy and trims at once (body:
	// SetRetentionCommand).
	OpSetRetention Op = "set_retention"
	// OpTrim applies a channel's policy as of the entry's time (body:
	// TrimCommand). The leader proposes it periodically, so every node
	// trims exactly the same messages.
	OpTrim Op = "trim"
)

// SetRetentionCommand sets a channel's policy. MaxAge is a Go duration
// ("720h") in JSON; both zero removes the policy.
type SetRetentionCommand struct {
	Channel     string `json:"channel"`
	MaxAge      string `json:"max_age,omitempty"`
	MaxMessages uint64 `json:"max_messages,omitempty"`
}

// Limits of a policy.
const (
	MinRetentionAge = time.Minute
	MaxRetentionAge = 100 * 365 * 24 * time.Hour
)

// Validate checks the command and returns the parsed age.
func (c *SetRetentionCommand) Validate() (time.Duration, error) {
	if !ValidName(c.Channel) {
		return 0, NameError("channel", c.Channel)
	}
	var age time.Duration
	if c.MaxAge != "" {
		d, err := time.ParseDuration(c.MaxAge)
		if err != nil {
			return 0, FieldErrorf("max_age", "%q is not a duration such as 720h", c.MaxAge)
		}
		if d < MinRetentionAge || d > MaxRetentionAge {
			return 0, FieldErrorf("max_age", "%v is outside %v..%v", d, MinRetentionAge, MaxRetentionAge)
		}
		age = d
	}
	return age, nil
}

// TrimCommand asks for a channel's policy to be applied.
type TrimCommand struct {
	Channel string `json:"channel"`
}

// OpSetRules replaces or removes the rules document (body: SetRulesCommand).
const OpSetRules Op = "set_rules"

// SetRulesCommand replaces the rules document with Rules, or removes it
// (Clear): exactly one of the two.
type SetRulesCommand struct {
	Rules *rules.Document `json:"rules,omitempty"`
	Clear bool            `json:"clear,omitempty"`
}

// Validate checks the command: the document's fields and limits
// (*FieldError naming the field), its size as JSON, and that exactly one
// of rules and clear is given.
func (c *SetRulesCommand) Validate() error {
	_, _, err := c.Prepare()
	return err
}

// prepare validates c and returns the compiled document and its stored
// form (both nil for Clear).
func (c *SetRulesCommand) Prepare() (*rules.Compiled, []byte, error) {
	switch {
	case c.Clear && c.Rules != nil:
		return nil, nil, FieldErrorf("clear", "give either rules or clear, not both")
	case c.Clear:
		return nil, nil, nil
	case c.Rules == nil:
		return nil, nil, FieldErrorf("rules", "required (or clear: true to remove the rules)")
	}
	r, err := rules.Compile(c.Rules)
	if err != nil {
		var fe *rules.FieldError
		if errors.As(err, &fe) {
			// In fsm's terms, as every refused command: wraps ErrInvalid.
			return nil, nil, FieldErrorf(fe.Field, "%s", fe.Reason)
		}
		return nil, nil, err
	}
	data, err := json.Marshal(c.Rules)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the document: %w", err)
	}
	if len(data) > rules.MaxBytes {
		return nil, nil, FieldErrorf("rules", "%d bytes as JSON, at most %d", len(data), rules.MaxBytes)
	}
	return r, data, nil
}

// One tick for every deadline. Apply never reads a clock, so nothing in
// it notices that a task's lease lapsed, that a queued message is due or
// that an approval's deadline passed: the leader does, from its state
// (NextDeadline), and proposes OpTick; the tick's entry time decides what
// is due, so every node applies the same.
const (
	// OpTick expires, at the entry's time, every task lease that ended,
	// expires or escalates every approval whose deadline passed, then
	// stores the oldest queued message (body: TickCommand).
	OpTick Op = "tick"
)

// TickCommand is the body of OpTick: no fields; the entry's time is the
// tick's.
type TickCommand struct{}

// Retention is a channel's policy. A zero field means no limit of that kind.
type Retention struct {
	Channel string `json:"channel"`
	// MaxAge: messages whose timestamp is older than the trimming entry's
	// time minus MaxAge go (nanoseconds in JSON as max_age_ns).
	MaxAge time.Duration `json:"max_age_ns"`
	// MaxMessages: the oldest messages beyond this count go.
	MaxMessages uint64 `json:"max_messages"`
	// Trimmed counts the messages trimmed so far; LastTrimSeq is the seq of
	// the newest one.
	Trimmed     uint64 `json:"trimmed"`
	LastTrimSeq uint64 `json:"last_trim_seq,omitempty"`
}

// TrimResult says what one trim removed.
type TrimResult struct {
	Channel string `json:"channel"`
	Trimmed int    `json:"trimmed"` // by this entry
	// UpToSeq is the seq of the newest message removed (0 if none).
	UpToSeq uint64 `json:"up_to_seq,omitempty"`
	// More is true when the entry stopped at MaxTrimPerEntry.
	More      bool      `json:"more,omitempty"`
	Retention Retention `json:"retention"`
}

// RulesState is the answer of GET /v1/rules and of set_rules.
type RulesState struct {
	// Rules is the document; null when there is none (everyone may
	// message everyone).
	Rules *rules.Document `json:"rules"`
	// Default is what a pair no list speaks about gets: allow or deny.
	Default string `json:"default"`
	// Index and UpdatedAt are the Raft index and time of the last
	// set_rules (a removal too); zero if rules were never set.
	Index     uint64    `json:"index,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// RulesCheck is the answer of CheckRules: may From send To a message?
type RulesCheck struct {
	From     string `json:"from"`
	FromRole string `json:"from_role"` // the role the check used ("" = none)
	To       string `json:"to"`
	ToRole   string `json:"to_role"`
	Allowed  bool   `json:"allowed"`
	Reason   string `json:"reason,omitempty"` // why not, when not allowed
	// Interrupt is true for CheckInterrupt's answer: may From interrupt
	// an agent (To and ToRole are empty)?
	Interrupt bool `json:"interrupt,omitempty"`
}
