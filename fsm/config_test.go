package fsm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// secret_guard is "refuse" until set, takes refuse, redact and off, and
// refuses anything else naming the setting and the values, at the proposer
// (Validate) and again at apply.
func TestSecretGuardSetting(t *testing.T) {
	b := newMbox(t)
	cfg, err := b.f.Config()
	if err != nil || cfg.SecretGuard != api.SecretGuardRefuse {
		t.Fatalf("default config = %+v, %v; want secret_guard refuse", cfg, err)
	}
	for _, v := range []api.SecretGuard{api.SecretGuardRedact, api.SecretGuardOff, api.SecretGuardRefuse} {
		raw, _ := json.Marshal(v)
		res := b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "secret_guard", Value: raw}).(*api.ClusterConfig)
		if res.SecretGuard != v {
			t.Errorf("set %s answered %+v", v, res)
		}
		if cfg, _ := b.f.Config(); cfg.SecretGuard != v {
			t.Errorf("after set %s, Config = %+v", v, cfg)
		}
	}
	for _, bad := range []string{`"REFUSE"`, `"warn"`, `true`, `""`, `null`, `"` + strings.Repeat("x", 100) + `"`} {
		cmd := api.SetConfigCommand{Key: "secret_guard", Value: json.RawMessage(bad)}
		err := cmd.Validate()
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "value" || !strings.Contains(err.Error(), `secret_guard: want "refuse", "redact" or "off"`) {
			t.Errorf("Validate(%s) = %v, want a value error naming the three values", bad, err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("Validate(%s): error of %d bytes quotes too much: %v", bad, len(err.Error()), err)
		}
		if _, err := b.apply(api.OpSetConfig, cmd).(error); !err {
			t.Errorf("apply of secret_guard=%s was not refused", bad)
		}
	}
	if cfg, _ := b.f.Config(); cfg.SecretGuard != api.SecretGuardRefuse {
		t.Errorf("refused values changed the setting: %+v", cfg)
	}
	if !strings.Contains(strings.Join(api.ConfigKeys(), ","), "secret_guard") {
		t.Errorf("ConfigKeys() = %v, want secret_guard among them", api.ConfigKeys())
	}
}

func TestEscalationTargetSetting(t *testing.T) {
	b := newMbox(t)
	for _, v := range []string{`"role:supervisor"`, `"ops-lead"`, `""`} {
		cfg, ok := b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(v)}).(*api.ClusterConfig)
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
		err := mustError(t, b.apply(api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(tc.v)}))
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "value" || !strings.Contains(fe.Reason, "escalation_target: "+tc.reason) {
			t.Errorf("escalation_target %s: %v, want a field error with %q", tc.v, err, tc.reason)
		}
	}
	if !slices.Contains(api.ConfigKeys(), "escalation_target") {
		t.Errorf("ConfigKeys = %q, want escalation_target", api.ConfigKeys())
	}
}
