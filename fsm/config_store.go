package fsm

import (
	"encoding/json"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketConfig: setting name → its JSON value. Settings are cluster-wide
// and replicated; an unset setting has its default.

func applySetConfig(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.SetConfigCommand
	if err := decodeCommand(api.OpSetConfig, body, &cmd); err != nil {
		return nil, err
	}
	mustPut(tx.Bucket(bucketConfig), []byte(cmd.Key), cmd.Value)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditConfig, Label: "CONFIG", Text: cmd.Key + "=" + string(cmd.Value)})
	cfg := readConfig(tx)
	return &cfg, nil
}

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

// Config returns the cluster settings.
func (f *FSM) Config() (api.ClusterConfig, error) {
	var cfg api.ClusterConfig
	err := f.view(func(tx *bbolt.Tx) error {
		cfg = readConfig(tx)
		return nil
	})
	return cfg, err
}
