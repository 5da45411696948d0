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

// registry maps each op to its apply function. Open builds it once per
// FSM: the ops that read the rules are methods, for the FSM's
// compiled-rules cache.
//
// Each apply is in its domain's <domain>_<op>.go (the file map is in
// DESIGN.md); the comments below name them.
func (f *FSM) registry() map[api.Op]applyFunc {
	return map[api.Op]applyFunc{
		api.OpSend:         f.applySend,       // message_send.go
		api.OpRegisterNode: applyRegisterNode, // node_register.go
		api.OpSetConfig:    applySetConfig,    // config_set.go
		api.OpNodeEvent:    applyNodeEvent,    // node_event.go
		api.OpClusterID:    applyClusterID,    // cluster_id.go
		api.OpSetRules:     f.applySetRules,   // rules_set.go

		// Mailbox: agent_register.go, agent_unregister.go,
		// inbox_mark_read.go, receipt_state.go.
		api.OpRegisterAgent:   applyRegisterAgent,
		api.OpUnregisterAgent: applyUnregisterAgent,
		api.OpMarkRead:        applyMarkRead,
		api.OpReceiptState:    applyReceiptState,

		// Coordination: bulletin_set.go, lock_acquire.go, lock_renew.go,
		// lock_release.go, lock_release_holder.go.
		api.OpSetBulletin:        applySetBulletin,
		api.OpLockAcquire:        applyLockAcquire,
		api.OpLockRenew:          applyLockRenew,
		api.OpLockRelease:        applyLockRelease,
		api.OpReleaseHolderLocks: applyReleaseHolderLocks,

		// Retention: retention_set.go, retention_trim.go.
		api.OpSetRetention: applySetRetention,
		api.OpTrim:         applyTrim,

		// Watchers: cursor_set.go, policy_set.go.
		api.OpSetCursor: applySetCursor,
		api.OpSetPolicy: applySetPolicy,

		// Agent failover: agent_lease_acquire.go, agent_lease_renew.go,
		// agent_lease_renew_many.go, agent_lease_release.go.
		api.OpAgentLeaseAcquire:   applyAgentLeaseAcquire,
		api.OpAgentLeaseRenew:     applyAgentLeaseRenew,
		api.OpAgentLeaseRenewMany: applyAgentLeaseRenewMany,
		api.OpAgentLeaseRelease:   applyAgentLeaseRelease,

		// Artifacts' metadata: artifact_put.go, artifact_delete.go.
		api.OpArtifactPut:    applyArtifactPut,
		api.OpArtifactDelete: applyArtifactDelete,

		// Authentication: token_create.go, token_revoke.go,
		// audit_denial.go.
		api.OpCreateToken: applyCreateToken,
		api.OpRevokeToken: applyRevokeToken,
		api.OpAuditDenial: applyAuditDenial,

		// Tasks: task_create.go, task_claim.go, task_progress.go,
		// task_complete.go, task_handoff.go, task_cancel.go.
		api.OpTaskCreate:   f.applyTaskCreate,
		api.OpTaskClaim:    onTask(f, api.OpTaskClaim, (*taskOp).claim),
		api.OpTaskProgress: onTask(f, api.OpTaskProgress, (*taskOp).progress),
		api.OpTaskComplete: onTask(f, api.OpTaskComplete, (*taskOp).complete),
		api.OpTaskHandoff:  onTask(f, api.OpTaskHandoff, (*taskOp).handoff),
		api.OpTaskCancel:   onTask(f, api.OpTaskCancel, (*taskOp).cancel),

		// Approvals: approval_request.go, approval_decide.go,
		// approval_cancel.go.
		api.OpApprovalRequest: f.applyApprovalRequest,
		api.OpApprovalDecide:  f.applyApprovalDecide,
		api.OpApprovalCancel:  f.applyApprovalCancel,

		// The tick: tick.go. "task_tick" is its name in logs written
		// before approvals (main shipped it): the same apply.
		api.OpTick: f.applyTick,
		opTaskTick: f.applyTick,
	}
}
