package maosd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cli/maosctl"
	"github.com/maos-project/maos/cluster"
)

// validate words cluster.Config.Validate's field errors for the command
// line: the flag the field came from, then why; a wildcard listen address
// taken as the advertised one says which advertise flag to give.
func TestValidateNamesFlags(t *testing.T) {
	base := func() *config {
		return &config{
			node: cluster.Config{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:7070",
				GossipAddr: "127.0.0.1:0"},
			httpAddr: "127.0.0.1:7070", gossipKeyFrom: "--gossip-key-file key.txt", adminTokenFile: "admin.token",
		}
	}
	for _, tc := range []struct {
		name  string
		tweak func(*config)
		want  string // "" accepted
	}{
		{"valid", func(*config) {}, ""},
		{"wildcard api with advertise", func(c *config) {
			c.httpAddr, c.httpAdvertise, c.node.APIAddr = "0.0.0.0:7070", "10.0.0.5:7070", "10.0.0.5:7070"
		}, ""},
		{"wildcard api without advertise", func(c *config) { c.httpAddr, c.node.APIAddr = "0.0.0.0:7070", "0.0.0.0:7070" },
			"--http-addr 0.0.0.0:7070 binds every interface; also give --http-advertise HOST:PORT that peers can reach"},
		{"bad api advertise", func(c *config) { c.httpAdvertise, c.node.APIAddr = "nonsense", "nonsense" },
			`--http-advertise: "nonsense" is not host:port`},
		{"raft on every v6 interface", func(c *config) { c.node.RaftAddr = "[::]:7071" },
			"--raft-addr [::]:7071 binds every interface; also give --raft-advertise HOST:PORT that peers can reach"},
		{"raft without host", func(c *config) { c.node.RaftAddr = ":7071" }, "--raft-addr :7071 binds every interface"},
		{"raft not host:port", func(c *config) { c.node.RaftAddr = "nonsense" }, `--raft-addr: "nonsense" is not host:port`},
		{"raft advertise wildcard", func(c *config) { c.node.RaftAdvertise = "0.0.0.0:7071" },
			`--raft-advertise: "0.0.0.0:7071": want a host peers can reach, not a wildcard`},
		{"node id", func(c *config) { c.node.NodeID = "Bad ID" }, `--node-id: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Bad ID")`},
		{"no data dir", func(c *config) { c.node.DataDir = "" }, "--data-dir: required"},
		{"short admin token", func(c *config) { c.node.AdminToken = "short" }, "--admin-token-file admin.token: 5 bytes, want 16..512"},
		{"commit timeout", func(c *config) { c.node.CommitTimeout = 2 * time.Second }, "--raft-commit-timeout: 2s: want 1ms..1s"},
		{"snapshot threshold", func(c *config) { c.node.SnapshotThreshold = 10 }, "--snapshot-threshold: 10: want at least 1024 entries"},
		{"negative presence ttl", func(c *config) { c.node.PresenceTTL = -time.Second }, "--presence-ttl: -1s is negative"},
		{"gossip on every interface", func(c *config) { c.node.GossipAddr = "0.0.0.0:7072" },
			"--gossip-addr 0.0.0.0:7072 binds every interface; also give --gossip-advertise HOST:PORT"},
		{"gossip host name", func(c *config) { c.node.GossipAddr = "localhost:7072" }, `--gossip-addr: "localhost:7072": want an IP address, not a host name`},
		{"gossip advertise host name", func(c *config) { c.node.GossipAdvertise = "host:7072" }, `--gossip-advertise: "host:7072": want an IP address`},
		{"short gossip key", func(c *config) { c.node.GossipKey = make([]byte, 10) },
			"--gossip-key-file key.txt: 10 bytes: want 16, 24 or 32 bytes (AES-128, -192 or -256); make one with: openssl rand -base64 32"},
	} {
		cfg := base()
		tc.tweak(cfg)
		err := cfg.validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: validate() = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: validate() = %v, want it to start %q", tc.name, err, tc.want)
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
	if id := defaultNodeID(); !api.ValidName(id) {
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
		{[]string{"--metrics-addr", "nonsense"}, "--metrics-addr"},
		{[]string{"--snapshot-threshold", "10"}, "--snapshot-threshold"},
		{[]string{"--debug-addr", "nonsense"}, "--debug-addr"},
		{[]string{"--http-advertise", "nonsense"}, `--http-advertise: "nonsense" is not host:port`},
		{[]string{"--raft-addr", "nonsense", "--gossip-addr", "127.0.0.1:0"}, `--raft-addr: "nonsense" is not host:port`},
		{[]string{"--raft-advertise", "10.0.0.5:0"}, `--raft-advertise: "10.0.0.5:0": port must be 1..65535`},
		{[]string{"--raft-commit-timeout", "0s"}, "--raft-commit-timeout: 0s: want 1ms..1s"},
		{[]string{"--snapshot-threshold", "0"}, "--snapshot-threshold: 0: want at least 1024 entries"},
	}
	for _, tt := range tests {
		err := startRefused(dir, tt.args...)
		checkSays(t, fmt.Sprintf("maosd %v", tt.args), err, tt.want)
		checkStatus(t, fmt.Sprintf("maosd %v", tt.args), err, 2)
	}
	checkNoDataDir(t, dir)
}

// A node that cannot start (here: its API port is taken) exits with
// status 1, naming the flag, before it touches the data dir.
func TestCannotListenExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "data")
	err = startRefused(dir, "--http-addr", ln.Addr().String())
	checkSays(t, "maosd on a taken port", err, "--http-addr", "address already in use")
	checkStatus(t, "maosd on a taken port", err, 1)
	checkNoDataDir(t, dir)
}

// checkStatus fails t unless err is a cli.ExitCoder with status code.
func checkStatus(t *testing.T, what string, err error, code int) {
	t.Helper()
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != code {
		t.Errorf("%s: err = %v, want exit status %d", what, err, code)
	}
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

// Each flag's help states its default once: a default written into the
// usage text of a flag that also has a value would print two.
func TestHelpStatesEachDefaultOnce(t *testing.T) {
	var out bytes.Buffer
	app := App()
	app.Writer = &out
	if err := app.Run([]string{"maosd", "--help"}); err != nil {
		t.Fatal(err)
	}
	flags := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		flags++
		if strings.Count(line, "(default") > 1 {
			t.Errorf("two defaults: %s", strings.TrimSpace(line))
		}
	}
	if flags < 20 {
		t.Fatalf("help lists %d flags; did the format change?\n%s", flags, out.String())
	}
	if !strings.Contains(out.String(), "--node-id value                unique node id, "+api.NamePattern+" (default: from the hostname)") {
		t.Errorf("--node-id help:\n%s", out.String())
	}
}

// A node whose secret detector cannot load its rules does not start (it
// would refuse every send under the default secret_guard), exits 1
// saying why, and leaves the data dir untouched.
func TestSecretDetectorWarmedAtStart(t *testing.T) {
	defer func(f func() error) { warmSecrets = f }(warmSecrets)
	warmSecrets = func() error { return errors.New("secrets: load the gitleaks rules: broken") }
	dir := filepath.Join(t.TempDir(), "data")
	err := startRefused(dir)
	checkSays(t, "maosd with broken secret rules", err, "secret detection", "broken")
	checkStatus(t, "maosd with broken secret rules", err, 1)
	checkNoDataDir(t, dir)
}
