package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

// Screens as Claude Code and Codex draw them in a tmux pane (trimmed to
// their last rows, trailing blank rows as a 50-row pane has them).
const (
	claudeIdle = `╭───────────────────────────────────────────────╮
│ ✻ Welcome to Claude Code!                     │
╰───────────────────────────────────────────────╯

> what files are here?

⏺ There are three: go.mod, main.go and README.md.

╭───────────────────────────────────────────────╮
│ >                                             │
╰───────────────────────────────────────────────╯
  ? for shortcuts



`
	claudeWorking = `> fix the failing test

⏺ Reading main_test.go…

✻ Thinking… (12s · ↑ 1.2k tokens · esc to interrupt)

╭───────────────────────────────────────────────╮
│ >                                             │
╰───────────────────────────────────────────────╯
  ? for shortcuts
`
	codexIdle = `• I ran the tests; all pass.

› Ask Codex to do anything

  ⏎ send   ⌃J newline   ⌃T transcript   ⌃C quit


`
	codexWorking = `• Explored
  └ Read main.go

• Working (5s • Esc to interrupt)

› Ask Codex to do anything
`
	shell = `user@host:~/src$ ls
go.mod  main.go
user@host:~/src$ `
)

func defaultDetector(t *testing.T) PaneDetector {
	t.Helper()
	f, err := Parse([]byte(`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0"}]`))
	if err != nil {
		t.Fatal(err)
	}
	return f.Agents[0].PaneDetector()
}

func TestPaneDetectorDefaults(t *testing.T) {
	d := defaultDetector(t)
	// A status line scrolled above the last PaneLines lines no longer counts.
	var scrolled strings.Builder
	scrolled.WriteString("✻ Thinking… (esc to interrupt)\n")
	for i := range PaneLines {
		fmt.Fprintf(&scrolled, "line %d of the answer\n", i)
	}
	scrolled.WriteString("> \n")
	for _, tc := range []struct {
		name, screen, want string
	}{
		{"claude code idle", claudeIdle, api.SubstateIdle},
		{"claude code working", claudeWorking, api.SubstateWorking},
		{"codex idle", codexIdle, api.SubstateIdle},
		{"codex working", codexWorking, api.SubstateWorking},
		{"a shell", shell, ""},
		{"empty", "\n\n\n", ""},
		{"an old status line scrolled up", scrolled.String(), api.SubstateIdle},
		{"a prompt character inside text", "the ratio is a > b\nnot a prompt", ""},
		{"a bare prompt at the end", "answer\n>", api.SubstateIdle},
		{"claude code's permission dialog", "Bash command\n  rm -rf build\nDo you want to proceed?\n❯ 1. Yes\n  2. No, and tell Claude what to do differently (esc)\n", ""},
		{"a menu cursor on a numbered choice", "Allow command?\n› 1. Yes, proceed\n  2. No\n", ""},
	} {
		if got := d.Detect(tc.screen); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := (PaneDetector{}).Detect(claudeWorking); got != "" {
		t.Errorf("the zero detector detected %q", got)
	}
	// A command agent has no pane detector.
	f, err := Parse([]byte(`agents: [{id: a, command: [x]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Agents[0].PaneDetector(); d.Idle != nil || d.Working != nil {
		t.Errorf("a command agent has a pane detector %+v", d)
	}
}

// An agent's own prompts replace the defaults.
func TestPaneDetectorConfigured(t *testing.T) {
	f, err := Parse([]byte(`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", idle_prompt: '(?m)^aider> ', working_prompt: 'Waiting for'}]`))
	if err != nil {
		t.Fatal(err)
	}
	d := f.Agents[0].PaneDetector()
	for screen, want := range map[string]string{
		"aider> ":                         api.SubstateIdle,
		"Waiting for gpt-5…\naider> ":     api.SubstateWorking,
		claudeIdle:                        "",
		"esc to interrupt\n> ":            "",
		"\naider> \n\n\n\n\n\n\n\n\n\n\n": api.SubstateIdle,
	} {
		if got := d.Detect(screen); got != want {
			t.Errorf("%q: %q, want %q", screen, got, want)
		}
	}
}

// On a private tmux server: the probe reads the pane as it changes, says
// "" for a pane it cannot tell, and fails naming the pane that is gone.
func TestPaneProbeOnTmux(t *testing.T) {
	s := newTmuxServer(t)
	// A fake agent: a prompt, then a working line after each input; like
	// a TUI, it redraws the screen (clear) for each.
	target := s.session("agent", `while :; do printf '\033[H\033[2J› '; read l; printf '\033[H\033[2JWorking (1s • Esc to interrupt)\n'; read l; done`)
	probe := PaneProbe{Tmux: s.tm, Target: target, Detector: defaultDetector(t)}
	waitSub := func(want string) {
		t.Helper()
		var got string
		var err error
		for deadline := testenv.Deadline(t); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got, err = probe.PaneSubstate(context.Background()); err == nil && got == want {
				return
			}
		}
		t.Fatalf("pane substate %q (err %v), want %q", got, err, want)
	}
	waitSub(api.SubstateIdle)
	s.keys(target, "do it", "Enter")
	waitSub(api.SubstateWorking)
	s.keys(target, "Enter")
	waitSub(api.SubstateIdle)

	other := s.session("shell", `printf 'user@host:~$ '; sleep 60`)
	if got, err := (PaneProbe{Tmux: s.tm, Target: other, Detector: defaultDetector(t)}).PaneSubstate(context.Background()); err != nil || got != "" {
		t.Errorf("a shell's pane: %q, %v; want \"\"", got, err)
	}
	_, err := (PaneProbe{Tmux: s.tm, Target: "nosuch:0.0", Detector: defaultDetector(t)}).PaneSubstate(context.Background())
	if err == nil || !strings.Contains(err.Error(), `read pane "nosuch:0.0"`) {
		t.Errorf("a missing pane: %v", err)
	}
}

// The watcher of a tmux agent reports what its pane shows, with source
// pane, as it changes; a pane it cannot tell falls back to the watcher's
// own IDLE.
func TestWatcherReportsPaneSubstate(t *testing.T) {
	s := newTmuxServer(t)
	target := s.session("agent", `c='\033[H\033[2J'; while :; do printf "$c> "; read l; [ "$l" = shell ] && { printf "$c\$ "; read l; }; printf "${c}esc to interrupt\n"; read l; done`)
	svc, cl := apiNode(t)
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: tm\n  delivery: tmux\n  tmux_target: %q\n", target))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), Tmux: s.tm,
			Heartbeat: time.Hour, PanePoll: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The heartbeat's period is an hour: every report after the first is
	// the pane loop waking it on a change.
	waitPresence := func(sub, source string) {
		t.Helper()
		var p api.Presence
		for deadline := testenv.Deadline(t); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if p, err = cl.AgentPresence(context.Background(), "tm"); err == nil && p.Substate == sub && p.Source == source {
				return
			}
		}
		t.Fatalf("presence %s from %q, want %s from %q", p.Substate, p.Source, sub, source)
	}
	waitPresence(api.SubstateIdle, api.SourcePane)
	s.keys(target, "work", "Enter")
	waitPresence(api.SubstateWorking, api.SourcePane)
	s.keys(target, "Enter")
	waitPresence(api.SubstateIdle, api.SourcePane)
	s.keys(target, "shell", "Enter")
	waitPresence(api.SubstateIdle, api.SourceWatcher)
	for _, u := range svc.PresenceUpdates() {
		if u.State == api.PresenceAwake && u.Source != api.SourcePane && u.Source != api.SourceWatcher {
			t.Errorf("a heartbeat with source %q", u.Source)
		}
	}
}

// keys sends tmux key names (or literal words) to target.
func (s *tmuxServer) keys(target string, keys ...string) {
	s.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", s.sock, "send-keys", "-t", target}, keys...)...).CombinedOutput(); err != nil {
		s.t.Fatalf("tmux send-keys %v: %v: %s", keys, err, out)
	}
}
