package fsm

import (
	"encoding/json"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func (f *FSM) readRulesState(tx *bbolt.Tx) (api.RulesState, error) {
	r, err := f.rules.load(tx)
	if err != nil {
		return api.RulesState{}, err
	}
	st := api.RulesState{Rules: r.Document(), Default: r.Document().EffectiveDefault()}
	st.Index, st.UpdatedAt = rulesBucketOf(tx).changed()
	return st, nil
}

// Rules returns the rules document and when it was last set.
func (f *FSM) Rules() (api.RulesState, error) {
	var st api.RulesState
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		st, err = f.readRulesState(tx)
		return err
	})
	return st, err
}

// CheckRules answers whether a message from from to to would pass the
// rules now, with the roles a send would use: the registered role of each;
// for an unregistered sender DefaultRole (a send registers it so), for
// an unregistered recipient none. fromRole or toRole, when not "", replace
// the looked-up role ("what if" questions).
func (f *FSM) CheckRules(from, fromRole, to, toRole string) (api.RulesCheck, error) {
	out := api.RulesCheck{From: from, To: to}
	err := f.view(func(tx *bbolt.Tx) error {
		r, err := f.rules.load(tx)
		if err != nil {
			return err
		}
		out.FromRole, out.ToRole = fromRole, toRole
		if out.FromRole == "" {
			var ok bool
			if out.FromRole, ok = rulesAgentRole(tx, from); !ok {
				out.FromRole = api.DefaultRole
			}
		}
		if out.ToRole == "" {
			out.ToRole, _ = rulesAgentRole(tx, to)
		}
		out.Allowed, out.Reason = r.Allows(out.From, out.FromRole, out.To, out.ToRole)
		return nil
	})
	return out, err
}

// rulesAgentRole is the role of a registered agent, read from the agent
// registry (bucketAgents: id → the agent's JSON with a "role" field).
func rulesAgentRole(tx *bbolt.Tx, id string) (string, bool) {
	v := tx.Bucket(bucketAgents).Get([]byte(id))
	if v == nil {
		return "", false
	}
	var a struct {
		Role string `json:"role"`
	}
	if json.Unmarshal(v, &a) != nil {
		return "", true
	}
	return a.Role, true
}

// CheckInterrupt answers whether from may interrupt an agent now, as an
// interrupt's apply would decide for a caller that is not a moderator:
// with from's registered role (none when it is not registered), or
// fromRole when not "" ("what if"). The answer's To and ToRole are empty
// and Interrupt is true.
func (f *FSM) CheckInterrupt(from, fromRole string) (api.RulesCheck, error) {
	out := api.RulesCheck{From: from, FromRole: fromRole, Interrupt: true}
	err := f.view(func(tx *bbolt.Tx) error {
		r, err := f.rules.load(tx)
		if err != nil {
			return err
		}
		if out.FromRole == "" {
			out.FromRole, _ = rulesAgentRole(tx, from)
		}
		out.Allowed, out.Reason = r.MayInterrupt(out.From, out.FromRole)
		return nil
	})
	return out, err
}
