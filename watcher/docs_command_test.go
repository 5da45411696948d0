package watcher

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Stand-ins for the model CLIs, each reading its prompt the way the real
// one does in the mode the docs give a watcher: Claude Code only with
// -p/--print (the prompt on stdin when no argument gives it), Codex with
// "exec -" ("-": the prompt from stdin), Gemini CLI whenever its stdin is
// not a terminal, its -p/--prompt taking the next argument as the prompt
// (so a bare -p is an error, as yargs makes it). Each prints what it read.
var modelStubs = map[string]string{
	"claude": `case " $* " in *" -p "*|*" --print "*) ;; *) echo "claude: interactive, no -p" >&2; exit 9;; esac`,
	"codex":  `[ "$*" = "exec -" ] || { echo "codex: want exec -, got $*" >&2; exit 9; }`,
	"gemini": `for a; do last=$a; done
case "$last" in -p|--prompt) echo "gemini: Not enough arguments following: p" >&2; exit 9;; esac
[ -t 0 ] && { echo "gemini: a terminal: interactive" >&2; exit 9; }`,
}

// commandRE finds a watcher entry's command in the docs' text and YAML.
var commandRE = regexp.MustCompile("command: (\\[[^\\]\\n]*\\])")

// The command each agent page documents for a watcher (claude -p, codex
// exec -, gemini) is a valid entry, and run as the watcher runs it, the
// CLI of that name gets the prompt on stdin and answers.
func TestDocumentedModelCommands(t *testing.T) {
	bin := t.TempDir()
	for name, check := range modelStubs {
		script := "#!/bin/sh\n" + check + "\nprintf '%s read: ' " + name + "; cat\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for page, name := range map[string]string{"claude-code.md": "claude", "codex.md": "codex", "gemini.md": "gemini"} {
		doc, err := os.ReadFile(filepath.Join("..", "docs", "agents", page))
		if err != nil {
			t.Fatal(err)
		}
		m := commandRE.FindSubmatch(doc)
		if m == nil {
			t.Errorf("%s documents no watcher command", page)
			continue
		}
		f, err := Parse([]byte("agents:\n  - id: " + name + "\n    command: " + string(m[1]) + "\n"))
		if err != nil {
			t.Errorf("%s: command %s: %v", page, m[1], err)
			continue
		}
		argv := f.Agents[0].Command
		if argv[0] != name {
			t.Errorf("%s: command %q does not run %s", page, argv, name)
		}
		res := Exec(context.Background(), Invocation{Argv: argv, Stdin: "[FROM: lead] review retry.go", Timeout: 30 * time.Second})
		if want := name + " read: [FROM: lead] review retry.go"; res.Err != nil || res.Output != want {
			t.Errorf("%s: %q answered %q (err %v, stderr %s), want %q", page, argv, res.Output, res.Err, strings.Join(res.Stderr, "; "), want)
		}
	}
}
