package fsm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestEscalationTargetSetting(t *testing.T) {
	b := newMbox(t)
	for _, v := range []string{`"role:supervisor"`, `"ops-lead"`, `""`} {
		cfg, ok := b.ok(OpSetConfig, SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(v)}).(*ClusterConfig)
		var want string
		_ = json.Unmarshal([]byte(v), &want)
		if !ok || cfg.EscalationTarget != want {
			t.Errorf("set escalation_target %s: %+v", v, cfg)
		}
	}
	for _, tc := range []struct{ v, reason string }{
		{`"capability:go"`, `"capability:go": want an agent id or role:NAME`},
		{`"role:Sup"`, `"role:Sup": want an agent id or role:NAME; must match`},
		{`"maos"`, `"maos" is maos itself`},
		{`"all"`, `"all" would page every agent`},
		{`7`, "want a string"},
	} {
		err := mustError(t, b.apply(OpSetConfig, SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(tc.v)}))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "value" || !strings.Contains(fe.Reason, "escalation_target: "+tc.reason) {
			t.Errorf("escalation_target %s: %v, want a field error with %q", tc.v, err, tc.reason)
		}
	}
	if !slices.Contains(ConfigKeys(), "escalation_target") {
		t.Errorf("ConfigKeys = %q, want escalation_target", ConfigKeys())
	}
}
