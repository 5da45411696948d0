package watcher

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
)

// Defaults of the pane detector (PaneDetector) of a tmux agent.
//
// Both coding-agent TUIs keep their input prompt on screen while they work
// and add a status line with an interrupt hint: Claude Code's spinner line
// ("✻ Thinking… (12s · esc to interrupt)") above its input box ("│ > " or
// "> " between rules), Codex's "Working (12s • Esc to interrupt)" above
// its composer ("› "). So the
// working marker is checked first and the prompt means idle only without
// it. These are the strings both CLIs print in a tmux pane; a version that
// words them otherwise is configured with idle_prompt and working_prompt.
const (
	// DefaultIdlePrompt matches a line that starts (after spaces or a box
	// border) with an input prompt character, > or ›, then the line's end
	// or text that does not start with a digit: a menu's cursor on "1.
	// Yes" (a permission dialog) is not the input prompt.
	DefaultIdlePrompt = `(?m)^[ \t│┃|]*[>›](\s*$|\s+[^\d\s])`
	// DefaultWorkingPrompt matches the interrupt hint both CLIs show only
	// while a turn runs.
	DefaultWorkingPrompt = `(?i)esc to interrupt`
	// PaneLines is how many of the pane's last non-blank lines the
	// detector reads: the prompt and the status line sit at the bottom,
	// and an old status line scrolled further up must not count.
	PaneLines = 12
	// DefaultPanePoll is how often a tmux agent's watcher reads its pane.
	DefaultPanePoll = time.Second
)

// PaneDetector decides from a pane's text whether the agent in it is
// idle: Working is checked first over the last Lines non-blank lines,
// then Idle. The zero value detects nothing; AgentConfig.PaneDetector
// gives an agent's.
type PaneDetector struct {
	Idle    *regexp.Regexp
	Working *regexp.Regexp
	Lines   int // <= 0: PaneLines
}

// Detect returns api.SubstateWorking when screen's last lines match
// Working, api.SubstateIdle when they match Idle, and "" when
// neither does (a shell, a dialog, a pane the agent left): not knowing is
// not idle.
func (d PaneDetector) Detect(screen string) string {
	n := d.Lines
	if n <= 0 {
		n = PaneLines
	}
	var last []string
	lines := strings.Split(screen, "\n")
	for i := len(lines) - 1; i >= 0 && len(last) < n; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			last = append(last, lines[i])
		}
	}
	// Back in screen order, so a multi-line pattern reads as shown.
	for i, j := 0, len(last)-1; i < j; i, j = i+1, j-1 {
		last[i], last[j] = last[j], last[i]
	}
	text := strings.Join(last, "\n")
	switch {
	case d.Working != nil && d.Working.MatchString(text):
		return api.SubstateWorking
	case d.Idle != nil && d.Idle.MatchString(text):
		return api.SubstateIdle
	}
	return ""
}

// PaneState tells whether the agent in a pane is idle: what a delivery
// policy asks before it types into the pane. PaneSubstate returns
// api.SubstateIdle, api.SubstateWorking, or "" when it cannot
// tell; the error is tmux's (no server, no such pane) or ctx's.
type PaneState interface {
	PaneSubstate(ctx context.Context) (string, error)
}

// PaneProbe is the PaneState of one tmux pane: it captures the visible
// pane and asks the detector.
type PaneProbe struct {
	Tmux     Tmux
	Target   string // SESSION:WINDOW.PANE
	Detector PaneDetector
}

// PaneSubstate captures the pane (tmux capture-pane -p -J) and returns
// what the detector makes of it.
func (p PaneProbe) PaneSubstate(ctx context.Context) (string, error) {
	screen, err := p.Tmux.screen(ctx, p.Target)
	if err != nil {
		return "", fmt.Errorf("watcher: read pane %q: %w", p.Target, err)
	}
	return p.Detector.Detect(screen), nil
}

// paneLoop reads the agent's pane every opts.PanePoll and, when what the
// detector says changes, records it (pane, read by busy) and wakes the
// heartbeat to publish it. Each round also reads what the agent's hook
// reported (readHook), for delivery (queue.go). A pane it cannot read counts as "" (not
// known); the error is logged when it first appears or changes.
func (w *agentWatcher) paneLoop(ctx context.Context, probe PaneState) {
	t := time.NewTicker(w.opts.PanePoll)
	defer t.Stop()
	var lastErr string
	for {
		w.mu.Lock()
		w.started++
		w.mu.Unlock()
		sub, err := probe.PaneSubstate(ctx)
		if ctx.Err() != nil {
			return
		}
		if msg := errString(err); msg != lastErr {
			if err != nil {
				w.log.Warn("watcher: cannot read the agent's pane; its substate comes from the watcher alone", "target", w.cfg.TmuxTarget, "err", err)
			}
			lastErr = msg
		}
		w.readHook(ctx)
		w.mu.Lock()
		changed := w.pane != sub
		w.pane = sub
		w.reads++
		w.mu.Unlock()
		if changed {
			w.wakeHeartbeat()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
