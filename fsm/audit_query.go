package fsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// AuditPage is one page of the trail.
type AuditPage struct {
	Events  []api.AuditEvent `json:"events"`
	HasMore bool             `json:"has_more"`
}

// Audit returns up to limit events with seq > after, oldest first (limit as
// for ChannelPage).
func (f *FSM) Audit(after uint64, limit int) (AuditPage, error) {
	limit = pageLimit(limit)
	page := AuditPage{Events: []api.AuditEvent{}}
	err := f.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if len(page.Events) == limit {
				page.HasMore = true
				return nil
			}
			var ev api.AuditEvent
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("fsm: audit %d: %w", binary.BigEndian.Uint64(k), err)
			}
			page.Events = append(page.Events, ev)
		}
		return nil
	})
	return page, err
}
