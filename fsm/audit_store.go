package fsm

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// bucketAudit: audit seq (8) → AuditEvent JSON. The audit seq counts events
// (an entry may produce several, or none); its last value is kept in meta
// under "audit_seq". The trail is derived from the log at apply time, so it
// is the same on every node and cannot be edited through the API.
var keyAuditSeq = []byte("audit_seq")

// Audit event kinds.
const (
	AuditMessage = "message" // a message was stored
	AuditBlocked = "blocked" // a send was refused by the rules or strict_senders
	AuditAgent   = "agent"   // register / unregister
	AuditRules   = "rules"   // rules document replaced
	AuditLock    = "lock"    // acquire, renew, release, expire
	AuditConfig  = "config"  // cluster setting changed
	AuditTrim    = "trim"    // retention trimmed messages
	AuditNode    = "node"    // node joined, left, died
	// AuditAgentLease: an agent's lease granted to a new holder (first,
	// takeover) or released (agent_lease.go).
	AuditAgentLease = "agent_lease"
	AuditOther      = "other"
)

// audit appends ev to the trail inside an apply transaction, stamping its
// seq, index and time.
func audit(tx *bbolt.Tx, index uint64, ts int64, ev api.AuditEvent) {
	meta := tx.Bucket(bucketMeta)
	seq := getU64(meta, keyAuditSeq) + 1
	ev.Seq, ev.Index, ev.Time = seq, index, time.Unix(0, ts).UTC()
	data, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("fsm: audit: encode: %v", err))
	}
	if err := appendBucket(tx, bucketAudit).Put(u64(seq), data); err != nil {
		panic(fmt.Sprintf("fsm: audit: put: %v", err))
	}
	if err := meta.Put(keyAuditSeq, u64(seq)); err != nil {
		panic(fmt.Sprintf("fsm: audit: put seq: %v", err))
	}
}
