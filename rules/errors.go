package rules

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every *FieldError: here, a document that
	// parses but breaks a rule of the format; as api.ErrInvalid (the same
	// value), any command or setting that fails its check.
	ErrInvalid = errors.New("invalid")
	// ErrMalformed is wrapped by the errors of input that is not one
	// document: empty, not JSON or YAML, several YAML documents, trailing
	// data after the JSON.
	ErrMalformed = errors.New("malformed rules document")
)

// FieldError names the field that is wrong and says why, with the limit
// where there is one: here a rules document's field by its path
// ("agents[2].can_send_to[0]"). It is maos's one field error: package api
// names it api.FieldError for every command, message and node setting
// (it lives here, in the pure package at the bottom, because api imports
// rules). It wraps ErrInvalid, and Err where a cause is kept.
type FieldError struct {
	Field  string // the path or JSON name: "forbidden[1].reason", "content.text"; a Go field name for a cluster.Config
	Reason string // what is wrong: "1025 bytes, at most 1024"; "" says Err's text
	// Err is the cause where one is kept (a *hostport.Error for an
	// address), for errors.Is and errors.As; nil for most.
	Err error
}

func (e *FieldError) Error() string {
	reason := e.Reason
	if reason == "" && e.Err != nil {
		reason = e.Err.Error()
	}
	return e.Field + ": " + reason
}

// Unwrap lets errors.Is(err, ErrInvalid) match, and errors.Is and
// errors.As reach Err.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

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
