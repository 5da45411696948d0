package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Defaults of tmux delivery.
const (
	// TmuxDefaultAttempts is how many times Deliver types a message before
	// it gives up.
	TmuxDefaultAttempts = 3
	// TmuxDefaultConfirm bounds each wait for the pane to show the typed
	// text, and then for the text to leave the input line.
	TmuxDefaultConfirm = 3 * time.Second
	// tmuxPoll is the pause between two captures of the pane while
	// confirming.
	tmuxPoll = 50 * time.Millisecond
	// tmuxProbeRunes is how many trailing characters of the text Deliver
	// looks for on the screen.
	tmuxProbeRunes = 16
)

// ErrTmuxUnconfirmed is matched (errors.Is) by the error of a delivery
// that tmux accepted but that the pane never showed as submitted: the
// text may be lost, so it is not reported as delivered.
var ErrTmuxUnconfirmed = errors.New("delivery not confirmed")

// Tmux types messages into the panes of interactive agents (delivery:
// tmux) and interrupts them, through the tmux command line.
//
// The zero value uses the default tmux server of the user and the
// defaults above. Socket (tmux -S PATH) or, if Socket is "", Name (tmux -L
// NAME) selects another server.
type Tmux struct {
	Socket   string        // path of the server's socket (tmux -S); "" = none
	Name     string        // socket name (tmux -L) when Socket is ""
	Attempts int           // tries per message; <= 0: TmuxDefaultAttempts
	Confirm  time.Duration // bound of each confirmation wait; <= 0: TmuxDefaultConfirm
	Binary   string        // tmux executable; "" = "tmux" from $PATH
}

// DeliverTmux is Tmux{}.Deliver: it types text into target on the default
// tmux server.
func DeliverTmux(ctx context.Context, target, text string) error {
	return Tmux{}.Deliver(ctx, target, text)
}

// InterruptTmux is Tmux{}.Interrupt: it sends ESC to target on the default
// tmux server.
func InterruptTmux(ctx context.Context, target string) error {
	return Tmux{}.Interrupt(ctx, target)
}

// TmuxLine turns a message's text into the single line Deliver types:
// every line break, tab or other control character becomes a space (a
// newline typed into an interactive CLI would submit the first line on its
// own, a tab would trigger completion, an ESC would interrupt the agent),
// and spaces at both ends are trimmed.
func TmuxLine(text string) string {
	text = strings.ReplaceAll(text, "\r\n", " ")
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, text)
	return strings.TrimSpace(text)
}

// Deliver types text into the pane target (SESSION:WINDOW.PANE, or any
// tmux target-pane) and submits it, as a person at the keyboard would:
//
//  1. clear the input line (C-u), so that text typed there before does not
//     prefix the message;
//  2. type the text literally (send-keys -l) as one line (see TmuxLine:
//     line breaks become spaces, so a multi-line message is submitted
//     once, whole);
//  3. wait until the pane shows it (capture-pane), which proves the
//     program in the pane echoes what is typed;
//  4. submit with a literal carriage return (send-keys -l "\r"; the named
//     Enter key does nothing on some tmux versions);
//  5. wait until the text has left the input line: the cursor's line no
//     longer shows what it showed after step 2.
//
// If step 3 or 5 times out (t.Confirm each) the whole sequence is tried
// again, up to t.Attempts times; C-u at the next try clears a message
// still sitting unsubmitted in the input line. After the last try Deliver
// returns an error matching ErrTmuxUnconfirmed: a delivery that cannot be
// confirmed is never reported as delivered. (A program that submits a
// message later than t.Confirm may then get it twice.)
//
// An error of tmux itself (no server, no such pane) is returned at once
// and names the target and what tmux said; so is an empty text and ctx's
// error.
func (t Tmux) Deliver(ctx context.Context, target, text string) error {
	line := TmuxLine(text)
	if target == "" {
		return errors.New("watcher: tmux deliver: empty target")
	}
	if line == "" {
		return fmt.Errorf("watcher: tmux deliver to %q: empty text", target)
	}
	attempts := t.Attempts
	if attempts <= 0 {
		attempts = TmuxDefaultAttempts
	}
	var last error
	for i := 0; i < attempts; i++ {
		err := t.deliverOnce(ctx, target, line)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrTmuxUnconfirmed) || ctx.Err() != nil {
			return fmt.Errorf("watcher: tmux deliver to %q: %w", target, err)
		}
		last = err
	}
	return fmt.Errorf("watcher: tmux deliver to %q: %d attempts: %w", target, attempts, last)
}

func (t Tmux) deliverOnce(ctx context.Context, target, line string) error {
	probe := tmuxProbe(line)
	if _, err := t.run(ctx, "send-keys", "-t", target, "C-u"); err != nil {
		return err
	}
	before, err := t.screen(ctx, target)
	if err != nil {
		return err
	}
	baseline := strings.Count(before, probe)
	if _, err := t.run(ctx, "send-keys", "-l", "-t", target, "--", tmuxLiteral(line)); err != nil {
		return err
	}
	// The text must show before it is submitted: a pane that does not
	// echo what is typed cannot confirm anything.
	var typedY int
	var typedRow string
	shown, err := t.poll(ctx, func() (bool, error) {
		s, err := t.screen(ctx, target)
		if err != nil || strings.Count(s, probe) <= baseline {
			return false, err
		}
		typedY, typedRow, err = t.cursorRow(ctx, target)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	if !shown {
		return fmt.Errorf("%w: the typed text never showed in the pane within %s", ErrTmuxUnconfirmed, t.confirm())
	}
	if _, err := t.run(ctx, "send-keys", "-l", "-t", target, "\r"); err != nil {
		return err
	}
	left, err := t.poll(ctx, func() (bool, error) {
		y, row, err := t.cursorRow(ctx, target)
		if err != nil {
			return false, err
		}
		return y != typedY || (row != typedRow && !strings.Contains(row, tmuxTail(typedRow, probe))), nil
	})
	if err != nil {
		return err
	}
	if !left {
		return fmt.Errorf("%w: the text was still on the input line %s after the carriage return", ErrTmuxUnconfirmed, t.confirm())
	}
	return nil
}

// Interrupt sends ESC to the pane target (SESSION:WINDOW.PANE): what an
// interactive agent CLI takes as "stop what you are doing". The error
// names the target and what tmux said.
func (t Tmux) Interrupt(ctx context.Context, target string) error {
	return t.InterruptWith(ctx, target, DefaultInterruptKey)
}

// InterruptWith is Interrupt with another key: a tmux key name (send-keys
// without -l), such as Escape or C-c.
func (t Tmux) InterruptWith(ctx context.Context, target, key string) error {
	if target == "" {
		return errors.New("watcher: tmux interrupt: empty target")
	}
	if _, err := t.run(ctx, "send-keys", "-t", target, key); err != nil {
		return fmt.Errorf("watcher: tmux interrupt %q: %w", target, err)
	}
	return nil
}

func (t Tmux) confirm() time.Duration {
	if t.Confirm <= 0 {
		return TmuxDefaultConfirm
	}
	return t.Confirm
}

// poll calls f every tmuxPoll until it reports true or an error, or
// t.confirm() passes (false, nil).
func (t Tmux) poll(ctx context.Context, f func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(t.confirm())
	for {
		ok, err := f()
		if ok || err != nil {
			return ok, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		timer := time.NewTimer(tmuxPoll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false, ctx.Err()
		case <-timer.C:
		}
	}
}

// screen is the visible pane, wrapped lines joined (so that a probe
// split by the wrap is still found).
func (t Tmux) screen(ctx context.Context, target string) (string, error) {
	return t.run(ctx, "capture-pane", "-p", "-J", "-t", target)
}

// cursorRow is the cursor's row in the pane and that row's text.
func (t Tmux) cursorRow(ctx context.Context, target string) (int, string, error) {
	out, err := t.run(ctx, "display-message", "-p", "-t", target, "#{cursor_y}")
	if err != nil {
		return 0, "", err
	}
	y, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, "", fmt.Errorf("tmux display-message: cursor_y %q: %w", strings.TrimSpace(out), err)
	}
	row, err := t.run(ctx, "capture-pane", "-p", "-t", target, "-S", strconv.Itoa(y), "-E", strconv.Itoa(y))
	if err != nil {
		return 0, "", err
	}
	return y, strings.TrimRight(row, " \n"), nil
}

// run runs one tmux command; its error carries what tmux printed.
func (t Tmux) run(ctx context.Context, args ...string) (string, error) {
	bin := t.Binary
	if bin == "" {
		bin = "tmux"
	}
	var global []string
	switch {
	case t.Socket != "":
		global = []string{"-S", t.Socket}
	case t.Name != "":
		global = []string{"-L", t.Name}
	}
	cmd := exec.CommandContext(ctx, bin, append(global, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("tmux %s: %w", args[0], ctx.Err())
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("tmux %s: %s (%w)", args[0], msg, err)
		}
		return "", fmt.Errorf("tmux %s: %w", args[0], err)
	}
	return stdout.String(), nil
}

// tmuxProbe is the end of line that Deliver looks for on the screen.
func tmuxProbe(line string) string {
	r := []rune(line)
	if len(r) > tmuxProbeRunes {
		r = r[len(r)-tmuxProbeRunes:]
	}
	return string(r)
}

// tmuxTail is the longest end of probe (at least one character) that row
// shows: the part of the text that was visible on the cursor's row once
// typed (the rest may have wrapped onto the row above).
func tmuxTail(row, probe string) string {
	r := []rune(probe)
	for i := 0; i < len(r)-1; i++ {
		if strings.Contains(row, string(r[i:])) {
			return string(r[i:])
		}
	}
	return string(r[len(r)-1:])
}

// tmuxLiteral escapes what tmux's argument parser would not pass on
// literally: an argument ending in ";" ends a tmux command (the ";" is
// dropped) unless the ";" is written "\;".
func tmuxLiteral(s string) string {
	if strings.HasSuffix(s, ";") {
		return s[:len(s)-1] + `\;`
	}
	return s
}
