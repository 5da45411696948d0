// Package testenv says what a test needs of the machine it runs on, and
// is the one place the two tiers of the suite differ: `go test -short`
// (make test-short, a developer's laptop: no root, tmux or Chromium
// needed) skips a test that needs what is missing, or that is slow and
// covered by the full run, saying why; the full run (make test, what CI
// runs) fails such a test instead of skipping it, so CI cannot pass
// without the tools .ci/run installs.
package testenv

import (
	"os/exec"
	"testing"
)

// FullRun is how every skip message ends: where the skipped test runs.
const FullRun = "the full run (make test) has it"

// Tool returns the path of the program name on PATH. Without it, the
// short tier skips t and the full run fails it; why says what the test
// does with it and how to install it.
func Tool(t testing.TB, name, why string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if testing.Short() {
		t.Skipf("needs %s (%s), not on PATH: %s", name, why, FullRun)
	}
	t.Fatalf("needs %s (%s; .ci/run installs it): %v", name, why, err)
	return ""
}

// Slow skips t in the short tier; why says what makes it slow (the full
// run has it).
func Slow(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("slow (%s): %s", why, FullRun)
	}
}
