package maosd

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestReadPushAllow: hosts and host:ports, comma-separated, lowercased;
// a URL or a path is refused naming the flag; none is push off.
func TestReadPushAllow(t *testing.T) {
	read := func(v string) ([]string, error) {
		var got []string
		var err error
		app := &cli.App{Flags: []cli.Flag{pushAllowFlag}, Action: func(c *cli.Context) error {
			got, err = readPushAllow(c)
			return nil
		}}
		args := []string{"maosd"}
		if v != "" {
			args = append(args, "--a2a-push-allow", v)
		}
		if runErr := app.Run(args); runErr != nil {
			t.Fatal(runErr)
		}
		return got, err
	}
	t.Setenv("MAOS_A2A_PUSH_ALLOW", "")
	if got, err := read("127.0.0.1, Hooks.Example:8443"); err != nil || !slices.Equal(got, []string{"127.0.0.1", "hooks.example:8443"}) {
		t.Errorf("read = %v, %v", got, err)
	}
	if got, err := read(""); err != nil || got != nil {
		t.Errorf("no flag = %v, %v: want push off", got, err)
	}
	for _, bad := range []string{"https://hooks.example", "hooks.example/a", "a,,b"} {
		if _, err := read(bad); err == nil || !strings.Contains(err.Error(), "--a2a-push-allow") {
			t.Errorf("read(%q) = %v, want refused naming the flag", bad, err)
		}
	}
}
