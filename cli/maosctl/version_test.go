package maosctl

import (
	"bytes"
	"regexp"
	"testing"
)

// versionLine is the format of `maosctl --version`: the name, "version",
// the version, then the commit and the toolchain (cli/internal/version).
var versionLine = regexp.MustCompile(`^maosctl version \S+ \(commit (?:[0-9a-f]{4,40}|unknown)(?:, modified)?, go\S+ \S+/\S+\)\n$`)

// versionOutput is what maosctl --version prints.
func versionOutput(t *testing.T) string {
	t.Helper()
	app := App()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	if err := app.Run([]string{"maosctl", "--version"}); err != nil {
		t.Fatalf("maosctl --version: %v", err)
	}
	return out.String()
}

// maosctl --version prints one line without calling a node, even with an
// --addr that no node answers and a token file that does not exist.
func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"--addr", "127.0.0.1:1", "--token-file", "/nonexistent", "--version"}} {
		app := App()
		var out, errs bytes.Buffer
		app.Writer, app.ErrWriter = &out, &errs
		if err := app.Run(append([]string{"maosctl"}, args...)); err != nil {
			t.Fatalf("maosctl %v: %v\n%s", args, err, errs.String())
		}
		if !versionLine.MatchString(out.String()) {
			t.Errorf("maosctl %v printed %q, want a line like %s", args, out.String(), versionLine)
		}
	}
}
