package maosctl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// Text from other agents never reaches the terminal as control sequences:
// get, read and the JSON output show them escaped, and --json still
// decodes to the text as sent.
func TestOutputShowsNoTerminalEscapes(t *testing.T) {
	e := newTestEnv(t, "claude")
	text := "clear \x1b[2J bell \a title \x1b]0;pwned\x07 csi \u009b31m cr \r end\ttab\nline"
	id := e.send("ops", "codex", "claude", text)
	for _, args := range [][]string{{"get", id}, {"read", "--channel", "ops"}, {"--json", "get", id}} {
		out := e.ok(args...)
		if i := strings.IndexFunc(out, func(r rune) bool {
			return (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f)
		}); i >= 0 {
			t.Errorf("maosctl %s prints control character %q at %d:\n%q", strings.Join(args, " "), out[i], i, out)
		}
		switch args[0] {
		case "read":
			continue // one line a message: the control check above is the point
		case "--json":
			var m api.Message
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("get --json no longer JSON: %v\n%s", err, out)
			}
			continue
		}
		if !strings.Contains(out, "clear ^[[2J bell ^G title ^[]0;pwned^G csi \ufffd31m cr ^M end\ttab\nline") {
			t.Errorf("maosctl %s: the text is not shown escaped:\n%q", strings.Join(args, " "), out)
		}
	}
}

// A C1 control split across two writes is still caught; other
// characters pass whole.
func TestTermWriterSplitWrites(t *testing.T) {
	var b bytes.Buffer
	w := &termWriter{w: &b}
	for _, p := range []string{"a\xc2", "\x9bb ", "\xc2", "\xa2 é ok"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if got, want := b.String(), "a\ufffdb ¢ é ok"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
