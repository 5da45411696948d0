package maosctl

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

var update = flag.Bool("update", false, "rewrite docs/CLI.md's maosctl part from the commands' help")

// The maosctl part of docs/CLI.md is every command's own --help, as
// urfave/cli renders it, so the reference cannot drift from the binary:
// after changing a command, regenerate it with
// go test ./cli/maosctl -run TestCLIReference -update.
func TestCLIReference(t *testing.T) {
	// A MAOS_* variable would show as a flag's default.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MAOS_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	var b strings.Builder
	b.WriteString(cliReferenceHead)
	var walk func(path []string, cmds []*cli.Command)
	section := func(path []string) {
		name := strings.Join(append([]string{"maosctl"}, path...), " ")
		b.WriteString("\n### " + name + "\n\n```text\n")
		b.WriteString(strings.TrimRight(renderHelp(t, path), "\n") + "\n```\n")
	}
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := append(append([]string(nil), path...), c.Name)
			section(p)
			walk(p, c.Subcommands)
		}
	}
	section(nil)
	walk(nil, App().Commands)
	got := b.String()

	file := filepath.Join("..", "..", "docs", "CLI.md")
	old, err := os.ReadFile(file)
	if err != nil && !*update {
		t.Fatal(err)
	}
	// docs/CLI.md holds maosctl's part first, then maosd's (cli/maosd's test).
	rest := ""
	if i := bytes.Index(old, []byte(maosdReferenceMark)); i >= 0 {
		rest = string(old[i:])
	}
	if *update {
		if err := os.WriteFile(file, []byte(got+rest), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if have := strings.TrimSuffix(string(old), rest); have != got {
		t.Errorf("docs/CLI.md's maosctl part is not the commands' help (first difference at line %d); run go test ./cli/maosctl -run TestCLIReference -update",
			firstDiffLine(have, got))
	}
}

// maosdReferenceMark starts maosd's part of docs/CLI.md.
const maosdReferenceMark = "\n## maosd\n"

const cliReferenceHead = `# Command-line reference

Generated from the commands' own ` + "`--help`" + ` (` + "`go test ./cli/maosctl -run TestCLIReference -update`" + `
and ` + "`go test ./cli/maosd -run TestCLIReference -update`" + `); a test fails when
this page and the binaries disagree. Edit the help in the code, not here.

Conventions of every maosctl command: errors go to stderr with exit
status 1; ` + "`--json`" + ` prints the API's objects for scripts; in every listing
` + "`--limit N`" + ` prints at most N items in total, asking for as many pages as
that takes (default 100, or everything for ` + "`lock list`" + ` and ` + "`audit`" + `),
` + "`--all`" + ` lifts it, and ` + "`--page-size N`" + ` (1-1000) only sets how many one
request asks for. ` + "`--addr`" + ` (` + "`HOST:PORT`" + ` or ` + "`http(s)://HOST:PORT`" + `) is checked
before any request.

## maosctl
`

// renderHelp is maosctl's --help for the command at path, without the
// version line (it names the build).
func renderHelp(t *testing.T, path []string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	app := App()
	app.Version = ""
	app.Writer = &out
	app.ErrWriter = &errOut
	release := parseSerially(app.Commands)
	defer release()
	if err := app.Run(append(append([]string{"maosctl"}, path...), "--help")); err != nil {
		t.Fatalf("maosctl %s --help: %v", strings.Join(path, " "), err)
	}
	return out.String()
}

// firstDiffLine is the 1-based line where a and b first differ.
func firstDiffLine(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
