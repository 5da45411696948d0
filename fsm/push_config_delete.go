package fsm

import (
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyPushConfigDelete deletes config ID of a task; only its creator
// does (a *ForbiddenError otherwise). A config not stored is a
// *NotFoundError. The result is the deleted config as reads show it.
func applyPushConfigDelete(tx *bbolt.Tx, _ uint64, _ int64, body []byte) (any, error) {
	var cmd api.PushConfigDeleteCommand
	if err := decodeCommand(api.OpPushConfigDelete, body, &cmd); err != nil {
		return nil, err
	}
	have, err := pushTask(tx, cmd.TaskID, cmd.From)
	if err != nil {
		return nil, wrapOp(api.OpPushConfigDelete, err)
	}
	for _, p := range have {
		if p.ID == cmd.ID {
			mustDelete(tx.Bucket(bucketPush), pushKey(p.TaskID, p.ID))
			v := p.View()
			return &v, nil
		}
	}
	return nil, wrapOp(api.OpPushConfigDelete, PushConfigNotFound(cmd.TaskID, cmd.ID))
}

// PushConfigNotFound is the *NotFoundError for config id of task.
func PushConfigNotFound(task, id string) error {
	return notFound("push config %s of task %s", id, task)
}
