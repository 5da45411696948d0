package maosctl

import (
	"io"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// Terminal safety: text maosctl prints comes from other agents (a
// message's title and text, a task's result, the bulletin), and a terminal
// obeys the control sequences in it: clear the screen, rewrite a line,
// set the window title, or worse. So everything maosctl writes to its
// stdout passes through termWriter, which shows C0 controls other than
// tab and newline, and DEL, in caret notation (ESC is "^["), and C1
// controls (U+0080–U+009F, 8-bit CSI among them) as U+FFFD. JSON output
// is unharmed: encoding/json already escapes C0 controls, and both
// replacements are valid inside a JSON string. The bytes of an artifact
// (artifact get -o -) and the MCP server's stream are written raw
// (rawWriter).

// termWriter filters what it writes to w.
type termWriter struct {
	w       io.Writer
	pending []byte // a UTF-8 lead byte 0xC2 split from its next byte
}

// safeStdout makes the app's Writer a termWriter (once): the first step of
// every command, so no path prints unfiltered.
func safeStdout(c *cli.Context) error {
	if _, ok := c.App.Writer.(*termWriter); !ok {
		c.App.Writer = &termWriter{w: c.App.Writer}
	}
	return nil
}

// rawWriter is w without the terminal filter: for bytes that are not text
// (an artifact) or a protocol's stream (MCP).
func rawWriter(w io.Writer) io.Writer {
	if t, ok := w.(*termWriter); ok {
		return t.w
	}
	return w
}

// Write writes p filtered; n counts p's bytes (all of them, on success).
func (t *termWriter) Write(p []byte) (int, error) {
	in := p
	if len(t.pending) > 0 {
		in = append(t.pending, p...)
		t.pending = nil
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == '\t' || c == '\n':
			out = append(out, c)
			i++
		case c < 0x20 || c == 0x7f:
			out = append(out, '^', c^0x40)
			i++
		case c == 0xc2 && i+1 == len(in):
			// A C1 control's first byte, or any U+0080–U+00BF: wait for the next.
			t.pending = []byte{c}
			i++
		case c == 0xc2 && in[i+1] >= 0x80 && in[i+1] <= 0x9f:
			out = utf8.AppendRune(out, utf8.RuneError)
			i += 2
		default:
			out = append(out, c)
			i++
		}
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
