package fsm

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"go.etcd.io/bbolt"
)

// bucketConfig: setting name → its JSON value. Settings are cluster-wide
// and replicated; an unset setting has its default.

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

func applySetConfig(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd SetConfigCommand
	if err := decodeCommand(OpSetConfig, body, &cmd); err != nil {
		return nil, err
	}
	mustPut(tx.Bucket(bucketConfig), []byte(cmd.Key), cmd.Value)
	audit(tx, index, ts, AuditEvent{Kind: AuditConfig, Label: "CONFIG", Text: cmd.Key + "=" + string(cmd.Value)})
	cfg := readConfig(tx)
	return &cfg, nil
}

// readConfig reads the settings inside a transaction; unset ones keep
// their defaults.
func readConfig(tx *bbolt.Tx) ClusterConfig {
	cfg := ClusterConfig{SecretGuard: SecretGuardRefuse, UnknownRecipients: UnknownRecipientsRefuse,
		ArtifactQuotaBytes: DefaultArtifactQuota, ArtifactRetentionSeconds: DefaultArtifactRetention}
	b := tx.Bucket(bucketConfig)
	if v := b.Get([]byte("strict_senders")); v != nil {
		_ = json.Unmarshal(v, &cfg.StrictSenders)
	}
	if v := b.Get([]byte("auth_required")); v != nil {
		_ = json.Unmarshal(v, &cfg.AuthRequired)
	}
	if v := b.Get([]byte("secret_guard")); v != nil {
		_ = json.Unmarshal(v, &cfg.SecretGuard)
	}
	if v := b.Get([]byte("escalation_target")); v != nil {
		_ = json.Unmarshal(v, &cfg.EscalationTarget)
	}
	if v := b.Get([]byte("artifact_quota_bytes")); v != nil {
		_ = json.Unmarshal(v, &cfg.ArtifactQuotaBytes)
	}
	if v := b.Get([]byte("artifact_retention_seconds")); v != nil {
		_ = json.Unmarshal(v, &cfg.ArtifactRetentionSeconds)
	}
	if v := b.Get([]byte("unknown_recipients")); v != nil {
		_ = json.Unmarshal(v, &cfg.UnknownRecipients)
	}
	return cfg
}

// Config returns the cluster settings.
func (f *FSM) Config() (ClusterConfig, error) {
	var cfg ClusterConfig
	err := f.view(func(tx *bbolt.Tx) error {
		cfg = readConfig(tx)
		return nil
	})
	return cfg, err
}
