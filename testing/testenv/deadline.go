package testenv

import (
	"context"
	"testing"
	"time"
)

// NoDeadline is how long a hang guard waits when the test binary has no
// deadline (go test -timeout 0): generous, since it only ends a test that
// would otherwise hang.
const NoDeadline = 10 * time.Minute

// Deadline is when a hang guard in t gives up: the test binary's deadline
// (-timeout) less a tenth of the time left until it, so the test fails
// saying what hung before the binary panics; NoDeadline from now without
// one.
// A guard that only fails a hung test waits this long, never a fixed
// number of seconds a slow machine could exceed in a test that would
// have passed.
func Deadline(t testing.TB) time.Time {
	t.Helper()
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			return d.Add(-time.Until(d) / 10)
		}
	}
	return time.Now().Add(NoDeadline)
}

// Context is a context that ends at Deadline(t), for a hang guard around
// a call that takes one; cancel releases it (t's cleanup does too). Its
// parent is not t.Context(), so the test's cleanups may still use it.
func Context(t testing.TB) (context.Context, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), Deadline(t))
	t.Cleanup(cancel)
	return ctx, cancel
}
