package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketRetention: channel → Retention JSON: the channel's policy and what
// it has trimmed so far.

func loadRetention(tx *bbolt.Tx, channel string) (api.Retention, bool) {
	v := tx.Bucket(bucketRetention).Get([]byte(channel))
	if v == nil {
		return api.Retention{Channel: channel}, false
	}
	var r api.Retention
	if json.Unmarshal(v, &r) != nil {
		return api.Retention{Channel: channel}, false
	}
	return r, true
}

func putRetention(tx *bbolt.Tx, r api.Retention) {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("fsm: retention: encode: %v", err))
	}
	if err := tx.Bucket(bucketRetention).Put([]byte(r.Channel), data); err != nil {
		panic(fmt.Sprintf("fsm: retention: put: %v", err))
	}
}
