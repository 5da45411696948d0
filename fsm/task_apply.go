package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// What every task and approval command's apply shares: the entry it runs
// in, the checks of a claimant, the plan of the changes one entry makes
// (the command's own task or approval, the task an approval decides, the
// dependents that end or become ready with them, the messages queued, the
// audit lines), and the commit of that plan. An apply checks and plans
// first, with no write; sends its own message, if any, through send
// (which refuses or stores it); then commits the plan, which cannot fail.

// taskOp is one task or approval command (or a tick) being applied.
type taskOp struct {
	f     *FSM
	tx    *bbolt.Tx
	op    api.Op
	index uint64
	ts    int64
	// plan is what the entry changes, in order; bySeq finds a planned
	// task, so a later step of the plan sees the earlier ones.
	plan  []taskChange
	bySeq map[uint64]int
	// approvals are the approvals the entry changes, in order; queued the
	// messages it queues about them (after its tasks' own); lines the
	// audit lines it writes about them.
	approvals []approvalChange
	queued    []api.Message
	lines     []api.AuditEvent
	// knownNames is the command's known_names flag: its message then
	// records its sender (known.go).
	knownNames bool
}

// taskChange is one task's transition in an entry, and the message
// SystemSender sends about it (queued), if any.
type taskChange struct {
	before taskKeys
	t      *api.Task
	ev     api.TaskEvent
	queued []api.Message
}

func (f *FSM) taskOp(tx *bbolt.Tx, op api.Op, index uint64, ts int64) *taskOp {
	return &taskOp{f: f, tx: tx, op: op, index: index, ts: ts}
}

// now is the entry's time.
func (a *taskOp) now() time.Time { return time.Unix(0, a.ts).UTC() }

// at is the entry's time plus d, as a stored time.
func (a *taskOp) at(d time.Duration) *time.Time {
	t := time.Unix(0, addTTL(a.ts, d)).UTC()
	return &t
}

// errorf wraps err with the op, for the log; the API answers with the
// inner error's words.
func (a *taskOp) errorf(err error) error { return fmt.Errorf("fsm: apply %s: %w", a.op, err) }

// event is the history event of a transition by actor in this entry.
func (a *taskOp) event(actor, event, detail string) api.TaskEvent {
	return api.TaskEvent{Seq: a.index, Time: a.now(), Actor: actor, Event: event, Detail: detail}
}

// load reads task seq as the plan leaves it so far.
func (a *taskOp) load(seq uint64) (*api.Task, error) {
	if i, ok := a.bySeq[seq]; ok {
		return a.plan[i].t, nil
	}
	return getTask(a.tx, seq)
}

// loadID reads task id as the plan leaves it so far, or a *NotFoundError.
func (a *taskOp) loadID(id string) (*api.Task, error) {
	rec, ok := getTaskID(a.tx, id)
	if !ok {
		return nil, TaskNotFound(id)
	}
	return a.load(rec.seq)
}

// change plans t's transition: before is its keys before the entry
// changed it (keysOf, taken before the change).
func (a *taskOp) change(before taskKeys, t *api.Task, ev api.TaskEvent, queued ...api.Message) {
	if _, dup := a.bySeq[t.Seq]; dup {
		panic(fmt.Sprintf("fsm: apply %s: task %s changes twice in one entry", a.op, t.ID))
	}
	if a.bySeq == nil {
		a.bySeq = map[uint64]int{}
	}
	a.bySeq[t.Seq] = len(a.plan)
	a.plan = append(a.plan, taskChange{before: before, t: t, ev: ev, queued: queued})
}

// commit writes the plan in order, queues its messages and writes its
// audit lines.
func (a *taskOp) commit() {
	var n uint32
	for _, c := range a.plan {
		putTask(a.tx, c.before, c.t, c.ev)
		for i := range c.queued {
			queue(a.tx, a.index, n, a.ts, &c.queued[i])
			n++
		}
	}
	for _, c := range a.approvals {
		if c.isNew {
			addApprovalID(a.tx, c.ap, c.sum)
		}
		putApproval(a.tx, c.before, c.ap, c.ev)
	}
	for i := range a.queued {
		queue(a.tx, a.index, n, a.ts, &a.queued[i])
		n++
	}
	for _, l := range a.lines {
		audit(a.tx, a.index, a.ts, l)
	}
}

// send stores m, a message of this task command, through the one send
// path (addressing, rules, inboxes, receipts, audit). A refusal (the
// rules, strict_senders) refuses the command.
func (a *taskOp) send(m *api.Message) error {
	if _, err := a.f.send(a.tx, a.index, a.ts, &api.SendCommand{Message: *m, KnownNames: a.knownNames}, true); err != nil {
		return fmt.Errorf("its %s message: %w", m.Type, err)
	}
	return nil
}

// result is the command's answer for t after the entry.
func (a *taskOp) result(t *api.Task) *api.TaskResult {
	return &api.TaskResult{ID: t.ID, Seq: a.index, State: t.State, Attempt: t.Attempt, Fence: t.Fence, LeaseExpires: t.LeaseExpires}
}

// taskCommand is the body of a command on one stored task.
type taskCommand interface {
	validator
	TaskID() string
}

// onTask makes the apply function of op, a command C on one stored task.
// Its first step is every such command's: a taskOp for the entry, the
// body decoded and checked into a C (decodeCommand), the task it names
// read (a *NotFoundError); then do checks the rest, plans, sends and
// commits. Errors are wrapped with the op.
func onTask[C any, P interface {
	*C
	taskCommand
}](f *FSM, op api.Op, do func(a *taskOp, cmd P, t *api.Task) (any, error)) applyFunc {
	return func(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
		a := f.taskOp(tx, op, index, ts)
		var cmd C
		if err := decodeCommand(op, body, P(&cmd)); err != nil {
			return nil, err
		}
		// A report under an agent lease's fence (agent_lease.go) is
		// refused first when the watcher lost the lease.
		if fc, ok := any(P(&cmd)).(agentFenced); ok {
			agent, fence := fc.FencedBy()
			if err := checkAgentFence(tx, agent, fence); err != nil {
				return nil, a.errorf(err)
			}
		}
		t, err := taskByID(tx, P(&cmd).TaskID())
		if err != nil {
			return nil, a.errorf(err)
		}
		return do(a, &cmd, t)
	}
}

// retried answers a retry of the command that ended t as that command
// answered: t's state after its last transition, at that entry.
func (a *taskOp) retried(t *api.Task) (any, error) {
	last, err := lastEvent(a.tx, t.Seq)
	if err != nil {
		return nil, a.errorf(err)
	}
	return &api.TaskResult{ID: t.ID, Seq: last.Seq, State: t.State, Attempt: t.Attempt, Fence: t.Fence}, nil
}

// checkClaimant refuses a report from anyone but the current claimant of
// t under its current fence, with its lease live at the entry's time: a
// *ConflictError saying what the state is and what to do. A lease that
// lapsed is refused before any tick expired it.
func (a *taskOp) checkClaimant(t *api.Task, agent string, fence uint64) error {
	switch {
	case t.State.Final():
		return conflict("task %s has ended (%s%s): nothing to report", t.ID, t.State, endedHow(t))
	case t.State == api.TaskAwaitingApproval:
		return conflict("task %s awaits approval %s of its completion: nothing to report until it is decided", t.ID, t.ApprovalID)
	case t.State != api.TaskRunning:
		return conflict("task %s is %s, not running: claim it first", t.ID, t.State)
	case t.ClaimedBy != agent:
		return conflict("task %s is claimed by %s (fence %d), not %s: your claim was lost; stop working on it", t.ID, t.ClaimedBy, t.Fence, agent)
	case t.Fence != fence:
		return conflict("task %s: fence %d is not the current claim's (%d): your claim was lost; stop working on it", t.ID, fence, t.Fence)
	case !a.now().Before(*t.LeaseExpires):
		return conflict("task %s: your lease (fence %d) ended at %s, before this report at %s: the task goes back to its queue; claim it again when it is ready",
			t.ID, fence, stamp(*t.LeaseExpires), stamp(a.now()))
	}
	return nil
}

// endedHow words how a final task ended, after its state: ", success",
// ", timeout" (the error type when there is one); "" for a cancelled task.
func endedHow(t *api.Task) string {
	c := t.Completion
	switch {
	case c == nil:
		return ""
	case c.Error != nil && c.Error.ErrorType != "":
		return ", " + c.Error.ErrorType
	default:
		return ", " + c.Status
	}
}

// stamp is a time as messages show it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// cascade plans what t's end (t already planned) does to the tasks that
// depend on it, recursively: a succeeded t makes each waiting dependent
// whose dependencies are now all met ready; a failed or cancelled t fails
// each waiting dependent with dependency_failed naming it (and then
// theirs), each with its completion reply to its creator from
// SystemSender. Dependents are visited breadth first in creation order.
func (a *taskOp) cascade(t *api.Task) error {
	ended := []*api.Task{t}
	for len(ended) > 0 {
		cur := ended[0]
		ended = ended[1:]
		for _, seq := range dependents(a.tx, cur.Seq) {
			d, err := a.load(seq)
			if err != nil {
				return err
			}
			if d.State != api.TaskWaiting {
				continue
			}
			before := keysOf(d)
			switch {
			case api.DependencyBroken(cur):
				d.State = api.TaskFailed
				d.Completion = api.DependencyFailed(cur)
				a.change(before, d, a.event(api.SystemSender, "failed", api.TaskErrorDependencyFailed+": "+d.Completion.Error.ErrorMessage),
					completionReply(d, api.SystemSender, a.ts))
				ended = append(ended, d)
			case api.DependencyMet(cur):
				met, err := a.allMet(d)
				if err != nil {
					return err
				}
				if met {
					d.State = api.TaskReady
					a.change(before, d, a.event(api.SystemSender, "ready", "its dependencies succeeded: "+strings.Join(d.DependsOn, ", ")))
				}
			}
		}
	}
	return nil
}

// allMet reports whether every dependency of d is met, as the plan leaves
// them.
func (a *taskOp) allMet(d *api.Task) (bool, error) {
	for _, id := range d.DependsOn {
		dep, err := a.loadID(id)
		if err != nil {
			return false, err
		}
		if !api.DependencyMet(dep) {
			return false, nil
		}
	}
	return true, nil
}

// InQueue reports whether agent is of the task queue to: the agent to
// names, or, for role:NAME or capability:NAME, an agent registered (a,
// nil when it is not) with that role or capability. A claim is held to it
// (mayClaim), and the stream's ?agent= filter carries the tasks of the
// agent's queues by it.
func InQueue(agent string, a *api.Agent, to string) bool {
	if role, ok := strings.CutPrefix(to, api.RolePrefix); ok {
		return a != nil && a.Role == role
	}
	if capability, ok := strings.CutPrefix(to, api.CapabilityPrefix); ok {
		return a != nil && slices.Contains(a.Capabilities, capability)
	}
	return agent == to
}

// mayClaim refuses (a *ForbiddenError) an agent that is not of t's queue
// (InQueue), saying why.
func mayClaim(tx *bbolt.Tx, t *api.Task, agent string) error {
	isRole := strings.HasPrefix(t.To, api.RolePrefix)
	isCap := strings.HasPrefix(t.To, api.CapabilityPrefix)
	if !isRole && !isCap {
		if !InQueue(agent, nil, t.To) {
			return &api.ForbiddenError{Reason: fmt.Sprintf("task %s is for %s, not %s", t.ID, t.To, agent)}
		}
		return nil
	}
	a, err := loadAgent(tx, agent)
	if err != nil {
		return err
	}
	switch {
	case InQueue(agent, a, t.To):
		return nil
	case a == nil:
		what := "capability"
		if isRole {
			what = "role"
		}
		return &api.ForbiddenError{Reason: fmt.Sprintf("task %s is for %s and %s is not a registered agent: register it with that %s first",
			t.ID, t.To, agent, what)}
	case isRole:
		return &api.ForbiddenError{Reason: fmt.Sprintf("task %s is for %s and %s has role %s", t.ID, t.To, agent, a.Role)}
	}
	has := "none"
	if len(a.Capabilities) > 0 {
		has = strings.Join(a.Capabilities, ", ")
	}
	return &api.ForbiddenError{Reason: fmt.Sprintf("task %s is for %s and %s has not that capability (registered with: %s)", t.ID, t.To, agent, has)}
}
