package maosctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// following is a command that runs until Ctrl-C (tail -f, mirror -f,
// audit -f, watch), started in the background against the test's node.
type following struct {
	t           *testing.T
	what        string
	out, errOut syncBuffer
	ctx         context.Context
	cancel      context.CancelFunc
	done        chan error
}

// follow starts maosctl --addr ADDR args... in the background, until the
// test's deadline at most; stop ends it.
func (e *testEnv) follow(args ...string) *following {
	e.t.Helper()
	f := &following{t: e.t, what: strings.Join(args, " "), done: make(chan error, 1)}
	f.ctx, f.cancel = testenv.Context(e.t)
	app := App()
	app.Writer, app.ErrWriter = &f.out, &f.errOut
	go func() { f.done <- app.RunContext(f.ctx, append([]string{"maosctl", "--addr", e.addr}, args...)) }()
	return f
}

// waitUntil polls until cond holds; the command ending first, or the
// test's deadline, fails the test with what it printed.
func (f *following) waitUntil(cond func() bool) {
	f.t.Helper()
	for !cond() {
		select {
		case err := <-f.done:
			f.t.Fatalf("maosctl %s ended (%v): %q, stderr %q", f.what, err, f.out.String(), f.errOut.String())
		case <-f.ctx.Done():
			f.t.Fatalf("maosctl %s: timed out waiting; printed %q, stderr %q", f.what, f.out.String(), f.errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitFor waits until stdout holds s.
func (f *following) waitFor(s string) {
	f.t.Helper()
	f.waitUntil(func() bool { return strings.Contains(f.out.String(), s) })
}

// stop ends the command as Ctrl-C does and fails the test unless it exits
// cleanly (by the test's deadline).
func (f *following) stop() {
	f.t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Fatalf("maosctl %s after Ctrl-C: %v (stderr %q)", f.what, err, f.errOut.String())
		}
	case <-time.After(time.Until(testenv.Deadline(f.t))):
		f.t.Fatalf("maosctl %s did not stop when its context ended", f.what)
	}
}
