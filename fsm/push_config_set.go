package fsm

import (
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// applyPushConfigSet adds or replaces a push config of a task. Only the
// task's creator sets one (a *ForbiddenError otherwise; an admin token
// acts as the creator, transport's admit); a task holds at most
// api.MaxPushConfigsPerTask (a *FieldError on config.id). The result is
// the config as reads show it (no credentials), its Index the entry's.
func applyPushConfigSet(tx *bbolt.Tx, index uint64, _ int64, body []byte) (any, error) {
	var cmd api.PushConfigSetCommand
	if err := decodeCommand(api.OpPushConfigSet, body, &cmd); err != nil {
		return nil, err
	}
	p := cmd.Config
	have, err := pushTask(tx, p.TaskID, cmd.From)
	if err != nil {
		return nil, wrapOp(api.OpPushConfigSet, err)
	}
	replaces := slices.ContainsFunc(have, func(c api.PushConfig) bool { return c.ID == p.ID })
	if !replaces && len(have) >= api.MaxPushConfigsPerTask {
		return nil, wrapOp(api.OpPushConfigSet, api.FieldErrorf("config.id",
			"task %s has %d push configs, at most %d: delete one first", p.TaskID, len(have), api.MaxPushConfigsPerTask))
	}
	p.Index = index
	putPushConfig(tx, &p)
	v := p.View()
	return &v, nil
}

// pushTask checks that task exists and from created it, and reads its
// configs.
func pushTask(tx *bbolt.Tx, task, from string) ([]api.PushConfig, error) {
	t, err := taskByID(tx, task)
	if err != nil {
		return nil, err
	}
	if t.From != from {
		return nil, &api.ForbiddenError{Reason: fmt.Sprintf("task %s was created by %s: only its creator sets or deletes its push configs, not %s", t.ID, t.From, from)}
	}
	return pushConfigs(tx, task)
}

// pushConfigVersion is the state version every push op needs.
const pushConfigVersion = 3
