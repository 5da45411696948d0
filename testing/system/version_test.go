package system

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// versionOf runs BIN --version and checks the line's format: the name,
// "version", the version, the commit and the toolchain. It returns the
// version and the commit.
func versionOf(t *testing.T, bin string) (version, commit string) {
	t.Helper()
	name := filepath.Base(bin)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", name, err, out)
	}
	re := regexp.MustCompile(`^` + name + ` version (\S+) \(commit ([0-9a-f]{4,40}|unknown)(?:, modified)?, go\S+ \S+/\S+\)\n$`)
	m := re.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s --version printed %q, want a line like %s", name, out, re)
	}
	return m[1], m[2]
}

// The binaries the harness built (a plain go build) print their version.
func TestVersion(t *testing.T) {
	for _, bin := range []string{maosdBin, maosctlBin} {
		versionOf(t, bin)
	}
}

// make build stamps the checkout's commit and git describe into both
// binaries (-ldflags -X), and VERSION=... names a release.
func TestMakeBuildVersion(t *testing.T) {
	testenv.Slow(t, "make build links every binary")
	git := testenv.Tool(t, "git", "make build takes the version from git")
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command(git, "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("%s is not a git checkout: %v", root, err)
	}
	describe, err := exec.Command(git, "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	bin := t.TempDir()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make build needs make: %v", err)
	}
	for _, tc := range []struct{ version, want string }{
		{"", strings.TrimSpace(string(describe))},
		{"v9.8.7", "v9.8.7"},
	} {
		args := []string{"-C", root, "build", "BIN=" + bin}
		if tc.version != "" {
			args = append(args, "VERSION="+tc.version)
		}
		cmd := exec.Command(mk, args...)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "VERSION=") || strings.HasPrefix(kv, "COMMIT=")
		})
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %v: %v\n%s", args, err, out)
		}
		for _, name := range []string{"maosd", "maosctl"} {
			v, c := versionOf(t, filepath.Join(bin, name))
			if v != tc.want {
				t.Errorf("make build VERSION=%q: %s version %q, want %q", tc.version, name, v, tc.want)
			}
			if !strings.HasPrefix(string(head), c) {
				t.Errorf("make build: %s commit %q, want the checkout's %s", name, c, head)
			}
		}
	}
}
