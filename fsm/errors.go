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

func notFound(format string, args ...any) error {
	return &api.NotFoundError{What: fmt.Sprintf(format, args...)}
}

// MessageNotFound is the *NotFoundError for message id: not stored, or
// trimmed. transport answers the same for a message the reader may not
// read, so the answer does not tell that it exists.
func MessageNotFound(id string) error { return notFound("message %s", id) }

// ThreadNotFound is the *NotFoundError for id that is neither a thread
// nor a stored message (or one the reader may not read, as above).
func ThreadNotFound(id string) error { return notFound("thread %s", id) }

func conflict(format string, args ...any) error {
	return &api.ConflictError{Reason: fmt.Sprintf(format, args...)}
}
