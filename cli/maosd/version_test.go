package maosd

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/internal/version"
	"github.com/maos-project/maos/cli/maosctl"
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

// One version everywhere: what maosd --version and maosctl --version
// print is what the node reports in its status and its gossip metadata
// (maosctl members), set here as make build sets it.
func TestVersionIsTheSameEverywhere(t *testing.T) {
	old := version.Version
	version.Version = "v9.8.7-test"
	t.Cleanup(func() { version.Version = old })
	clearMaosctlEnv(t)
	for _, prog := range []string{"maosd", "maosctl"} {
		var out bytes.Buffer
		app := App()
		if prog == "maosctl" {
			app = maosctl.App()
		}
		app.Writer, app.ErrWriter = &out, &out
		if err := app.Run([]string{prog, "--version"}); err != nil || !strings.HasPrefix(out.String(), prog+" version v9.8.7-test (") {
			t.Fatalf("%s --version = %q, %v; want version v9.8.7-test", prog, out.String(), err)
		}
	}
	ready, _ := runMaosdUntilReady(t, nil, "--gossip-addr", "127.0.0.1:0")
	addr, _ := ready["api_addr"].(string)
	var st api.Status
	if r := runMaosctl(addr, "--json", "cluster", "status"); r.err != nil || json.Unmarshal([]byte(r.out), &st) != nil || st.Version != "v9.8.7-test" {
		t.Errorf("cluster status --json = %q, %v; want version v9.8.7-test", r.out, r.err)
	}
	var mem api.MembersResponse
	if r := runMaosctl(addr, "--json", "members"); r.err != nil || json.Unmarshal([]byte(r.out), &mem) != nil ||
		len(mem.Members) != 1 || mem.Members[0].Version != "v9.8.7-test" {
		t.Errorf("members --json = %q, %v; want the node with version v9.8.7-test", r.out, r.err)
	}
}
