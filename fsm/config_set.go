package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

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
