package fsm

import (
	"encoding/json"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketConfig: setting name → its JSON value. Settings are cluster-wide
// and replicated; an unset setting has its default.

// readConfig reads the settings inside a transaction; unset ones keep
// their defaults.
func readConfig(tx *bbolt.Tx) api.ClusterConfig {
	cfg := api.ClusterConfig{SecretGuard: api.SecretGuardRefuse, UnknownRecipients: api.UnknownRecipientsRefuse,
		ArtifactQuotaBytes: api.DefaultArtifactQuota, ArtifactRetentionSeconds: api.DefaultArtifactRetention}
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
