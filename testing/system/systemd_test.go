package system

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// deployFile reads a file of deploy/ in the repository.
func deployFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// systemdAnalyze runs systemd-analyze ARGS and returns its exit error and
// its output. On Linux a missing systemd-analyze fails the test in the
// full run rather than skipping it (the -short tier skips it), so CI
// cannot pass without checking the unit: .ci/run installs it (Debian:
// apt-get install systemd).
func systemdAnalyze(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("systemd units are checked on Linux only, not %s", runtime.GOOS)
	}
	bin := testenv.Tool(t, "systemd-analyze", "checks deploy/systemd/maosd.service; Debian package systemd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// deploy/systemd/maosd.service passes `systemd-analyze verify` with no
// warning (an unknown or misspelt directive is only a warning there), with
// ExecStart pointed at a built maosd since verify wants the binary to
// exist; keeps the hardening the deployment guide promises; and scores
// at most 2.0 ("OK") on `systemd-analyze security`.
func TestSystemdUnit(t *testing.T) {
	unit := deployFile(t, "systemd/maosd.service")
	for _, want := range []string{
		"ExecStart=/usr/local/bin/maosd\n", "EnvironmentFile=/etc/maos/maosd.env\n",
		"DynamicUser=yes\n", "StateDirectory=maos\n", "Environment=MAOS_DATA_DIR=%S/maos\n",
		"Restart=on-failure\n", "NoNewPrivileges=yes\n", "ProtectSystem=strict\n", "ProtectHome=yes\n",
		"PrivateTmp=yes\n", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n", "LockPersonality=yes\n",
		"MemoryDenyWriteExecute=yes\n", "SystemCallArchitectures=native\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("maosd.service lacks %q", strings.TrimSpace(want))
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "maosd.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart=/usr/local/bin/maosd\n", "ExecStart="+maosdBin+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := systemdAnalyze(t, "verify", path)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify maosd.service: %v\n%s", err, out)
	}
	out, err = systemdAnalyze(t, "security", "--offline=true", "--threshold=20", path)
	if err != nil {
		t.Errorf("systemd-analyze security maosd.service: over 2.0 (%v):\n%s", err, out)
	}
}

// Every MAOS_* variable the unit and the example environment file set
// (commented ones too) is one maosd reads: a typo would be ignored
// silently by maosd, and the node would run with a default.
func TestSystemdEnvNames(t *testing.T) {
	help, err := exec.Command(maosdBin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("maosd --help: %v\n%s", err, help)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$(MAOS_[A-Z0-9_]+)`).FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if !known["MAOS_NODE_ID"] {
		t.Fatalf("maosd --help names no $MAOS_NODE_ID:\n%s", help)
	}
	set := regexp.MustCompile(`(?m)^(?:#?|Environment=)(MAOS_[A-Z0-9_]+)=`)
	for _, file := range []string{"systemd/maosd.service", "systemd/maosd.env.example"} {
		n := 0
		for _, m := range set.FindAllStringSubmatch(deployFile(t, file), -1) {
			n++
			if !known[m[1]] {
				t.Errorf("%s sets %s, which maosd does not read", file, m[1])
			}
		}
		if n == 0 {
			t.Errorf("%s sets no MAOS_ variable", file)
		}
	}
}
