package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often the harness re-checks a condition it waits
// for.
const PollInterval = 25 * time.Millisecond

// ErrTimeout is wrapped by every error of a wait that ran out of time.
var ErrTimeout = errors.New("timed out")

// WaitFor calls cond every PollInterval until it returns nil, and returns
// nil then; a cond error wrapped by Permanent ends the wait at once. After timeout it returns an error wrapping ErrTimeout that
// names what (a phrase: "a leader", "n2 to be ready") and quotes the last
// error cond returned, so a failure says what was seen, not only that
// time passed. cond is called at least once.
func WaitFor(timeout time.Duration, what string, cond func() error) error {
	return WaitForCtx(context.Background(), timeout, what, cond)
}

// WaitForCtx is WaitFor that also gives up when ctx ends.
func WaitForCtx(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	start := time.Now()
	deadline := start.Add(timeout)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for polls := 1; ; polls++ {
		err := cond()
		if err == nil {
			return nil
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("harness: gave up waiting for %s: %w", what, perm.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: %w after %s (%d polls) waiting for %s; last: %v",
				ErrTimeout, time.Since(start).Round(time.Millisecond), polls, what, err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("harness: gave up waiting for %s: %w; last: %v", what, ctx.Err(), err)
		}
	}
}

// Permanent wraps err so that WaitFor stops at once and returns it instead
// of polling on: the condition can no longer become true.
func Permanent(err error) error { return &permanentError{err: err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// NoErr fails the test at once if err is not nil. Call it from the test's
// goroutine only.
func NoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
