package fsm

import (
	"errors"
	"fmt"

	"github.com/maos-project/maos/api"
)

// The state's own errors: storage, not the vocabulary (api's sentinels).
var (
	// ErrClosed: the state was closed.
	ErrClosed = errors.New("fsm: closed")
	// ErrCorrupt: a bbolt file is damaged (truncated, pages overwritten,
	// both meta pages invalid); wrapped by a *CorruptError naming the file.
	ErrCorrupt = errors.New("damaged file")
)

// NotFoundError is ErrNotFound worded for whoever asked: "message
// msg-x: not found". The API answers with these words alone, not with the
// context wrapped around them on the way (as it does for a *FieldError),
// so no client shows a package or an operation's name.
type NotFoundError struct {
	What string // what is missing, and why if it helps: "message msg-x", `no lock on "a.go" (released, or never granted)`
	// Hint, when set, follows: what to do ("register the agent, …").
	Hint string
}

func (e *NotFoundError) Error() string {
	if e.Hint != "" {
		return e.What + ": not found; " + e.Hint
	}
	return e.What + ": not found"
}

// Unwrap lets errors.Is(err, ErrNotFound) match.
func (e *NotFoundError) Unwrap() error { return api.ErrNotFound }

func notFound(format string, args ...any) error {
	return &NotFoundError{What: fmt.Sprintf(format, args...)}
}

// MessageNotFound is the *NotFoundError for message id: not stored, or
// trimmed. transport answers the same for a message the reader may not
// read, so the answer does not tell that it exists.
func MessageNotFound(id string) error { return notFound("message %s", id) }

// ThreadNotFound is the *NotFoundError for id that is neither a thread
// nor a stored message (or one the reader may not read, as above).
func ThreadNotFound(id string) error { return notFound("thread %s", id) }

// ForbiddenError is ErrForbidden worded by the rule that refuses: "interrupt:
// only roles master, orchestrator, supervisor may interrupt". As for a
// *NotFoundError, the API answers with these words alone.
type ForbiddenError struct {
	Reason string
}

func (e *ForbiddenError) Error() string { return e.Reason }

// Unwrap lets errors.Is(err, ErrForbidden) match.
func (e *ForbiddenError) Unwrap() error { return api.ErrForbidden }

// ConflictError is ErrConflict worded for the caller: what the state is
// and what to do ("task t1 is running, claimed by rita (fence 17) until
// …: wait for it to end or expire"). As for a *NotFoundError, the API
// answers with these words alone.
type ConflictError struct {
	Reason string
}

func (e *ConflictError) Error() string { return e.Reason }

// Unwrap lets errors.Is(err, ErrConflict) match.
func (e *ConflictError) Unwrap() error { return api.ErrConflict }

func conflict(format string, args ...any) error {
	return &ConflictError{Reason: fmt.Sprintf(format, args...)}
}
