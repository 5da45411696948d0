package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
)

// Outcome is what a caller knows of a write after one attempt: the one
// answer to "might it have committed, may I retry?" that maosctl,
// forwarding between nodes, the test harness, the chaos workload and bench
// share (Classify).
type Outcome int

// The outcomes of an attempt.
const (
	// Succeeded: the attempt returned no error.
	Succeeded Outcome = iota
	// Refused: a definite answer that nothing was committed and the same
	// request would be refused again: a 4xx answer (bad input, not found,
	// conflict, forbidden, too large, rate limited, an op the cluster's
	// version does not allow yet) or a refusal a caller holds as a value
	// (ErrInvalid, ErrNotFound, ErrConflict, ErrForbidden,
	// ErrClusterVersion).
	Refused
	// NotCommitted: nothing was committed, and another attempt (here or
	// at another node) may succeed: no leader, not the leader, not ready,
	// or a connection that was never made.
	NotCommitted
	// MaybeCommitted: the write may have reached the log (outcome
	// unknown, any other 5xx, a timeout, a connection lost mid-request).
	// Retry with the same id: writes are idempotent by id.
	MaybeCommitted
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Refused:
		return "refused"
	case NotCommitted:
		return "not committed"
	case MaybeCommitted:
		return "maybe committed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Retry reports whether another attempt may change the answer (it never
// duplicates a write that carries its id).
func (o Outcome) Retry() bool { return o == NotCommitted || o == MaybeCommitted }

// Classify says what err, the error of one attempt at a write (nil for
// success), tells of its outcome. An *APIError is judged by its code, then
// its status (4xx refused, 5xx or none: maybe committed); a sentinel of
// this package by its meaning; a network error by whether the request can
// have left (a dial that failed: not committed; anything later: maybe).
func Classify(err error) Outcome {
	if err == nil {
		return Succeeded
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case CodeNoLeader, CodeNotLeader, CodeNotReady:
			return NotCommitted
		case CodeOutcomeUnknown:
			return MaybeCommitted
		}
		if apiErr.Status >= 500 || apiErr.Status == 0 {
			return MaybeCommitted
		}
		return Refused
	}
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return MaybeCommitted
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrNotLeader), errors.Is(err, ErrNotReady):
		return NotCommitted
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict),
		errors.Is(err, ErrForbidden), errors.Is(err, ErrTooLarge), errors.Is(err, ErrBadRequest),
		errors.Is(err, ErrClusterVersion): // refused before it was proposed
		return Refused
	}
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial") {
		return NotCommitted // nothing was sent
	}
	return MaybeCommitted
}

// ErrorKind is a short label for err, for counting failures by kind in
// reports (bench, the harness, the chaos suite): the API's error code
// ("no_leader", "outcome_unknown", ...; "http_NNN" for an answer without
// one), "timeout", "refused" (connection refused), "reset", "eof",
// "network" or "other"; "none" for nil.
func ErrorKind(err error) string {
	var apiErr *APIError
	var ne net.Error
	switch {
	case err == nil:
		return "none"
	case errors.As(err, &apiErr):
		if apiErr.Code != "" {
			return apiErr.Code
		}
		return fmt.Sprintf("http_%d", apiErr.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.As(err, &ne):
		if ne.Timeout() {
			return "timeout"
		}
		return "network"
	}
	// Errors that lost their chain on the way (formatted with %v).
	switch s := err.Error(); {
	case strings.Contains(s, "connection refused"):
		return "refused"
	case strings.Contains(s, "connection reset"), strings.Contains(s, "broken pipe"):
		return "reset"
	case strings.Contains(s, "EOF"):
		return "eof"
	case strings.Contains(s, "timeout"), strings.Contains(s, "deadline"):
		return "timeout"
	}
	return "other"
}
