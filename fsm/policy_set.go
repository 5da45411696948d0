package fsm

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func applySetPolicy(tx *bbolt.Tx, _ uint64, ts int64, body []byte) (any, error) {
	var cmd api.SetPolicyCommand
	if err := decodeCommand(api.OpSetPolicy, body, &cmd); err != nil {
		return nil, err
	}
	stored, err := getPolicies(tx, cmd.Agent)
	if err != nil {
		return nil, err
	}
	now := time.Unix(0, ts)
	// Check first, then write: the override bound counts the overrides
	// still in force, other than the one this command replaces.
	exists, overrides := false, 0
	for _, p := range stored {
		if p.From == cmd.From {
			exists = p.InForce(now)
		} else if p.From != "" && p.InForce(now) {
			overrides++
		}
	}
	if cmd.Mode != "" && cmd.From != "" && overrides >= api.MaxPolicyOverrides {
		return nil, fmt.Errorf("fsm: apply %s: %w", api.OpSetPolicy, api.FieldErrorf("from",
			"agent %s has %d per-sender overrides, the most allowed (%d): clear one first", cmd.Agent, overrides, api.MaxPolicyOverrides))
	}
	for _, p := range stored {
		if !p.InForce(now) || p.From == cmd.From {
			deletePolicy(tx, cmd.Agent, p.From)
		}
	}
	if cmd.Mode == "" {
		return &api.Policy{Agent: cmd.Agent, From: cmd.From, SetBy: cmd.SetBy, SetAt: now.UTC(), Cleared: exists}, nil
	}
	rec := policyRec{Mode: cmd.Mode, By: cmd.SetBy, At: ts}
	if cmd.ForSeconds > 0 {
		rec.Until = ts + cmd.ForSeconds*int64(time.Second)
	}
	putPolicy(tx, cmd.Agent, cmd.From, rec)
	p := rec.policy(cmd.Agent, cmd.From)
	return &p, nil
}
