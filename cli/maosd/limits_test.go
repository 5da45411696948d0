package maosd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// maosd refuses bad limit flags before touching the data dir, naming the
// flag and what it wants.
func TestRefusesBadLimitFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--send-rate", "-1"}, []string{"--send-rate -1", "≥ 0"}},
		{[]string{"--send-rate", "NaN"}, []string{"--send-rate NaN"}},
		{[]string{"--send-rate", "+Inf"}, []string{"--send-rate +Inf"}},
		{[]string{"--send-rate", "5", "--send-burst", "-2"}, []string{"--send-burst -2", "≥ 0"}},
		{[]string{"--send-burst", "5"}, []string{"--send-burst 5", "without a send rate"}},
		{[]string{"--max-recipients", "-1"}, []string{"--max-recipients -1", fmt.Sprintf("0..%d", api.MaxRecipients)}},
		{[]string{"--max-recipients", fmt.Sprint(api.MaxRecipients + 1)}, []string{"--max-recipients 257"}},
		{[]string{"--max-streams-per-agent", "-3"}, []string{"--max-streams-per-agent -3", "≥ 0"}},
		{[]string{"--max-artifact-bytes", "0"}, []string{"--max-artifact-bytes 0", "1..17179869184"}},
		{[]string{"--max-artifact-bytes", "-5"}, []string{"--max-artifact-bytes -5", "1..17179869184"}},
		{[]string{"--max-artifact-bytes", "17179869185"}, []string{"--max-artifact-bytes 17179869185"}},
	}
	for _, tt := range tests {
		err := startRefused(dir, tt.args...)
		checkSays(t, fmt.Sprintf("maosd %v", tt.args), err, tt.want...)
		checkStatus(t, fmt.Sprintf("maosd %v", tt.args), err, 2)
	}
	checkNoDataDir(t, dir)
}

// The ready line carries the effective limits: the defaults, and a rate
// from the environment with its derived burst.
func TestLogsLimits(t *testing.T) {
	ready, _ := runMaosdUntilReady(t, nil)
	want := map[string]float64{"send_rate": 0, "send_burst": 0, "max_recipients": api.MaxRecipients, "max_streams_per_agent": 16,
		"max_artifact_bytes": 64 << 20}
	for k, v := range want {
		if got, ok := ready[k].(float64); !ok || got != v {
			t.Errorf("defaults: ready line %s = %v, want %v", k, ready[k], v)
		}
	}

	ready, _ = runMaosdUntilReady(t, []string{"MAOS_SEND_RATE", "2.5"}, "--max-recipients", "10", "--max-streams-per-agent", "0")
	want = map[string]float64{"send_rate": 2.5, "send_burst": 5, "max_recipients": 10, "max_streams_per_agent": 0}
	for k, v := range want {
		if got, ok := ready[k].(float64); !ok || got != v {
			t.Errorf("--send-rate 2.5 from the env: ready line %s = %v, want %v", k, ready[k], v)
		}
	}
}

// --help tells multi-host operators to set a send rate.
func TestHelpMentionsSendRate(t *testing.T) {
	app := App()
	var out bytes.Buffer
	app.Writer = &out
	if err := app.Run([]string{"maosd", "--help"}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"--send-rate", "MAOS_SEND_RATE", "multi-host cluster with --auth should set it", "--max-streams-per-agent", "(default: 16)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("--help does not say %q:\n%s", w, out.String())
		}
	}
}
