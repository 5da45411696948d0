package fsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"
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

// AuditEvent is one line of the audit trail. Line renders it in the seed
// format: "[2025-10-20T14:30:00Z] [orchestrator→triage] TASK_ASSIGN: Triage new issue #123".
type AuditEvent struct {
	Seq   uint64    `json:"seq"`   // position in the trail, from 1
	Index uint64    `json:"index"` // Raft index of the entry that produced it
	Time  time.Time `json:"time"`
	Kind  string    `json:"kind"`
	From  string    `json:"from,omitempty"`
	To    []string  `json:"to,omitempty"`
	// Label is the upper-case word after the parties: the message type
	// (TASK_ASSIGN), BLOCKED, REGISTER, LOCK_ACQUIRE, ...
	Label     string `json:"label"`
	Text      string `json:"text"`
	MessageID string `json:"message_id,omitempty"`
	// Private marks an event about a private message; readers other than
	// its parties and moderators see RedactEvent's line instead.
	Private bool `json:"private,omitempty"`
	// Readers, on a Private event, are the agents besides From who may read
	// the message: those it was delivered to and those its "to" names by
	// id (see Viewer.CanReadEvent). Empty on other events.
	Readers []string `json:"readers,omitempty"`
}

// Line renders the event in the seed audit format.
func (e AuditEvent) Line() string {
	parties := e.From
	if len(e.To) > 0 {
		parties += "→" + strings.Join(e.To, ",")
	}
	var b strings.Builder
	b.WriteString("[" + e.Time.UTC().Format(time.RFC3339) + "] ")
	if parties != "" {
		b.WriteString("[" + parties + "] ")
	}
	b.WriteString(e.Label)
	if e.Text != "" {
		b.WriteString(": " + e.Text)
	}
	return b.String()
}

// audit appends ev to the trail inside an apply transaction, stamping its
// seq, index and time.
func audit(tx *bbolt.Tx, index uint64, ts int64, ev AuditEvent) {
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

// FirstLine is the first line of s, cut to n bytes, for audit lines.
func FirstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// AuditPage is one page of the trail.
type AuditPage struct {
	Events  []AuditEvent `json:"events"`
	HasMore bool         `json:"has_more"`
}

// Audit returns up to limit events with seq > after, oldest first (limit as
// for ChannelPage).
func (f *FSM) Audit(after uint64, limit int) (AuditPage, error) {
	limit = pageLimit(limit)
	page := AuditPage{Events: []AuditEvent{}}
	err := f.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if len(page.Events) == limit {
				page.HasMore = true
				return nil
			}
			var ev AuditEvent
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("fsm: audit %d: %w", binary.BigEndian.Uint64(k), err)
			}
			page.Events = append(page.Events, ev)
		}
		return nil
	})
	return page, err
}
