package api

import (
	"errors"
	"fmt"

	"github.com/maos-project/maos/rules"
)

// Sentinel errors that callers branch on. Errors returned by apply and by the
// queries wrap one of these where one applies.
var (
	// ErrNotFound: no message (or node) with that key.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a send reused an id that is stored with other content,
	// or a task command does not fit the task's state (*ConflictError).
	ErrConflict = errors.New("id already used with other content")
	// ErrInvalid: a command or message failed validation; wrapped by a
	// *FieldError naming the field.
	ErrInvalid = errors.New("invalid")
	// ErrForbidden: the rules or a cluster setting refuse the operation.
	ErrForbidden = errors.New("forbidden")
)

// FieldError says which field of a message is wrong and why. It wraps
// ErrInvalid.
type FieldError struct {
	Field  string // JSON name, dotted for nested fields: "content.text"
	Reason string // what is wrong and, where there is one, the limit
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// FieldErrorf is a *FieldError for field with a formatted reason.
func FieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// NamePattern is the rule for agent ids, roles, channels, types, tags and
// node ids (ValidName), as messages quote it.
const NamePattern = rules.NamePattern

// NameRule is the reason a value is not a name, for any error that says
// so: `must match ^[a-z0-9][a-z0-9._-]{0,63}$ (got "Alice")`. A value longer
// than MaxNameLen bytes is quoted cut to MaxNameLen bytes and "…".
func NameRule(value string) string {
	if len(value) > MaxNameLen {
		value = TruncateUTF8(value, MaxNameLen) + "…"
	}
	return fmt.Sprintf("must match %s (got %q)", NamePattern, value)
}

// CheckNames checks a list field of names: at most max entries ("FIELD: 70
// NOUN, at most 64"), each a ValidName ("FIELD[i]: must match ..."). The
// error is a *FieldError.
func CheckNames(field string, names []string, max int, noun string) error {
	if len(names) > max {
		return FieldErrorf(field, "%d %s, at most %d", len(names), noun, max)
	}
	for i, n := range names {
		if !ValidName(n) {
			return NameError(fmt.Sprintf("%s[%d]", field, i), n)
		}
	}
	return nil
}

// NameError is the *FieldError (wrapping ErrInvalid) for field whose value
// is not a ValidName: `FIELD: must match ^…$ (got "VALUE")`.
func NameError(field, value string) error {
	return &FieldError{Field: field, Reason: NameRule(value)}
}
