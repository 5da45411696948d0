package fsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"go.etcd.io/bbolt"
)

// The buckets of the state file. Keys that hold a seq or an index are 8-byte
// big-endian so that bbolt's byte order is numeric order.
var (
	// bucketMeta: "applied_index", "applied_term" → u64; "last_ts" → i64.
	bucketMeta = []byte("meta")
	// The message log (message_store.go): seq → message JSON; message id → seq
	// and hash; channel → counts; channel ‖ 0x00 ‖ seq → empty.
	bucketMessages     = []byte("messages")
	bucketIDs          = []byte("ids")
	bucketChannels     = []byte("channels")
	bucketChannelIndex = []byte("channel_index")
	// bucketNodes: node id → NodeInfo JSON.
	bucketNodes = []byte("nodes")

	// The mailbox model. Each bucket's key and value format is documented
	// in its domain's store file (agent_store.go, inbox_store.go,
	// receipt_store.go, thread_store.go, audit_store.go, config_store.go,
	// rules_store.go, bulletin_store.go, lock_store.go, retention_store.go,
	// cursor_store.go).
	bucketAgents      = []byte("agents")
	bucketAgentIndex  = []byte("agent_index")
	bucketInbox       = []byte("inbox")
	bucketInboxCounts = []byte("inbox_counts")
	bucketInboxUnread = []byte("inbox_unread")
	bucketReadMarks   = []byte("read_marks")
	bucketReceipts    = []byte("receipts")
	bucketThreads     = []byte("threads")
	bucketAudit       = []byte("audit")
	bucketConfig      = []byte("config")
	bucketRules       = []byte("rules")
	bucketBulletin    = []byte("bulletin")
	bucketLocks       = []byte("locks")
	bucketRetention   = []byte("retention")
	bucketCursors     = []byte("cursors")

	// Bearer tokens (token_store.go): id → token record; SHA-256 hex → id.
	bucketTokens      = []byte("tokens")
	bucketTokenHashes = []byte("token_hashes")

	// Tasks (task_store.go documents each layout).
	bucketTasks       = []byte("tasks")
	bucketTaskIDs     = []byte("task_ids")
	bucketTaskIndex   = []byte("task_index")
	bucketTaskHistory = []byte("task_history")
	bucketTaskEvents  = []byte("task_events")
	bucketOutbox      = []byte("task_outbox") // outbox.go; named when only tasks queued

	// Approvals (approval_store.go documents each layout).
	bucketApprovals       = []byte("approvals")
	bucketApprovalIDs     = []byte("approval_ids")
	bucketApprovalIndex   = []byte("approval_index")
	bucketApprovalHistory = []byte("approval_history")
	bucketApprovalEvents  = []byte("approval_events")

	// Run-time delivery policies: policy_store.go.
	bucketPolicies = []byte("policies")

	// Artifacts' metadata (artifact_store.go documents each layout).
	bucketArtifacts     = []byte("artifacts")
	bucketArtifactIndex = []byte("artifact_index")
	bucketArtifactUsage = []byte("artifact_usage")
	bucketArtifactRefs  = []byte("artifact_refs")

	// bucketNodeEventIDs: a node event's id → the 8-byte index that
	// recorded it (node_event.go), so a retried proposal audits once.
	bucketNodeEventIDs = []byte("node_event_ids")

	// bucketAgentLeases: agent id → agentLeaseRecord JSON, the fenced
	// lease of the watcher that serves the agent (agent_lease_store.go).
	bucketAgentLeases = []byte("agent_leases")

	// bucketAgentA2A: agent id → api.A2ARemote JSON, a remote A2A agent's
	// URL and credential (agent_store.go): apart from the agent's record
	// so that no read of the registry can carry the credential.
	bucketAgentA2A = []byte("agent_a2a")

	// bucketSenders (known.go): agent id → the 8-byte seq of its first
	// message, for the names a command may address.
	bucketSenders = []byte("senders")

	// bucketPush (push_store.go): tasks' A2A push configs, credentials
	// included, and the deliverer's cursor.
	bucketPush = []byte("push")

	allBuckets = [][]byte{
		bucketMeta, bucketMessages, bucketIDs, bucketChannels, bucketChannelIndex, bucketNodes,
		bucketAgents, bucketAgentIndex, bucketInbox, bucketInboxCounts, bucketInboxUnread, bucketReadMarks, bucketReceipts,
		bucketThreads, bucketAudit, bucketConfig, bucketRules, bucketBulletin, bucketLocks, bucketRetention, bucketCursors,
		bucketTokens, bucketTokenHashes,
		bucketTasks, bucketTaskIDs, bucketTaskIndex, bucketTaskHistory, bucketTaskEvents, bucketOutbox,
		bucketApprovals, bucketApprovalIDs, bucketApprovalIndex, bucketApprovalHistory, bucketApprovalEvents,
		bucketPolicies,
		bucketArtifacts, bucketArtifactIndex, bucketArtifactUsage, bucketArtifactRefs,
		bucketNodeEventIDs,
		bucketAgentLeases,
		bucketSenders,
		bucketAgentA2A,
		bucketPush,
	}

	keyAppliedIndex = []byte("applied_index")
	keyAppliedTerm  = []byte("applied_term")
	keyLastTS       = []byte("last_ts")
)

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b *bbolt.Bucket, key []byte) uint64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// decodeAll decodes every value of b, each a JSON record, in key order;
// what names a record in the error ("fsm: node n1: decode: ...").
func decodeAll[T any](b *bbolt.Bucket, what string) ([]T, error) {
	out := []T{}
	err := b.ForEach(func(k, v []byte) error {
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("fsm: %s %s: decode: %w", what, k, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

func createBuckets(tx *bbolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("fsm: create bucket %s: %w", name, err)
		}
	}
	return nil
}

// appendFill is the FillPercent of the buckets whose keys grow in log
// order (a seq, or a prefix then a seq): bbolt splits a full page in
// half by default, which leaves pages that are only ever appended to
// half empty; filled to the brim, the state file holds the same keys in
// fewer pages (BenchmarkStateBytesPerMessage, docs/PERFORMANCE.md).
const appendFill = 1.0

// appendBucket is the bucket name of tx, set to fill its pages for
// appends (appendFill). FillPercent holds for the transaction's handle
// only, so every write of such a bucket takes it through here.
func appendBucket(tx *bbolt.Tx, name []byte) *bbolt.Bucket {
	b := tx.Bucket(name)
	b.FillPercent = appendFill
	return b
}

// lastTS is the time of the latest applied entry.
func lastTS(tx *bbolt.Tx) int64 { return int64(getU64(tx.Bucket(bucketMeta), keyLastTS)) }

// mustPut and mustDelete write inside an apply transaction; bbolt fails
// only on programming errors (empty or oversized key, read-only tx), and
// the batch is abandoned.
func mustPut(b *bbolt.Bucket, k, v []byte) {
	if err := b.Put(k, v); err != nil {
		panic(fmt.Sprintf("fsm: put %q: %v", k, err))
	}
}

func mustDelete(b *bbolt.Bucket, k []byte) {
	if err := b.Delete(k); err != nil {
		panic(fmt.Sprintf("fsm: delete %q: %v", k, err))
	}
}

// entryTime is the entry time ts as a UTC time, zero for 0.
func entryTime(ts int64) time.Time {
	if ts == 0 {
		return time.Time{}
	}
	return time.Unix(0, ts).UTC()
}

// Dump writes every key and value of every bucket, in a fixed order, as
// hex lines: a canonical form of the logical state, for comparing two
// nodes or two runs byte for byte.
func (f *FSM) Dump(w io.Writer) error {
	return f.view(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(w, "%s %x %x\n", name, k, v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}
