package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"
)

// One table for every caller that decides whether a write may have
// committed and whether to try again (maosctl, forwarding, the harness,
// the chaos workload, bench): the cases each used to decide on its own.
func TestClassifyAndErrorKind(t *testing.T) {
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name string
		err  error
		want Outcome
		kind string
	}{
		{"success", nil, Succeeded, "none"},
		{"no leader", &APIError{Status: 503, Code: CodeNoLeader}, NotCommitted, "no_leader"},
		{"not leader", &APIError{Status: 503, Code: CodeNotLeader}, NotCommitted, "not_leader"},
		{"not ready", &APIError{Status: 503, Code: CodeNotReady}, NotCommitted, "not_ready"},
		{"outcome unknown", &APIError{Status: 503, Code: CodeOutcomeUnknown}, MaybeCommitted, "outcome_unknown"},
		{"internal", &APIError{Status: 500, Code: CodeInternal}, MaybeCommitted, "internal"},
		{"a 502 without a code", fmt.Errorf("wrapped: %w", &APIError{Status: 502}), MaybeCommitted, "http_502"},
		{"an answer without a status", &APIError{Code: "brand_new"}, MaybeCommitted, "brand_new"},
		{"conflict, wrapped", fmt.Errorf("via n1: %w", &APIError{Status: 409, Code: CodeConflict}), Refused, "conflict"},
		{"invalid", &APIError{Status: 400, Code: CodeInvalid}, Refused, "invalid"},
		{"not found", &APIError{Status: 404, Code: CodeNotFound}, Refused, "not_found"},
		{"an op the cluster's version refuses", &APIError{Status: 409, Code: CodeClusterVersion}, Refused, "cluster_version"},
		{"an op the cluster's version refuses, held as a value", fmt.Errorf("x: %w", &ClusterVersionError{Op: "send", Needs: 2, Runs: 1}), Refused, "other"},
		{"a field error held as a value", FieldErrorf("to", "empty"), Refused, "other"},
		{"a conflict held as a value", fmt.Errorf("x: %w", ErrConflict), Refused, "other"},
		{"no leader known", ErrNoLeader, NotCommitted, "other"},
		{"outcome unknown held as a value", fmt.Errorf("%w: gave up", ErrOutcomeUnknown), MaybeCommitted, "other"},
		{"dial refused", dialRefused, NotCommitted, "refused"},
		{"dial refused in a url error", &url.Error{Op: "Post", URL: "http://x", Err: dialRefused}, NotCommitted, "refused"},
		{"refused, as text only", errors.New("dial tcp 127.0.0.1:5: connect: connection refused"), MaybeCommitted, "refused"},
		{"deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), MaybeCommitted, "timeout"},
		{"connection lost mid-request", &url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNRESET}, MaybeCommitted, "reset"},
		{"EOF, as text", errors.New(`Post "http://x": EOF`), MaybeCommitted, "eof"},
		{"read error", &net.OpError{Op: "read", Err: errors.New("reset")}, MaybeCommitted, "network"},
		{"anything else", errors.New("boom"), MaybeCommitted, "other"},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if got := ErrorKind(tc.err); got != tc.kind {
			t.Errorf("%s: ErrorKind(%v) = %q, want %q", tc.name, tc.err, got, tc.kind)
		}
	}
	for o, retry := range map[Outcome]bool{Succeeded: false, Refused: false, NotCommitted: true, MaybeCommitted: true} {
		if o.Retry() != retry {
			t.Errorf("%v.Retry() = %v, want %v", o, o.Retry(), retry)
		}
	}
}
