package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// PushConfigs returns task's push configs for viewer v, without
// credentials: v must be the task's creator, a moderator or nil (no
// auth); for anyone else, as for a task not stored, a *NotFoundError
// (the task itself is read by any token, its configs are the creator's).
func (f *FSM) PushConfigs(task string, v *api.Viewer) (api.PushConfigPage, error) {
	page, err := f.pushConfigPage(task, v, false)
	return page, err
}

// PushConfigsWithCredentials returns task's push configs with their
// credentials: the deliverer's read (admin only, GET
// /v1/push/tasks/{id}). A task with none is an empty page; its Index is
// the applied index of the read, so a config set by a later entry is not
// in it.
func (f *FSM) PushConfigsWithCredentials(task string) (api.PushConfigPage, error) {
	return f.pushConfigPage(task, nil, true)
}

func (f *FSM) pushConfigPage(task string, v *api.Viewer, creds bool) (api.PushConfigPage, error) {
	var page api.PushConfigPage
	err := f.view(func(tx *bbolt.Tx) error {
		page.Index = getU64(tx.Bucket(bucketMeta), keyAppliedIndex)
		if !creds {
			t, err := taskByID(tx, task)
			if err != nil {
				return err
			}
			if v != nil && !v.Moderator && v.Agent != t.From {
				return PushConfigNotFound(task, "*")
			}
		}
		cs, err := pushConfigs(tx, task)
		if err != nil {
			return fmt.Errorf("fsm: %w", err)
		}
		for i := range cs {
			if !creds {
				cs[i] = cs[i].View()
			}
		}
		page.Configs = cs
		return nil
	})
	return page, err
}

// PushCursor returns the deliverer's cursor and the entry of the first
// push config ever set.
func (f *FSM) PushCursor() (api.PushCursor, error) {
	var c api.PushCursor
	err := f.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketPush)
		c = api.PushCursor{Index: getU64(b, keyPushCursor), Since: getU64(b, keyPushSince)}
		return nil
	})
	return c, err
}
