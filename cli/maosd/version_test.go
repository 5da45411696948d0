package maosd

import (
	"bytes"
	"regexp"
	"testing"
)

// versionLine is the format of `maosd --version`: the name, "version", the
// version, then the commit and the toolchain (cli/internal/version).
var versionLine = regexp.MustCompile(`^maosd version \S+ \(commit (?:[0-9a-f]{4,40}|unknown)(?:, modified)?, go\S+ \S+/\S+\)\n$`)

// maosd --version (and -v) prints one line and starts nothing.
func TestVersionFlag(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		app := App()
		var out, errs bytes.Buffer
		app.Writer, app.ErrWriter = &out, &errs
		if err := app.Run([]string{"maosd", flag}); err != nil {
			t.Fatalf("maosd %s: %v\n%s", flag, err, errs.String())
		}
		if !versionLine.MatchString(out.String()) {
			t.Errorf("maosd %s printed %q, want a line like %s", flag, out.String(), versionLine)
		}
		if errs.Len() != 0 {
			t.Errorf("maosd %s wrote to stderr: %q", flag, errs.String())
		}
	}
}
