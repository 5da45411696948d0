package chaos

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Bad flags are refused before any cluster starts, naming the flag.
func TestAppRefusesBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--nemesis", "kill-leader,nuke"}, `unknown nemesis "nuke"`},
		{[]string{"--nodes", "2"}, "--nodes 2: at least 3"},
		{[]string{"--watchers", "-1"}, "--watchers -1: 0..8"},
		{[]string{"--tasks", "-1"}, "--tasks -1: 0..32"},
		{[]string{"--nemesis", "bridge"}, "--nemesis bridge: needs --netns"},
	}
	for _, tt := range tests {
		app := App()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		app.ExitErrHandler = func(*cli.Context, error) {}
		err := app.Run(append([]string{"maos-chaos", "--maosd", maosdBin, "--out", t.TempDir()}, tt.args...))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

func TestFindMaosdIsAbsolute(t *testing.T) {
	p, err := findMaosd("bin/maosd")
	if err != nil || !filepath.IsAbs(p) || !strings.HasSuffix(p, filepath.Join("bin", "maosd")) {
		t.Fatalf("findMaosd(bin/maosd) = %q, %v; want an absolute path", p, err)
	}
}

func TestNemesisByName(t *testing.T) {
	for _, name := range NemesisNames() {
		n, err := NemesisByName(name)
		if err != nil || n.Name != name || n.inject == nil {
			t.Errorf("NemesisByName(%q) = %+v, %v", name, n, err)
		}
	}
	if _, err := NemesisByName("nope"); err == nil || !strings.Contains(err.Error(), "kill-leader") {
		t.Errorf("unknown nemesis error %v does not list the known ones", err)
	}
}
