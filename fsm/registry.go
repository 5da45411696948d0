package fsm

import "go.etcd.io/bbolt"

// applyFunc applies one decoded command inside the batch's write
// transaction. index is the entry's Raft index and ts its stamped time made
// monotonic. It must check everything before it writes anything, so a failed
// command leaves no trace in the shared transaction, and it returns either a
// result or an error value (never panics on bad input).
type applyFunc func(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error)

// registry maps each op to its apply function. Open builds it once per
// FSM: the ops that read the rules are methods, for the FSM's
// compiled-rules cache.
func (f *FSM) registry() map[Op]applyFunc {
	return map[Op]applyFunc{
		OpSend:         f.applySend,
		OpRegisterNode: applyRegisterNode,
		OpSetConfig:    applySetConfig,
		OpNodeEvent:    applyNodeEvent,
		OpClusterID:    applyClusterID, // cluster_id.go
		OpSetRules:     f.applySetRules,

		// Mailbox: agents.go, inbox.go.
		OpRegisterAgent:   applyRegisterAgent,
		OpUnregisterAgent: applyUnregisterAgent,
		OpMarkRead:        applyMarkRead,
		OpReceiptState:    applyReceiptState, // receipt_state.go

		// Coordination: bulletin.go, locks.go.
		OpSetBulletin:        applySetBulletin,
		OpLockAcquire:        applyLockAcquire,
		OpLockRenew:          applyLockRenew,
		OpLockRelease:        applyLockRelease,
		OpReleaseHolderLocks: applyReleaseHolderLocks,

		// Retention: retention.go.
		OpSetRetention: applySetRetention,
		OpTrim:         applyTrim,

		// Watchers: cursor.go.
		OpSetCursor: applySetCursor,
		OpSetPolicy: applySetPolicy, // policy.go

		// Agent failover: agent_lease.go and one file per op.
		OpAgentLeaseAcquire: applyAgentLeaseAcquire,
		OpAgentLeaseRenew:   applyAgentLeaseRenew,
		OpAgentLeaseRelease: applyAgentLeaseRelease,

		// Artifacts' metadata: artifact_put.go, artifact_delete.go.
		OpArtifactPut:    applyArtifactPut,
		OpArtifactDelete: applyArtifactDelete,

		// Authentication: token_create.go, token_revoke.go, denial.go.
		OpCreateToken: applyCreateToken,
		OpRevokeToken: applyRevokeToken,
		OpAuditDenial: applyAuditDenial,

		// Tasks: task_create.go, task_claim.go, … task_tick.go.
		OpTaskCreate:   f.applyTaskCreate,
		OpTaskClaim:    onTask(f, OpTaskClaim, (*taskOp).claim),
		OpTaskProgress: onTask(f, OpTaskProgress, (*taskOp).progress),
		OpTaskComplete: onTask(f, OpTaskComplete, (*taskOp).complete),
		OpTaskHandoff:  onTask(f, OpTaskHandoff, (*taskOp).handoff),
		OpTaskCancel:   onTask(f, OpTaskCancel, (*taskOp).cancel),

		// Approvals: approval_request.go, approval_decide.go,
		// approval_cancel.go.
		OpApprovalRequest: f.applyApprovalRequest,
		OpApprovalDecide:  f.applyApprovalDecide,
		OpApprovalCancel:  f.applyApprovalCancel,

		// The tick: tick.go. "task_tick" is its name in logs written
		// before approvals (main shipped it): the same apply.
		OpTick:     f.applyTick,
		opTaskTick: f.applyTick,
	}
}
