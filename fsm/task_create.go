package fsm

import (
	"errors"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyTaskCreate creates a task and posts its task_delegation message.
// In order, before anything is written:
//
//   - an id stored before answers the original result (the same command)
//     or is a *ConflictError (another task);
//   - with known_names (set by the node that accepted it), a "to" no one
//     answers to (an agent neither registered nor a sender, a role or
//     capability no agent has) is a *NotFoundError, unless
//     unknown_recipients is accept (checkKnown);
//   - each dependency must exist (a *NotFoundError naming it), so the
//     graph is acyclic by construction;
//   - the state: failed at once (dependency_failed, naming it) when a
//     dependency failed or was cancelled, waiting while one has not
//     succeeded, ready otherwise;
//   - the delegation goes through send: the creator's registration,
//     strict_senders and the rules decide as for any message, and a
//     refusal refuses the create. A queue no agent serves yet (an
//     entry without known_names, or under unknown_recipients accept) is
//     fine: the message then reaches the channel alone.
//
// A task failed at birth also queues its completion reply to its creator.
func (f *FSM) applyTaskCreate(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	a := f.taskOp(tx, api.OpTaskCreate, index, ts)
	var cmd api.TaskCreateCommand
	if err := decodeCommand(a.op, body, &cmd); err != nil {
		return nil, err
	}
	sum := createSum(&cmd)
	if rec, ok := getTaskID(tx, cmd.ID); ok {
		if rec.sum != sum {
			return nil, a.errorf(conflict("task id %s is taken by another task (created at seq %d): create yours with a new id", cmd.ID, rec.seq))
		}
		first, err := firstEvent(tx, rec.seq)
		if err != nil {
			return nil, a.errorf(err)
		}
		return &api.TaskResult{ID: cmd.ID, Seq: rec.seq, State: first.State}, nil
	}

	if cmd.KnownNames {
		a.knownNames = true
		if err := checkKnown(tx, "to", cmd.From, []string{cmd.To}); err != nil {
			return nil, a.errorf(err)
		}
	}
	var waiting []string
	var broken *api.Task
	for i, id := range cmd.DependsOn {
		d, err := taskByID(tx, id)
		if errors.Is(err, api.ErrNotFound) {
			return nil, a.errorf(notFound("task %s (depends_on[%d])", id, i))
		}
		if err != nil {
			return nil, a.errorf(err)
		}
		switch {
		case api.DependencyBroken(d):
			if broken == nil {
				broken = d
			}
		case !api.DependencyMet(d):
			waiting = append(waiting, id)
		}
	}
	t := &api.Task{
		ID: cmd.ID, Seq: index, From: cmd.From, To: cmd.To, Title: cmd.Title, Description: cmd.Description,
		Priority: cmd.Priority, Context: cmd.Context, DependsOn: cmd.DependsOn, TimeoutSeconds: cmd.TimeoutSeconds,
		MaxAttempts: cmd.MaxAttempts, RequiresHITL: cmd.RequiresHITL, Channel: cmd.Channel,
		State: api.TaskReady, Created: a.now(),
	}
	detail := "for " + t.To
	switch {
	case broken != nil:
		t.State = api.TaskFailed
		t.Completion = api.DependencyFailed(broken)
		detail += "; " + api.TaskErrorDependencyFailed + ": " + t.Completion.Error.ErrorMessage
	case len(waiting) > 0:
		t.State = api.TaskWaiting
		detail += "; waits for " + strings.Join(waiting, ", ")
	}
	m := delegation(t)
	t.MessageID = m.ID
	if err := a.send(&m); err != nil {
		return nil, a.errorf(err)
	}
	var queued []api.Message
	if broken != nil {
		queued = append(queued, completionReply(t, api.SystemSender, ts))
	}
	a.change(taskKeys{}, t, a.event(t.From, "created", detail), queued...)
	addTaskID(tx, t, sum)
	a.commit()
	return a.result(t), nil
}
