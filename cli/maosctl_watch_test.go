package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMaosctlWatchRefusesBadInput(t *testing.T) {
	e := newCtlEnv(t)
	e.fail([]string{"watch"}, "--config")
	e.fail([]string{"watch", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml")
	bad := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(bad, []byte("agents:\n  - id: w1\n    command: [x]\n    policy: {mode: sometimes}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fail([]string{"watch", "--config", bad}, "agents[0].policy.mode", "queue, interrupt or fork")
	e.fail([]string{"watch", "--config", bad, "extra"}, "unexpected argument")
}
