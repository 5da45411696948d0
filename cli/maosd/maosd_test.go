package maosd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/cli/maosctl"
	"github.com/maos-project/maos/fsm"
)

func TestAdvertised(t *testing.T) {
	tests := []struct {
		flag, bound, adv string
		want, wantErr    string
	}{
		{"http-addr", "127.0.0.1:7070", "", "127.0.0.1:7070", ""},
		{"http-addr", "0.0.0.0:7070", "10.0.0.5:7070", "10.0.0.5:7070", ""},
		{"http-addr", "0.0.0.0:7070", "", "", "--http-addr 0.0.0.0:7070 binds every interface; also give --http-advertise"},
		{"raft-addr", "[::]:7071", "", "", "--raft-advertise"},
		{"raft-addr", ":7071", "", "", "binds every interface"},
		{"raft-addr", "nonsense", "", "", `--raft-addr "nonsense" is not host:port`},
	}
	for _, tt := range tests {
		got, err := advertised(tt.flag, tt.bound, tt.adv)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("advertised(%q, %q, %q) error = %v, want it to contain %q", tt.flag, tt.bound, tt.adv, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("advertised(%q, %q, %q) = %q, %v; want %q", tt.flag, tt.bound, tt.adv, got, err, tt.want)
		}
	}
}

func TestNewLoggerRejectsBadFlags(t *testing.T) {
	if _, err := newLogger(&bytes.Buffer{}, "loud", "text"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: err = %v", err)
	}
	if _, err := newLogger(&bytes.Buffer{}, "info", "xml"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("bad format: err = %v", err)
	}
	var buf bytes.Buffer
	l, err := newLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), `"msg":"shown"`) {
		t.Errorf("json logger at warn wrote %q", buf.String())
	}
}

func TestDefaultNodeIDIsValid(t *testing.T) {
	if id := defaultNodeID(); !fsm.ValidName(id) {
		t.Errorf("defaultNodeID() = %q, not a valid node id", id)
	}
}

// maosd refuses bad flags before touching the data dir, naming the flag.
func TestRefusesBadFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--node-id", "Bad ID"}, "--node-id"},
		{[]string{"--raft-addr", "0.0.0.0:0"}, "--raft-advertise"},
		{[]string{"--http-addr", "0.0.0.0:0"}, "--http-advertise"},
		{[]string{"--max-message-bytes", "0"}, "--max-message-bytes"},
		{[]string{"--max-message-bytes", "16777217"}, "want 1..16777216"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--raft-commit-timeout", "500us"}, "--raft-commit-timeout"},
		{[]string{"--raft-commit-timeout", "2s"}, "--raft-commit-timeout"},
		{[]string{"--debug-addr", "0.0.0.0:0"}, "--debug-addr"},
		{[]string{"--snapshot-threshold", "10"}, "--snapshot-threshold"},
		{[]string{"--debug-addr", "nonsense"}, "--debug-addr"},
	}
	for _, tt := range tests {
		checkSays(t, fmt.Sprintf("maosd %v", tt.args), startRefused(dir, tt.args...), tt.want)
	}
	checkNoDataDir(t, dir)
}

// startRefused runs maosd with args after --data-dir dir and loopback
// port-0 addresses, for command lines it must refuse, and returns its error.
func startRefused(dir string, args ...string) error {
	app := App()
	app.ErrWriter = io.Discard
	app.ExitErrHandler = func(*cli.Context, error) {}
	return app.Run(append([]string{"maosd", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}, args...))
}

// checkSays fails t unless err says each of want; what names the case.
func checkSays(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%s: err = %v, want it to say %q", what, err, w)
		}
	}
}

// checkNoDataDir fails t if a refused start created dir.
func checkNoDataDir(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused start created the data dir (stat: %v)", err)
	}
}

// maosctlResult is what one maosctl run printed and returned.
type maosctlResult struct {
	out, errOut string
	err         error
}

// runMaosctl runs maosctl --addr addr args... in this process: the client
// the end-to-end tests drive a running maosd with.
func runMaosctl(addr string, args ...string) maosctlResult {
	var out, errOut bytes.Buffer
	app := maosctl.App()
	app.Writer, app.ErrWriter, app.Reader = &out, &errOut, strings.NewReader("")
	err := app.Run(append([]string{"maosctl", "--addr", addr}, args...))
	return maosctlResult{out: out.String(), errOut: errOut.String(), err: err}
}

// clearMaosctlEnv keeps the caller's maosctl token and TLS variables out
// of a test.
func clearMaosctlEnv(t *testing.T) {
	for _, k := range []string{"MAOS_TOKEN", "MAOS_TOKEN_FILE", "MAOS_CA", "MAOS_CERT", "MAOS_KEY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}
