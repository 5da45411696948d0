package maosd

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/CLI.md's maosd part from maosd's help")

// maosdReferenceMark starts maosd's part of docs/CLI.md, after maosctl's
// (cli/maosctl's TestCLIReference keeps that part).
const maosdReferenceMark = "\n## maosd\n"

// The maosd part of docs/CLI.md is maosd --help, as urfave/cli renders it,
// so the flags' reference cannot drift from the binary: after changing a
// flag, regenerate it with go test ./cli/maosd -run TestCLIReference -update.
func TestCLIReference(t *testing.T) {
	// A MAOS_* variable would show as a flag's default.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MAOS_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	var out bytes.Buffer
	app := App()
	app.Version = ""
	app.Writer = &out
	app.ErrWriter = &out
	if err := app.Run([]string{"maosd", "--help"}); err != nil {
		t.Fatal(err)
	}
	got := maosdReferenceMark + "\n" + maosdReferenceNote + "\n```text\n" + strings.TrimRight(out.String(), "\n") + "\n```\n"

	file := filepath.Join("..", "..", "docs", "CLI.md")
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(old, []byte(maosdReferenceMark))
	if i < 0 {
		i = len(old)
	}
	if *update {
		if err := os.WriteFile(file, append(old[:i:i], got...), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(old[i:]) != got {
		t.Errorf("docs/CLI.md's maosd part is not maosd --help; run go test ./cli/maosd -run TestCLIReference -update")
	}
}

const maosdReferenceNote = "Every flag also reads the environment variable shown. `maosd --version` prints\n" +
	"the version and the commit it was built from (`make build` writes `git describe`\n" +
	"into it; `make build VERSION=v1.2.0` for a release), e.g. `maosd version v1.2.0\n" +
	"(commit 0dc749060d9c, go1.26.8 linux/amd64)`.\n"
