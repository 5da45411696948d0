package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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
		{"no -timeout", "deadline", []string{"-test.timeout=0"}, false, "--- PASS: TestTiers/deadline"},
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
	t.Run("deadline", func(t *testing.T) {
		if _, ok := t.Deadline(); ok {
			t.Fatal("a deadline with -timeout 0")
		}
		if left := time.Until(Deadline(t)); left < NoDeadline-time.Minute || left > NoDeadline {
			t.Errorf("Deadline %v away with no -timeout, want %v", left, NoDeadline)
		}
	})
	t.Run("found", func(t *testing.T) {
		if Tool(t, "sh", "a shell") == "" {
			t.Error("sh not found")
		}
	})
}

// Deadline is before the binary's deadline, and Context ends there; with
// no deadline (-timeout 0) it is NoDeadline away (the child's "deadline").
func TestDeadline(t *testing.T) {
	d, ok := t.Deadline()
	if !ok {
		t.Fatal("no test deadline: run with -timeout (go test's default is 10m)")
	}
	got := Deadline(t)
	if !got.Before(d) || !got.After(time.Now()) {
		t.Errorf("Deadline %v, want between now and the binary's %v", got, d)
	}
	ctx, cancel := Context(t)
	defer cancel()
	if cd, ok := ctx.Deadline(); !ok || !cd.Equal(got) && cd.Before(got) {
		t.Errorf("Context's deadline %v (%t), want %v", cd, ok, got)
	}
}
