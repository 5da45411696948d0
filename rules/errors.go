package rules

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every *FieldError: the document parses but
	// breaks a rule of the format.
	ErrInvalid = errors.New("invalid rules document")
	// ErrMalformed is wrapped by the errors of input that is not one
	// document: empty, not JSON or YAML, several YAML documents, trailing
	// data after the JSON.
	ErrMalformed = errors.New("malformed rules document")
)

// FieldError names the field of the document that breaks a rule by its
// path ("agents[2].can_send_to[0]") and says why, with the limit where
// there is one. It wraps ErrInvalid.
type FieldError struct {
	Field  string // the path: "forbidden[1].reason", "allowed_interactions.dev"
	Reason string // what is wrong: "1025 bytes, at most 1024"
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// malformedError is input that is not one document. Its text is the
// problem alone ("malformed YAML: ..."), so a caller can put it in its own
// words (transport prefixes "bad request: ").
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

// Unwrap lets errors.Is(err, ErrMalformed) match.
func (e *malformedError) Unwrap() error { return ErrMalformed }

func malformed(format string, args ...any) error {
	return &malformedError{msg: fmt.Sprintf(format, args...)}
}
