package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func applySetRetention(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.SetRetentionCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply set_retention: decode: %w", err)
	}
	age, err := cmd.Validate()
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_retention: %w", err)
	}
	r, _ := loadRetention(tx, cmd.Channel)
	r.MaxAge, r.MaxMessages = age, cmd.MaxMessages
	putRetention(tx, r)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditTrim, Label: "RETENTION",
		Text: fmt.Sprintf("channel %s: max_age=%v max_messages=%d", cmd.Channel, age, cmd.MaxMessages)})
	return trim(tx, index, ts, r), nil
}
