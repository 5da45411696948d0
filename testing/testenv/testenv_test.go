package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The helpers' verdicts are checked in a child test binary, where -short
// and PATH are chosen: a skip or a failure of the child is its output.
func TestTiers(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") != "" {
		child(t)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sub   string
		args  []string
		fails bool
		want  string
	}{
		{"short, no tool", "tool", []string{"-test.short"}, false, "--- SKIP: TestTiers/tool"},
		{"full, no tool", "tool", nil, true, "--- FAIL: TestTiers/tool"},
		{"short, slow", "slow", []string{"-test.short"}, false, "--- SKIP: TestTiers/slow"},
		{"full, slow", "slow", nil, false, "--- PASS: TestTiers/slow"},
		{"full, tool found", "found", nil, false, "--- PASS: TestTiers/found"},
	} {
		cmd := exec.Command(exe, append([]string{"-test.run", "^TestTiers$/^" + tc.sub + "$", "-test.v"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1")
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: err %v, want failure %t and %q in:\n%s", tc.name, err, tc.fails, tc.want, out)
		}
		if strings.Contains(tc.want, "SKIP") && !strings.Contains(string(out), FullRun) {
			t.Errorf("%s: the skip does not say where the test runs:\n%s", tc.name, out)
		}
	}
}

// child is TestTiers in the child process: one subtest per verdict.
func child(t *testing.T) {
	t.Run("tool", func(t *testing.T) { Tool(t, "maos-no-such-tool", "nothing") })
	t.Run("slow", func(t *testing.T) { Slow(t, "a test") })
	t.Run("found", func(t *testing.T) {
		if Tool(t, "sh", "a shell") == "" {
			t.Error("sh not found")
		}
	})
}
