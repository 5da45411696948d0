package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyFunc applies one decoded command inside the batch's write
// transaction. index is the entry's Raft index and ts its stamped time made
// monotonic. It must check everything before it writes anything, so a failed
// command leaves no trace in the shared transaction, and it returns either a
// result or an error value (never panics on bad input).
type applyFunc func(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error)

// opSpec is one op of the registry: its apply function and the lowest
// state version (cluster_version.go) a cluster must run before the op may
// be proposed. Every op of the builds before versions is version 1: every
// build applies it, and an entry of it applies forever (replay), whatever
// version the cluster runs later. A new op that an older build would not
// apply says the version of the build that brought it (MaxStateVersion
// then), so it is refused before it is proposed until every voter runs
// such a build (FSM.CheckVersion).
//
// bodyVersion, for an op whose older builds apply only some bodies right,
// is the version a body needs above the op's (register_agent with an
// A2A remote: a build of version 2 would drop the field and store another
// state than the others); nil for none.
type opSpec struct {
	apply       applyFunc
	version     int
	bodyVersion func(body any) int
}

// v1 is an op every build applies.
func v1(fn applyFunc) opSpec { return opSpec{apply: fn, version: 1} }

// registry maps each op to its apply function and version. Open builds it
// once per FSM: the ops that read the rules are methods, for the FSM's
// compiled-rules cache.
//
// Each apply is in its domain's <domain>_<op>.go (the file map is in
// DESIGN.md); the comments below name them.
func (f *FSM) registry() map[api.Op]opSpec {
	return map[api.Op]opSpec{
		api.OpSend:         v1(f.applySend),       // message_send.go
		api.OpRegisterNode: v1(applyRegisterNode), // node_register.go
		api.OpSetConfig:    v1(applySetConfig),    // config_set.go
		api.OpNodeEvent:    v1(applyNodeEvent),    // node_event.go
		api.OpClusterID:    v1(applyClusterID),    // cluster_id.go
		// Version 1 although builds before versions do not know it: the
		// leader commits it only once every server reports a build that
		// applies the version it raises to (cluster_version.go).
		api.OpClusterVersion: v1(f.applyClusterVersion), // cluster_version.go
		api.OpSetRules:       v1(f.applySetRules),       // rules_set.go

		// Mailbox: agent_register.go, agent_unregister.go,
		// inbox_mark_read.go, receipt_state.go.
		api.OpRegisterAgent:   {apply: applyRegisterAgent, version: 1, bodyVersion: registerAgentVersion},
		api.OpUnregisterAgent: v1(applyUnregisterAgent),
		api.OpMarkRead:        v1(applyMarkRead),
		api.OpReceiptState:    v1(applyReceiptState),

		// Coordination: bulletin_set.go, lock_acquire.go, lock_renew.go,
		// lock_release.go, lock_release_holder.go.
		api.OpSetBulletin:        v1(applySetBulletin),
		api.OpLockAcquire:        v1(applyLockAcquire),
		api.OpLockRenew:          v1(applyLockRenew),
		api.OpLockRelease:        v1(applyLockRelease),
		api.OpReleaseHolderLocks: v1(applyReleaseHolderLocks),

		// Retention: retention_set.go, retention_trim.go.
		api.OpSetRetention: v1(applySetRetention),
		api.OpTrim:         v1(applyTrim),

		// Watchers: cursor_set.go, policy_set.go.
		api.OpSetCursor: v1(applySetCursor),
		api.OpSetPolicy: v1(applySetPolicy),

		// Agent failover: agent_lease_acquire.go, agent_lease_renew.go,
		// agent_lease_renew_many.go (version 2), agent_lease_release.go.
		api.OpAgentLeaseAcquire:   v1(applyAgentLeaseAcquire),
		api.OpAgentLeaseRenew:     v1(applyAgentLeaseRenew),
		api.OpAgentLeaseRenewMany: {apply: applyAgentLeaseRenewMany, version: 2},
		api.OpAgentLeaseRelease:   v1(applyAgentLeaseRelease),

		// Artifacts' metadata: artifact_put.go, artifact_delete.go.
		api.OpArtifactPut:    v1(applyArtifactPut),
		api.OpArtifactDelete: v1(applyArtifactDelete),

		// Authentication: token_create.go, token_revoke.go,
		// audit_denial.go.
		api.OpCreateToken: v1(applyCreateToken),
		api.OpRevokeToken: v1(applyRevokeToken),
		api.OpAuditDenial: v1(applyAuditDenial),

		// Tasks: task_create.go, task_claim.go, task_progress.go,
		// task_complete.go, task_handoff.go, task_cancel.go.
		api.OpTaskCreate:   v1(f.applyTaskCreate),
		api.OpTaskClaim:    v1(onTask(f, api.OpTaskClaim, (*taskOp).claim)),
		api.OpTaskProgress: v1(onTask(f, api.OpTaskProgress, (*taskOp).progress)),
		api.OpTaskComplete: v1(onTask(f, api.OpTaskComplete, (*taskOp).complete)),
		api.OpTaskHandoff:  v1(onTask(f, api.OpTaskHandoff, (*taskOp).handoff)),
		api.OpTaskCancel:   v1(onTask(f, api.OpTaskCancel, (*taskOp).cancel)),

		// Approvals: approval_request.go, approval_decide.go,
		// approval_cancel.go.
		api.OpApprovalRequest: v1(f.applyApprovalRequest),
		api.OpApprovalDecide:  v1(f.applyApprovalDecide),
		api.OpApprovalCancel:  v1(f.applyApprovalCancel),

		// A2A push notifications: push_config_set.go,
		// push_config_delete.go, push_cursor.go (version 3).
		api.OpPushConfigSet:    {apply: applyPushConfigSet, version: pushConfigVersion},
		api.OpPushConfigDelete: {apply: applyPushConfigDelete, version: pushConfigVersion},
		api.OpPushCursor:       {apply: applyPushCursor, version: pushConfigVersion},

		// The tick: tick.go. "task_tick" is its name in logs written
		// before approvals (main shipped it): the same apply.
		api.OpTick: v1(f.applyTick),
		opTaskTick: v1(f.applyTick),
	}
}
