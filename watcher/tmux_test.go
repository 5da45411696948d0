package watcher

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// tmuxServer is a private tmux server of one test (its own socket), killed
// at the test's end.
type tmuxServer struct {
	t    *testing.T
	tm   Tmux
	dir  string
	sock string
}

func newTmuxServer(t *testing.T) *tmuxServer {
	t.Helper()
	testenv.Tool(t, "tmux", "delivery types into a pane of a private tmux server")
	// A short path: a unix socket's path is limited to ~100 bytes.
	dir, err := os.MkdirTemp("", "maos-tmux-")
	if err != nil {
		t.Fatal(err)
	}
	s := &tmuxServer{t: t, dir: dir, sock: filepath.Join(dir, "s")}
	s.tm = Tmux{Socket: s.sock, Confirm: 5 * time.Second}
	t.Cleanup(func() {
		// Kill only this test's server, by its socket.
		_ = exec.Command("tmux", "-S", s.sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	return s
}

// session starts a detached session running sh -c script in a 200x50
// pane, and returns its target.
func (s *tmuxServer) session(name, script string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", "-S", s.sock, "-f", "/dev/null", "new-session", "-d",
		"-s", name, "-x", "200", "-y", "50", "sh", "-c", script).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux new-session %s: %v: %s", name, err, out)
	}
	return name + ":0.0"
}

func (s *tmuxServer) path(name string) string { return filepath.Join(s.dir, name) }

// waitFile polls the file until cond holds on its content.
func waitFile(t *testing.T, path string, cond func(string) bool) string {
	t.Helper()
	var got string
	for i := 0; i < 400; i++ {
		b, _ := os.ReadFile(path)
		got = string(b)
		if cond(got) {
			return got
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s: content %q never met the condition", path, got)
	return ""
}

// catSession runs a program that appends every line it reads from the
// terminal to a file, and returns the pane and the file.
func (s *tmuxServer) catSession(name string) (target, out string) {
	out = s.path(name + ".out")
	ready := s.path(name + ".ready")
	target = s.session(name, `: > '`+ready+`'; while IFS= read -r l; do printf '%s\n' "$l" >> '`+out+`'; done`)
	waitFile(s.t, ready, func(string) bool { return true })
	return target, out
}

// deliverEach delivers texts in order to a pane running catSession and
// returns what its program read once it read a line per text (more, if a
// text arrived twice).
func (s *tmuxServer) deliverEach(texts ...string) string {
	s.t.Helper()
	target, out := s.catSession("agent")
	for _, text := range texts {
		if err := s.tm.Deliver(context.Background(), target, text); err != nil {
			s.t.Fatalf("Deliver %q: %v", text, err)
		}
	}
	return waitFile(s.t, out, func(got string) bool { return strings.Count(got, "\n") >= len(texts) })
}

func TestTmuxDeliver(t *testing.T) {
	for _, c := range []struct {
		name  string
		texts []string
		want  string
	}{
		// A second message, once it arrived, shows the first came once.
		{"arrives exactly once", []string{"[FROM: codex] review — please look at retry.go", "second"},
			"[FROM: codex] review — please look at retry.go\nsecond\n"},
		{"multi-line is one line", []string{"line one\nline two\r\n\tthree\n"}, "line one line two  three\n"},
		// Text that tmux would otherwise parse: a leading dash (a flag), a
		// key name, a trailing ";" (a command separator).
		{"literal text", []string{"-t x Enter C-c", `ends with;`, `ends with\;`}, "-t x Enter C-c\nends with;\nends with\\;\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := newTmuxServer(t).deliverEach(c.texts...); got != c.want {
				t.Errorf("pane program read %q, want %q", got, c.want)
			}
		})
	}
}

func TestTmuxDeliverClearsInputLineFirst(t *testing.T) {
	s := newTmuxServer(t)
	target, out := s.catSession("agent")
	ctx := context.Background()
	// Half a line a person typed and left there.
	if _, err := s.tm.run(ctx, "send-keys", "-l", "-t", target, "stray words "); err != nil {
		t.Fatal(err)
	}
	if err := s.tm.Deliver(ctx, target, "the message"); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := waitFile(t, out, func(s string) bool { return s != "" }); got != "the message\n" {
		t.Errorf("pane program read %q, want only the message", got)
	}
}

func TestTmuxDeliverUnknownTarget(t *testing.T) {
	s := newTmuxServer(t)
	s.catSession("agent")
	err := s.tm.Deliver(context.Background(), "nosuch:0.0", "hello")
	if err == nil {
		t.Fatal("Deliver to a missing session succeeded")
	}
	if !strings.Contains(err.Error(), `"nosuch:0.0"`) || !strings.Contains(err.Error(), "can't find") {
		t.Errorf("error %q should name the target and say what tmux said", err)
	}
	if errors.Is(err, ErrTmuxUnconfirmed) {
		t.Errorf("error %q is a tmux failure, not an unconfirmed delivery", err)
	}
}

func TestTmuxDeliverNoServer(t *testing.T) {
	tm := Tmux{Socket: filepath.Join(t.TempDir(), "none")}
	err := tm.Deliver(context.Background(), "agent:0.0", "hello")
	if err == nil || !strings.Contains(err.Error(), `"agent:0.0"`) {
		t.Fatalf("Deliver without a server: %v, want an error naming the target", err)
	}
}

func TestTmuxDeliverEmpty(t *testing.T) {
	if err := (Tmux{}).Deliver(context.Background(), "a:0.0", " \n\t "); err == nil || !strings.Contains(err.Error(), "empty text") {
		t.Errorf("Deliver of blank text: %v, want empty text", err)
	}
	if err := (Tmux{}).Deliver(context.Background(), "", "hi"); err == nil || !strings.Contains(err.Error(), "empty target") {
		t.Errorf("Deliver to no target: %v, want empty target", err)
	}
}

func TestTmuxDeliverUnconfirmed(t *testing.T) {
	for _, tc := range []struct{ name, stty string }{
		// Reads nothing and echoes nothing: the text never shows.
		{"no echo", "stty -echo"},
		// Echoes what is typed but never takes the line (a TUI that
		// ignores the carriage return): the text stays on the line.
		{"never submitted", "stty raw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTmuxServer(t)
			ready := s.path("ready")
			target := s.session("stuck", tc.stty+` && : > '`+ready+`' && exec sleep 600`)
			waitFile(t, ready, func(string) bool { return true })
			s.tm.Confirm = 300 * time.Millisecond
			s.tm.Attempts = 2
			err := s.tm.Deliver(context.Background(), target, "hello there")
			if !errors.Is(err, ErrTmuxUnconfirmed) {
				t.Fatalf("Deliver to a pane that does not take input: %v, want ErrTmuxUnconfirmed", err)
			}
			if !strings.Contains(err.Error(), `"stuck:0.0"`) || !strings.Contains(err.Error(), "2 attempts") {
				t.Errorf("error %q should name the target and the attempts", err)
			}
		})
	}
}

func TestTmuxInterruptSendsEscape(t *testing.T) {
	s := newTmuxServer(t)
	ready, out := s.path("ready"), s.path("bytes")
	// Raw mode: the first byte typed reaches dd at once.
	target := s.session("agent", `stty raw -echo && : > '`+ready+`' && exec dd bs=1 count=1 of='`+out+`' 2>/dev/null`)
	waitFile(t, ready, func(string) bool { return true })
	if err := s.tm.Interrupt(context.Background(), target); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	if got := waitFile(t, out, func(s string) bool { return s != "" }); got != "\x1b" {
		t.Errorf("pane got %q, want ESC", got)
	}
}

func TestTmuxInterruptUnknownTarget(t *testing.T) {
	s := newTmuxServer(t)
	s.catSession("agent")
	err := s.tm.Interrupt(context.Background(), "agent:5.0")
	if err == nil || !strings.Contains(err.Error(), `"agent:5.0"`) || !strings.Contains(err.Error(), "can't find") {
		t.Errorf("Interrupt of a missing window: %v, want an error naming it and tmux's words", err)
	}
}

func TestTmuxLine(t *testing.T) {
	for in, want := range map[string]string{
		"a\nb":         "a b",
		"a\r\nb":       "a b",
		"  x\x1by\t ":  "x y",
		"éé — ok\r":    "éé — ok",
		"\n\n":         "",
		"one two":      "one two",
		"tab\tsep\vvt": "tab sep vt",
	} {
		if got := TmuxLine(in); got != want {
			t.Errorf("TmuxLine(%q) = %q, want %q", in, got, want)
		}
	}
}
