package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// formatMailboxEntries is how many entries of the mailbox log formatLog starts with.
const formatMailboxEntries = 300

var updateFormat = flag.Bool("update-format", false, "rewrite testdata/state_format.golden from the current code")

// formatLog is a fixed log touching every op and every bucket: the mailbox
// log, then private messages and replies, read marks, locks, the bulletin,
// retention, cursors, tokens, denials and node events.
func formatLog(tb testing.TB) []*raft.Log {
	tb.Helper()
	logs := mailboxLog(tb, 11, formatMailboxEntries)
	idx := uint64(len(logs))
	ts := baseTS + int64(idx)*1000
	add := func(op api.Op, body any) {
		idx++
		ts += 1000
		logs = append(logs, opEntry(tb, idx, ts, op, body))
	}
	add(api.OpSetConfig, api.SetConfigCommand{Key: "strict_senders", Value: json.RawMessage("false")})
	add(api.OpRegisterNode, api.RegisterNodeCommand{NodeID: "n1", APIAddr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:8001"})
	add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "pat", Role: "engineer"})
	msg := func(n int, from, text string, to ...string) api.Message {
		m := testMessage(fmt.Sprintf("msg-20261121-113000-%s-%08x", from, n), "private-talk", text)
		m.From, m.To = from, to
		return m
	}
	secret := msg(1, "alice", "the plan, between us", "bob")
	secret.Visibility, secret.Title, secret.Priority = api.VisibilityPrivate, "plan", "urgent"
	add(api.OpSend, api.SendCommand{Message: secret})
	answer := msg(2, "bob", "agreed", "alice")
	answer.Visibility, answer.InReplyTo, answer.Type = api.VisibilityPrivate, secret.ID, "response"
	add(api.OpSend, api.SendCommand{Message: answer})
	public := msg(3, "pat", "hello @alice", "all")
	public.Priority = "low"
	add(api.OpSend, api.SendCommand{Message: public})
	reply := msg(4, "alice", "hi", "pat")
	reply.InReplyTo, reply.Priority = public.ID, "high"
	add(api.OpSend, api.SendCommand{Message: reply})
	add(api.OpMarkRead, api.MarkReadCommand{Agent: "bob", ID: secret.ID})
	add(api.OpMarkRead, api.MarkReadCommand{Agent: "pat", Upto: idx})
	add(api.OpLockAcquire, api.LockAcquireCommand{Path: "src/a.go", Holder: "alice", TTL: api.LockTTL(60e9)})
	add(api.OpLockAcquire, api.LockAcquireCommand{Path: "src/b.go", Holder: "bob", TTL: api.LockTTL(60e9)})
	add(api.OpLockRenew, api.LockRenewCommand{Path: "src/a.go", Holder: "alice", Token: idx - 1, TTL: api.LockTTL(120e9)})
	add(api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{Holders: []string{"bob"}, Reason: "node n2 declared dead"})
	add(api.OpLockAcquire, api.LockAcquireCommand{Path: "src/c.go", Holder: "pat", TTL: api.LockTTL(60e9)})
	add(api.OpLockRelease, api.LockReleaseCommand{Path: "src/c.go", Holder: "pat", Token: idx})
	add(api.OpSetBulletin, api.BulletinCommand{Doc: json.RawMessage(`{"system_status":"degraded","warnings":["disk"]}`), By: "alice"})
	add(api.OpSetBulletin, api.BulletinCommand{Doc: json.RawMessage(`{"current_phase":"review"}`), Merge: true, By: "bob"})
	add(api.OpSetRetention, api.SetRetentionCommand{Channel: "general", MaxMessages: 20})
	add(api.OpSetRetention, api.SetRetentionCommand{Channel: "ops", MaxAge: "1h"})
	add(api.OpTrim, api.TrimCommand{Channel: "general"})
	add(api.OpSetCursor, api.SetCursorCommand{Agent: "alice", Seq: idx})
	add(api.OpCreateToken, api.CreateTokenCommand{ID: "t1", Agent: "alice", Role: api.TokenRoleAgent, Hash: HashToken("s1")})
	add(api.OpCreateToken, api.CreateTokenCommand{ID: "t2", Agent: "bob", Role: api.TokenRoleModerator, Hash: HashToken("s2"), By: "t1"})
	add(api.OpRevokeToken, api.RevokeTokenCommand{ID: "t1", By: "t2"})
	add(api.OpAuditDenial, api.AuditDenialCommand{Node: "n1", Agent: "alice", TokenID: "t1", Method: "POST", Path: "/v1/messages", Reason: "token revoked", Count: 3})
	add(api.OpNodeEvent, api.NodeEventCommand{NodeID: "n2", Event: api.NodeEventDead, Reason: "no ack"})
	return logs
}

// entryLog is a log built entry by entry: idx and ts are the index and
// time of the last entry (at first, of the one before the log).
type entryLog struct {
	tb   testing.TB
	logs []*raft.Log
	idx  uint64
	ts   int64
}

// add appends the entry of op and body, d after the last one, and
// returns its index.
func (l *entryLog) add(d time.Duration, op api.Op, body any) uint64 {
	l.idx++
	l.ts += int64(d)
	l.logs = append(l.logs, opEntry(l.tb, l.idx, l.ts, op, body))
	return l.idx
}

// formatTaskLog is the fixed tail after formatLog that touches every task
// op and every task bucket, and the send path's additions (capability
// addressing, reroute_blocked_to, escalation_target), from index start+1
// and time ts on. It ends with a task running (a lease) and a message
// queued (the outbox).
func formatTaskLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	add := l.add
	ms := time.Millisecond
	add(ms, api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(`"role:supervisor"`)})
	add(ms, api.OpRegisterAgent, api.RegisterAgentCommand{ID: "boss", Role: "orchestrator"})
	add(ms, api.OpRegisterAgent, api.RegisterAgentCommand{ID: "rita", Role: "reviewer", Capabilities: []string{"go"}})
	add(ms, api.OpRegisterAgent, api.RegisterAgentCommand{ID: "sam", Role: "supervisor"})
	task := func(id, to string, timeout, attempts int, deps ...string) api.TaskCreateCommand {
		c := api.TaskCreateCommand{ID: id, From: "boss", To: to, Title: "format " + id, Description: "pin " + id,
			Context: json.RawMessage(`{"n":1}`), DependsOn: deps, TimeoutSeconds: timeout, MaxAttempts: attempts}
		c.Normalize(time.Unix(0, baseTS))
		return c
	}
	add(ms, api.OpTaskCreate, task("fa", "role:reviewer", 60, 3))
	add(ms, api.OpTaskCreate, task("fb", "capability:go", 60, 3, "fa"))
	add(ms, api.OpTaskCreate, task("fc", "rita", 1, 1))
	add(ms, api.OpTaskCreate, task("fd", "rita", 60, 3, "fc"))
	fence := add(ms, api.OpTaskClaim, api.TaskClaimCommand{ID: "fa", Agent: "rita"})
	add(ms, api.OpTaskProgress, api.TaskProgressCommand{ID: "fa", Agent: "rita", Fence: fence, Message: "reading", Progress: ptr(0.5)})
	add(ms, api.OpTaskComplete, api.TaskCompleteCommand{ID: "fa", Agent: "rita", Fence: fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "fine", ConfidenceScore: ptr(0.9), Outputs: []string{"a.md"}}})
	fence = add(ms, api.OpTaskClaim, api.TaskClaimCommand{ID: "fb", Agent: "rita"})
	add(ms, api.OpTaskHandoff, api.TaskHandoffCommand{ID: "fb", Agent: "rita", Fence: fence, To: "rita", Reason: "later"})
	add(ms, api.OpTaskClaim, api.TaskClaimCommand{ID: "fb", Agent: "rita"})
	add(ms, api.OpTaskClaim, api.TaskClaimCommand{ID: "fc", Agent: "rita"})
	add(2*time.Second, opTaskTick, api.TickCommand{})
	add(ms, api.OpTick, api.TickCommand{})
	add(ms, api.OpTaskCreate, task("fe", "rita", 60, 3))
	add(ms, api.OpTaskCreate, task("ff", "rita", 60, 3, "fe"))
	add(ms, api.OpTaskCancel, api.TaskCancelCommand{ID: "fe", From: "boss", Reason: "scrapped"})
	m := testMessage("msg-20261121-113000-boss-00000001", "general", "anyone with go?")
	m.From, m.To = "boss", api.Recipients{"capability:go"}
	add(ms, api.OpSend, api.SendCommand{Message: m})
	add(ms, api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Preset: rules.PresetHierarchical, RerouteBlockedTo: "boss"}})
	m = testMessage("msg-20261121-113000-rita-00000002", "general", "psst")
	m.From, m.To = "rita", api.Recipients{"sam"}
	add(ms, api.OpSend, api.SendCommand{Message: m})
	return l.logs
}

// formatApprovalLog is the fixed tail after formatTaskLog that touches
// every approval op and bucket and the tick's approval work, from index
// start+1 and time ts on: decisions by id and by role, a modify, a
// reject, a cancel, a task's requires_approval completion and its
// approval, a tick that escalates one and expires another. It ends with
// an approval pending (the deadline and pending keys).
func formatApprovalLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	add := l.add
	ms := time.Millisecond
	req := func(id, from string, approvers []string, quorum int, timeout time.Duration, onTimeout string) api.ApprovalRequestCommand {
		c := api.ApprovalRequestCommand{ID: id, From: from, Approvers: approvers, Quorum: quorum, Title: "format " + id,
			Action: json.RawMessage(`{"cmd":"deploy ` + id + `","n":1}`), Rationale: "pin " + id, Confidence: ptr(0.5),
			Timeout: api.ApprovalTimeout(timeout), OnTimeout: onTimeout, Context: json.RawMessage(`{"why":"format"}`)}
		c.Normalize(time.Unix(0, baseTS))
		return c
	}
	hashOf := func(action string) string {
		h, err := api.ActionHash(json.RawMessage(action))
		if err != nil {
			tb.Fatal(err)
		}
		return h
	}
	add(ms, api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{}})
	a1 := req("pa", "boss", []string{"rita", "role:reviewer"}, 2, time.Hour, "")
	add(ms, api.OpApprovalRequest, a1)
	h1 := hashOf(string(a1.Action))
	add(ms, api.OpApprovalDecide, api.ApprovalDecideCommand{ID: "pa", Approver: "rita", Decision: api.DecisionApprove, ActionHash: h1, Comment: "fine"})
	mod := `{"cmd":"deploy pa --canary"}`
	add(ms, api.OpApprovalDecide, api.ApprovalDecideCommand{ID: "pa", Approver: "rex", Decision: api.DecisionModify, ActionHash: h1, Action: json.RawMessage(mod)})
	add(ms, api.OpApprovalDecide, api.ApprovalDecideCommand{ID: "pa", Approver: "rita", Decision: api.DecisionApprove, ActionHash: hashOf(mod)})
	add(ms, api.OpApprovalDecide, api.ApprovalDecideCommand{ID: "pa", Approver: "rex", Decision: api.DecisionApprove, ActionHash: hashOf(mod)})
	add(ms, api.OpApprovalRequest, req("pb", "boss", []string{"sam"}, 1, time.Second, api.OnTimeoutEscalate))
	add(ms, api.OpApprovalRequest, req("pc", "boss", []string{"rita"}, 1, time.Second, ""))
	pd := req("pd", "rita", []string{"boss"}, 1, time.Hour, "")
	add(ms, api.OpApprovalRequest, pd)
	add(ms, api.OpApprovalDecide, api.ApprovalDecideCommand{ID: "pd", Approver: "boss", Decision: api.DecisionReject, ActionHash: hashOf(string(pd.Action)), Comment: "no"})
	add(ms, api.OpApprovalRequest, req("pe", "boss", []string{"sam"}, 1, time.Hour, ""))
	add(ms, api.OpApprovalCancel, api.ApprovalCancelCommand{ID: "pe", From: "boss", Reason: "moot"})
	task := api.TaskCreateCommand{ID: "fg", From: "boss", To: "rita", Title: "format fg", TimeoutSeconds: 60, MaxAttempts: 3}
	task.Normalize(time.Unix(0, baseTS))
	add(ms, api.OpTaskCreate, task)
	fence := add(ms, api.OpTaskClaim, api.TaskClaimCommand{ID: "fg", Agent: "rita"})
	proposed := `{"merge":"fg"}`
	add(ms, api.OpTaskComplete, api.TaskCompleteCommand{ID: "fg", Agent: "rita", Fence: fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusRequiresApproval, Result: "ready to merge", ProposedAction: json.RawMessage(proposed)}})
	taskAppr := "appr" + strings.TrimPrefix(api.DerivedID("rita", time.Unix(0, l.ts), "task-approval:fg:1:"+itoa(fence)), "msg")
	add(ms, api.OpApprovalDecide, api.ApprovalDecideCommand{ID: taskAppr, Approver: "boss", Decision: api.DecisionApprove, ActionHash: hashOf(proposed)})
	add(2*time.Second, api.OpTick, api.TickCommand{})
	add(ms, api.OpApprovalRequest, req("pf", "boss", []string{"role:reviewer"}, 1, time.Hour, ""))
	return l.logs
}

// taskBucket reports whether name is one of the task buckets, which
// formatLog leaves empty and formatTaskLog fills.
func taskBucket(name string) bool { return strings.HasPrefix(name, "task") }

// approvalBucket reports whether name is one of the approval buckets,
// which formatLog and formatTaskLog leave empty and formatApprovalLog
// fills.
func approvalBucket(name string) bool { return strings.HasPrefix(name, "approval") }

// afterTasks and afterApprovals prefix the golden lines pinned after
// formatTaskLog and formatApprovalLog.
const (
	afterTasks         = "after-tasks "
	afterApprovals     = "after-approvals "
	afterPolicies      = "after-policies "
	afterReceiptStates = "after-receipt-states "
	afterArtifacts     = "after-artifacts "
	afterNodeEventIDs  = "after-node-event-ids "
	afterAgentLeases   = "after-agent-leases "
	afterClusterID     = "after-cluster-id "
	afterSenders       = "after-senders "
	// afterClusterVersion prefixes the lines after the cluster's state
	// version was raised (OpClusterVersion): the meta bucket's key.
	afterClusterVersion = "after-cluster-version "
	// afterA2A prefixes every bucket, agent_a2a included (the lines before
	// leave it out: written before it existed), after an A2A remote was
	// registered (version 3).
	afterA2A = "after-a2a "
	// afterPush prefixes every bucket, push included (the lines before
	// leave it out), after push configs were set and deleted and the
	// deliverer's cursor moved (version 3).
	afterPush = "after-push "
)

// sendersBucket reports whether name is the senders bucket, which only
// formatKnownNamesLog fills (entries flagged known_names).
func sendersBucket(name string) bool { return name == "senders" }

// formatKnownNamesLog is the fixed tail after the cluster id that touches
// the known names, from index start+1 and time ts on: a flagged send from
// an agent that never sent (recorded, and registered by the send), one
// back, one to a name no one answers to (refused: entry 3), the setting
// accept, and the same send then stored.
func formatKnownNamesLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	ms := time.Millisecond
	msg := func(n int, from string, to ...string) api.SendCommand {
		m := testMessage(fmt.Sprintf("msg-20261122-090000-%s-%08x", from, n), "general", "known names")
		m.From, m.To = from, to
		return api.SendCommand{Message: m, KnownNames: true}
	}
	l.add(ms, api.OpSend, msg(1, "newbie", "rita"))
	l.add(ms, api.OpSend, msg(2, "rita", "newbie"))
	l.add(ms, api.OpSend, msg(3, "rita", "ghost"))
	l.add(ms, api.OpSetConfig, api.SetConfigCommand{Key: "unknown_recipients", Value: json.RawMessage(`"accept"`)})
	l.add(ms, api.OpSend, msg(3, "rita", "ghost"))
	return l.logs
}

// agentLeaseBucket reports whether name is the agent lease bucket, which
// only formatAgentLeaseLog fills.
func agentLeaseBucket(name string) bool { return name == "agent_leases" }

// formatAgentLeaseLog is the fixed tail after the node events that
// touches the agent lease ops and the fences, from index start+1 and time
// ts on: a grant, a standby, a renewal, a reply and a cursor move under
// the fence, a lapse and a takeover, a release, and a takeover after it.
func formatAgentLeaseLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	ms := time.Millisecond
	a := api.LeaseHolder{Node: "n1", Instance: "aaaa1111"}
	b := api.LeaseHolder{Node: "n2", Instance: "bbbb2222"}
	ttl := api.LockTTL(10 * time.Second)
	first := l.add(ms, api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "pat", LeaseHolder: a, TTL: ttl})
	l.add(ms, api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "pat", LeaseHolder: b, TTL: ttl})
	l.add(ms, api.OpAgentLeaseRenew, api.AgentLeaseRenewCommand{Agent: "pat", LeaseHolder: a, Fence: first, TTL: ttl})
	m := testMessage("msg-20261121-113000-pat-00000201", "general", "answered under the fence")
	m.From, m.To = "pat", api.Recipients{"alice"}
	l.add(ms, api.OpSend, api.SendCommand{Message: m, AgentFence: first})
	l.add(ms, api.OpSetCursor, api.SetCursorCommand{Agent: "pat", Seq: l.idx, AgentFence: first})
	second := l.add(11*time.Second, api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "pat", LeaseHolder: b, TTL: ttl})
	l.add(ms, api.OpAgentLeaseRelease, api.AgentLeaseReleaseCommand{Agent: "pat", LeaseHolder: b, Fence: second})
	l.add(ms, api.OpAgentLeaseAcquire, api.AgentLeaseAcquireCommand{Agent: "pat", LeaseHolder: a, TTL: ttl})
	return l.logs
}

// nodeEventIDBucket reports whether name is the bucket of node events'
// ids, which only the node events after formatArtifactLog fill.
func nodeEventIDBucket(name string) bool { return name == "node_event_ids" }

// artifactBucket reports whether name is one of the artifact buckets,
// which only formatArtifactLog fills.
func artifactBucket(name string) bool { return strings.HasPrefix(name, "artifact") }

// formatArtifactLog is the fixed tail after formatReceiptStateLog that
// touches both artifact ops, the artifact settings and the references of
// messages, from index start+1 and time ts on: uploads (one again,
// Existed), a message naming artifacts (one twice, one as an object, a
// path), a trim that takes a referencing message away, an admin's delete,
// a retention delete that deletes and one that keeps a referenced
// artifact. It ends with artifacts stored, referenced and not.
func formatArtifactLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	ms := time.Millisecond
	id := func(c byte) string { return api.ArtifactIDPrefix + strings.Repeat(string(c), 64) }
	put := func(c byte, name, ct string, size int64, from string) api.ArtifactPutCommand {
		return api.ArtifactPutCommand{ID: id(c), Name: name, ContentType: ct, Size: size, From: from}
	}
	l.add(ms, api.OpSetConfig, api.SetConfigCommand{Key: "artifact_quota_bytes", Value: json.RawMessage("1000")})
	l.add(ms, api.OpSetConfig, api.SetConfigCommand{Key: "artifact_retention_seconds", Value: json.RawMessage("60")})
	l.add(ms, api.OpArtifactPut, put('a', "plan.md", "text/markdown; charset=utf-8", 100, "alice"))
	l.add(ms, api.OpArtifactPut, put('b', "data.bin", api.DefaultArtifactContentType, 300, "bob"))
	l.add(ms, api.OpArtifactPut, put('a', "again.md", "text/plain", 100, "bob"))
	l.add(ms, api.OpArtifactPut, put('c', "gone.txt", "text/plain", 50, "alice"))
	l.add(ms, api.OpArtifactPut, put('d', "old.txt", "text/plain", 10, "bob"))
	msg := func(n int, from string, refs ...api.ArtifactRef) api.Message {
		m := testMessage(fmt.Sprintf("msg-20261121-113000-%s-%08x", from, 100+n), "files", "see attached")
		m.From, m.To, m.Content.Artifacts = from, api.Recipients{"bob"}, refs
		return m
	}
	// alice names bob's artifact too, which only a sender who reads
	// everything may (a node without --auth, as here, or a moderator).
	l.add(ms, api.OpSend, api.SendCommand{Message: msg(1, "alice",
		api.ArtifactRef{Ref: id('a')}, api.ArtifactRef{Ref: id('b'), Name: "data-v1.bin"}, api.ArtifactRef{Ref: id('a')}, api.ArtifactRef{Ref: "shared/context/notes.md"}), ReadsAll: true})
	l.add(ms, api.OpSend, api.SendCommand{Message: msg(2, "alice", api.ArtifactRef{Ref: id('a')})})
	l.add(ms, api.OpSetRetention, api.SetRetentionCommand{Channel: "files", MaxMessages: 1})
	l.add(ms, api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: id('c'), By: "admin"})
	l.add(61*time.Second, api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: id('d'), By: api.SystemSender, Unreferenced: true})
	l.add(ms, api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: id('a'), By: api.SystemSender, Unreferenced: true})
	return l.logs
}

// policyBucket reports whether name is the run-time policy bucket, which
// only formatPolicyLog fills.
func policyBucket(name string) bool { return name == "policies" }

// formatReceiptStateLog is the fixed tail after formatPolicyLog that
// reports watcher receipt states (receipt_state.go) of formatLog's
// messages, from index start+1 and time ts on: queued then delivered,
// and interrupted.
func formatReceiptStateLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	ms := time.Millisecond
	public, reply := "msg-20261121-113000-pat-00000003", "msg-20261121-113000-alice-00000004"
	l.add(ms, api.OpReceiptState, api.ReceiptStateCommand{ID: reply, Agent: "pat", State: api.ReceiptQueued})
	l.add(ms, api.OpReceiptState, api.ReceiptStateCommand{ID: reply, Agent: "pat", State: api.ReceiptDelivered})
	l.add(ms, api.OpReceiptState, api.ReceiptStateCommand{ID: public, Agent: "bob", State: api.ReceiptInterrupted})
	return l.logs
}

// formatPolicyLog is the fixed tail after formatApprovalLog that touches
// set_policy: an agent-wide policy with an end, per-sender overrides, one
// replaced, one cleared, from index start+1 and time ts on.
func formatPolicyLog(tb testing.TB, start uint64, ts int64) []*raft.Log {
	tb.Helper()
	l := &entryLog{tb: tb, idx: start, ts: ts}
	ms := time.Millisecond
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "rita", Mode: api.PolicyQuiet, ForSeconds: 3600, SetBy: "rita"})
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "rita", From: "boss", Mode: api.PolicyInterrupt, SetBy: "boss"})
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "rita", From: "sam", Mode: api.PolicyFork, SetBy: "rita"})
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "rita", From: "sam", Mode: api.PolicyQueue, SetBy: "rita"})
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "alice", Mode: api.PolicyFork, SetBy: "alice"})
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "alice", Mode: "", SetBy: "alice"})
	l.add(ms, api.OpSetPolicy, api.SetPolicyCommand{Agent: "bob", Mode: api.PolicyQueue, SetBy: "bob"})
	return l.logs
}

// bucketDigests is, per bucket of f but agent_a2a and push (newer than
// every part that reads it), its number of keys and the SHA-256 of its
// Dump lines: "bucket keys sha256".
func bucketDigests(tb testing.TB, f *FSM) []string {
	tb.Helper()
	return digestsWithout(tb, f, bucketAgentA2A, bucketPush)
}

// digestsWithout is allBucketDigests without the buckets named.
func digestsWithout(tb testing.TB, f *FSM, skip ...[]byte) []string {
	tb.Helper()
	var out []string
	for _, line := range allBucketDigests(tb, f) {
		name, _, _ := strings.Cut(line, " ")
		if !slices.ContainsFunc(skip, func(b []byte) bool { return string(b) == name }) {
			out = append(out, line)
		}
	}
	return out
}

// allBucketDigests is bucketDigests with every bucket.
func allBucketDigests(tb testing.TB, f *FSM) []string {
	tb.Helper()
	type acc struct {
		n int
		h []string
	}
	per := map[string]*acc{}
	for line := range strings.Lines(dump(tb, f)) {
		name, _, _ := strings.Cut(line, " ")
		if per[name] == nil {
			per[name] = &acc{}
		}
		per[name].n++
		per[name].h = append(per[name].h, line)
	}
	var out []string
	for _, b := range allBuckets {
		a := per[string(b)]
		if a == nil {
			a = &acc{}
		}
		sum := sha256.Sum256([]byte(strings.Join(a.h, "")))
		out = append(out, fmt.Sprintf("%s %d %s", b, a.n, hex.EncodeToString(sum[:])))
	}
	return out
}

// TestStateFormatUnchanged pins the bytes the state file holds: a fixed log
// touching every op must leave exactly the keys and values it left when
// testdata/state_format.golden was written. Existing state files and
// snapshots are read by the current code, so a change here is a change of
// the on-disk format and needs a migration, not a new golden file.
//
// The golden file has ten parts: the buckets but the task, approval and
// policy ones after formatLog (the lines written before tasks existed,
// unchanged), then, prefixed "after-tasks ", every bucket but the
// approval and policy ones after formatTaskLog too (the lines written
// before approvals existed, unchanged), then, prefixed "after-approvals ",
// every bucket but the policy one after formatApprovalLog (the lines
// written before run-time policies existed, unchanged), then, prefixed
// "after-policies ", every bucket after formatPolicyLog (the lines written
// before receipt states existed, unchanged), then, prefixed
// "after-receipt-states ", every bucket but the artifact ones after
// formatReceiptStateLog (the lines written before artifacts existed,
// unchanged), then, prefixed "after-artifacts ", every bucket but the node
// event ids after formatArtifactLog (the lines written before node events
// had ids, unchanged), then, prefixed "after-node-event-ids ", every
// bucket but the agent leases after a node event proposed twice under one
// id (the lines written before agent leases existed, unchanged), then,
// prefixed "after-agent-leases ", every bucket but the senders after
// formatAgentLeaseLog,
// then, prefixed "after-cluster-id ", every bucket but the senders after
// the cluster id was fixed (OpClusterID) (the lines written before
// senders were recorded, unchanged), then, prefixed "after-senders ",
// every bucket after formatKnownNamesLog, then, prefixed
// "after-cluster-version ", every bucket after the cluster's state version
// was raised (the lines before, unchanged), then, prefixed "after-a2a ",
// every bucket, agent_a2a too, after an A2A remote was registered, then,
// prefixed "after-push ", every bucket, push too, after push configs and
// the deliverer's cursor were written.
func TestStateFormatUnchanged(t *testing.T) {
	f, _ := openTemp(t)
	logs := formatLog(t)
	for i, r := range f.ApplyBatch(logs) {
		err, failed := r.(error)
		// The mailbox log refuses some commands on purpose; the tail after
		// it must apply whole.
		if failed && (i >= formatMailboxEntries || strings.Contains(err.Error(), "decode")) {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	var got []string
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !taskBucket(name) && !approvalBucket(name) && !policyBucket(name) && !artifactBucket(name) && !nodeEventIDBucket(name) && !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, line)
		}
	}
	tail := formatTaskLog(t, uint64(len(logs)), baseTS+int64(len(logs)+1)*1000)
	for i, r := range f.ApplyBatch(tail) {
		if err, failed := r.(error); failed {
			t.Fatalf("task entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !approvalBucket(name) && !policyBucket(name) && !artifactBucket(name) && !nodeEventIDBucket(name) && !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, afterTasks+line)
		}
	}
	last := tail[len(tail)-1]
	approvals := formatApprovalLog(t, last.Index, baseTS+int64(last.Index+1)*1000+int64(len(tail))*int64(time.Second))
	for i, r := range f.ApplyBatch(approvals) {
		if err, failed := r.(error); failed {
			t.Fatalf("approval entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !policyBucket(name) && !artifactBucket(name) && !nodeEventIDBucket(name) && !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, afterApprovals+line)
		}
	}
	lastApproval := approvals[len(approvals)-1]
	policies := formatPolicyLog(t, lastApproval.Index, baseTS+int64(lastApproval.Index+1)*1000+int64(len(tail)+len(approvals))*int64(time.Second))
	for i, r := range f.ApplyBatch(policies) {
		if err, failed := r.(error); failed {
			t.Fatalf("policy entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !artifactBucket(name) && !nodeEventIDBucket(name) && !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, afterPolicies+line)
		}
	}
	lastPolicy := policies[len(policies)-1]
	receipts := formatReceiptStateLog(t, lastPolicy.Index, baseTS+int64(lastPolicy.Index+1)*1000+int64(len(tail)+len(approvals)+len(policies))*int64(time.Second))
	for i, r := range f.ApplyBatch(receipts) {
		if err, failed := r.(error); failed {
			t.Fatalf("receipt state entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !artifactBucket(name) && !nodeEventIDBucket(name) && !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, afterReceiptStates+line)
		}
	}
	lastReceipt := receipts[len(receipts)-1]
	artifacts := formatArtifactLog(t, lastReceipt.Index, baseTS+int64(lastReceipt.Index+1)*1000+int64(len(tail)+len(approvals)+len(policies)+len(receipts))*int64(time.Second))
	for i, r := range f.ApplyBatch(artifacts) {
		if err, failed := r.(error); failed {
			t.Fatalf("artifact entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !nodeEventIDBucket(name) && !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, afterArtifacts+line)
		}
	}
	// Node events with an id, one proposed twice (audited once).
	lastArtifact := artifacts[len(artifacts)-1]
	el := &entryLog{tb: t, idx: lastArtifact.Index, ts: baseTS + int64(lastArtifact.Index+1)*1000 + int64(len(tail)+len(approvals)+len(policies)+len(receipts)+len(artifacts))*int64(time.Second)}
	dead := api.NodeEventCommand{ID: "n1-n2-dead-1764300000000000000", NodeID: "n2", Event: api.NodeEventDead, Reason: "declared dead by gossip failure detection at 127.0.0.1:7082"}
	el.add(time.Millisecond, api.OpNodeEvent, dead)
	el.add(time.Millisecond, api.OpNodeEvent, dead)
	for i, r := range f.ApplyBatch(el.logs) {
		if err, failed := r.(error); failed {
			t.Fatalf("node event entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if name := strings.Fields(line)[0]; !agentLeaseBucket(name) && !sendersBucket(name) {
			got = append(got, afterNodeEventIDs+line)
		}
	}
	// Agent leases and their fences.
	lastEvent := el.logs[len(el.logs)-1]
	leases := formatAgentLeaseLog(t, lastEvent.Index, el.ts+int64(24*time.Hour)) // past every earlier entry time, which apply made monotonic
	for i, r := range f.ApplyBatch(leases) {
		if err, failed := r.(error); failed {
			t.Fatalf("agent lease entry %d: %v", i+1, err)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if !sendersBucket(strings.Fields(line)[0]) {
			got = append(got, afterAgentLeases+line)
		}
	}
	// The cluster's id, fixed once (the same id again changes nothing,
	// another is refused).
	lastLease := leases[len(leases)-1]
	cl := &entryLog{tb: t, idx: lastLease.Index, ts: el.ts + int64(48*time.Hour)}
	cl.add(time.Millisecond, api.OpClusterID, api.ClusterIDCommand{ClusterID: "c0123456789abcdef0123456789abcdef"})
	cl.add(time.Millisecond, api.OpClusterID, api.ClusterIDCommand{ClusterID: "c0123456789abcdef0123456789abcdef"})
	cl.add(time.Millisecond, api.OpClusterID, api.ClusterIDCommand{ClusterID: "cffffffffffffffffffffffffffffffff"})
	for i, r := range f.ApplyBatch(cl.logs) {
		if _, failed := r.(error); failed != (i == 2) {
			t.Fatalf("cluster id entry %d: %v", i+1, r)
		}
	}
	if id := f.ClusterID(); id != "c0123456789abcdef0123456789abcdef" {
		t.Fatalf("cluster id %q after fixing it and refusing another", id)
	}
	for _, line := range bucketDigests(t, f) {
		if !sendersBucket(strings.Fields(line)[0]) {
			got = append(got, afterClusterID+line)
		}
	}
	// Known names: flagged sends record their senders; names no one
	// answers to are refused, then accepted under unknown_recipients
	// accept.
	lastID := cl.logs[len(cl.logs)-1]
	known := formatKnownNamesLog(t, lastID.Index, cl.ts+int64(24*time.Hour))
	for i, r := range f.ApplyBatch(known) {
		if _, failed := r.(error); failed != (i == 2) {
			t.Fatalf("known names entry %d: %v", i+1, r)
		}
	}
	for _, line := range bucketDigests(t, f) {
		if strings.Contains(line, " 0 ") {
			t.Errorf("the format logs leave bucket %s empty: they pin nothing there", strings.Fields(line)[0])
		}
		got = append(got, afterSenders+line)
	}
	// The cluster's state version, raised to 2 (the same again changes
	// nothing, a lower one is refused).
	lastKnown := known[len(known)-1]
	cv := &entryLog{tb: t, idx: lastKnown.Index, ts: cl.ts + int64(48*time.Hour)}
	cv.add(time.Millisecond, api.OpClusterVersion, api.ClusterVersionCommand{Version: 2})
	cv.add(time.Millisecond, api.OpClusterVersion, api.ClusterVersionCommand{Version: 2})
	cv.add(time.Millisecond, api.OpClusterVersion, api.ClusterVersionCommand{Version: 1})
	for i, r := range f.ApplyBatch(cv.logs) {
		if _, failed := r.(error); failed != (i == 2) {
			t.Fatalf("cluster version entry %d: %v", i+1, r)
		}
	}
	for _, line := range bucketDigests(t, f) {
		got = append(got, afterClusterVersion+line)
	}
	// An A2A remote registered (version 3), with its credential apart.
	lastCV := cv.logs[len(cv.logs)-1]
	ra := &entryLog{tb: t, idx: lastCV.Index, ts: cv.ts + int64(24*time.Hour)}
	ra.add(time.Millisecond, api.OpClusterVersion, api.ClusterVersionCommand{Version: 3})
	ra.add(time.Millisecond, api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ext", A2A: &api.A2ARemote{URL: "https://remote.example/a2a", Credential: "tok-1"}})
	for i, r := range f.ApplyBatch(ra.logs) {
		if err, failed := r.(error); failed {
			t.Fatalf("a2a entry %d: %v", i+1, err)
		}
	}
	for _, line := range digestsWithout(t, f, bucketPush) {
		got = append(got, afterA2A+line)
	}
	// Push configs of task fa (its creator, boss), one deleted; the
	// deliverer's cursor moved.
	lastRA := ra.logs[len(ra.logs)-1]
	pl := &entryLog{tb: t, idx: lastRA.Index, ts: ra.ts + int64(24*time.Hour)}
	for _, id := range []string{"p1", "p2"} {
		pl.add(time.Millisecond, api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: api.PushConfig{TaskID: "fa", ID: id,
			URL: "https://hooks.example/" + id, Token: "t-" + id, Authentication: &api.PushAuthentication{Scheme: "Bearer", Credentials: "c-" + id}}})
	}
	pl.add(time.Millisecond, api.OpPushConfigDelete, api.PushConfigDeleteCommand{From: "boss", TaskID: "fa", ID: "p1"})
	pl.add(time.Millisecond, api.OpPushCursor, api.PushCursorCommand{Index: pl.idx})
	for i, r := range f.ApplyBatch(pl.logs) {
		if err, failed := r.(error); failed {
			t.Fatalf("push entry %d: %v", i+1, err)
		}
	}
	for _, line := range allBucketDigests(t, f) {
		got = append(got, afterPush+line)
	}
	path := filepath.Join("testdata", "state_format.golden")
	if *updateFormat {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var want []string
	for sc := bufio.NewScanner(file); sc.Scan(); {
		want = append(want, sc.Text())
	}
	if len(want) != len(got) {
		t.Fatalf("%d lines, golden file has %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("bucket contents changed:\n got  %s\n want %s", got[i], want[i])
		}
	}
}
