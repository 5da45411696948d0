package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func applySetBulletin(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.BulletinCommand
	if err := decodeCommand(api.OpSetBulletin, body, &cmd); err != nil {
		return nil, err
	}
	cur, version, err := loadBulletin(tx)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	if cmd.IfVersion != nil && *cmd.IfVersion != version {
		view, err := bulletinView(tx, ts)
		if err != nil {
			return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
		}
		return &api.BulletinResult{Bulletin: view, Conflict: true}, nil
	}
	in, _ := api.DecodeBulletin(cmd.Doc) // Validate parsed it
	api.DropLockEntries(in)
	old, _ := api.DecodeBulletin(mustJSON(cur)) // a copy: the merge below edits in place
	next := in
	if cmd.Merge {
		next = mergePatch(cur, in).(map[string]any)
		if err := api.CheckBulletinKeys(next, false); err != nil {
			return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
		}
	}
	data, err := api.EncodeBulletin(next)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	changed := changedKeys(old, next)

	putBulletin(tx, data, index, ts, cmd.By)
	mode := "replaced"
	if cmd.Merge {
		mode = "merged"
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditOther, From: cmd.By, Label: "BULLETIN",
		Text: fmt.Sprintf("%s, version %d: %s", mode, index, describeChanges(changed, next))})
	view, err := bulletinView(tx, ts)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_bulletin: %w", err)
	}
	return &api.BulletinResult{Bulletin: view, Changed: changed}, nil
}
