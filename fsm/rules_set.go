package fsm

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func (f *FSM) applySetRules(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.SetRulesCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: decode: %w", err)
	}
	r, data, err := cmd.Prepare()
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: %w", err)
	}
	rb := rulesBucketOf(tx)
	text := "removed: everyone may message everyone"
	if cmd.Clear {
		rb.remove()
	} else {
		f.rules.put(rb.put(data), r)
		text = "replaced: " + cmd.Rules.Summary()
	}
	rb.stamp(index, ts)
	audit(tx, index, ts, api.AuditEvent{Kind: AuditRules, Label: "RULES", Text: text})
	st, err := f.readRulesState(tx)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: %w", err)
	}
	return &st, nil
}
