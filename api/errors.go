package api

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

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
	// *FieldError naming the field (rules.ErrInvalid, the same value).
	ErrInvalid = rules.ErrInvalid
	// ErrForbidden: the rules or a cluster setting refuse the operation.
	ErrForbidden = errors.New("forbidden")
)

// FieldError says which field of a command, a message or a node's
// configuration is wrong and why (Field, Reason; Err where a cause is
// kept). It wraps ErrInvalid. It is rules.FieldError, maos's one field
// error, defined with the rules document below this package.
type FieldError = rules.FieldError

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
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// ForbiddenError is ErrForbidden worded by the rule that refuses: "interrupt:
// only roles master, orchestrator, supervisor may interrupt". As for a
// *NotFoundError, the API answers with these words alone.
type ForbiddenError struct {
	Reason string
}

func (e *ForbiddenError) Error() string { return e.Reason }

// Unwrap lets errors.Is(err, ErrForbidden) match.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// ConflictError is ErrConflict worded for the caller: what the state is
// and what to do ("task t1 is running, claimed by rita (fence 17) until
// …: wait for it to end or expire"). As for a *NotFoundError, the API
// answers with these words alone.
type ConflictError struct {
	Reason string
}

func (e *ConflictError) Error() string { return e.Reason }

// Unwrap lets errors.Is(err, ErrConflict) match.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrClusterVersion: the op needs a state-machine version the cluster has
// not committed yet (ClusterVersionError). 409 cluster_version: a refusal,
// nothing was proposed; the same request succeeds once every voter runs a
// build that applies the version and the leader committed it.
var ErrClusterVersion = errors.New("cluster version too low")

// ClusterVersionError refuses, before it is proposed, a write whose op
// needs state version Needs while the cluster runs Runs (< Needs): a node
// of an older build would not know how to apply it.
type ClusterVersionError struct {
	Op    Op
	Needs int
	Runs  int
}

func (e *ClusterVersionError) Error() string {
	return fmt.Sprintf("op %s needs cluster version %d; the cluster runs %d until every voter is upgraded", e.Op, e.Needs, e.Runs)
}

// Unwrap lets errors.Is(err, ErrClusterVersion) match.
func (e *ClusterVersionError) Unwrap() error { return ErrClusterVersion }

// Sentinel errors of the cluster layer, mapped to status codes on the wire.
var (
	// ErrNoLeader: no leader is known (an election is running, or there is
	// no quorum). 503.
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader: a forwarded request reached a node that is no longer the
	// leader. 503; the forwarding node retries elsewhere.
	ErrNotLeader = errors.New("not the leader")
	// ErrOutcomeUnknown: a write may or may not have committed (the leader
	// was lost mid-flight and retries ran out). 503; retrying with the same
	// id is safe.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrTooLarge: the request body is over the node's limit. 413.
	ErrTooLarge = errors.New("request body too large")
	// ErrBadRequest: the request is malformed (JSON, query parameters). 400.
	ErrBadRequest = errors.New("bad request")
	// ErrNotReady: the node cannot serve yet (no leader, catching up). 503.
	ErrNotReady = errors.New("not ready")
	// ErrUnauthorized: the request has no valid bearer token (missing,
	// malformed, unknown or revoked). 401 with WWW-Authenticate: Bearer.
	// (A valid token not allowed to do something is ErrForbidden, 403.)
	ErrUnauthorized = errors.New("unauthorized")
	// ErrRateLimited: the caller is over a rate or concurrency limit
	// (Limits). 429 with Retry-After; RetryAfter(err) reads it back.
	ErrRateLimited = errors.New("rate limited")
)

// Error codes of the wire body {"error":{"code","message"}}.
const (
	CodeBadRequest   = "bad_request"
	CodeInvalid      = "invalid"
	CodeUnknownField = "unknown_field"
	CodeTooLarge     = "too_large"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	// CodeFenced: 409, the caller acted as an agent under a lease fence
	// that is not the current one (FenceError); errors.Is matches
	// ErrFenced and ErrConflict.
	CodeFenced         = "fenced"
	CodeForbidden      = "forbidden"
	CodeNoLeader       = "no_leader"
	CodeNotLeader      = "not_leader"
	CodeOutcomeUnknown = "outcome_unknown"
	CodeNotReady       = "not_ready"
	CodeUnauthorized   = "unauthorized"
	CodeRateLimited    = "rate_limited"
	CodeSecretFound    = "secret_found"
	// CodeClusterVersion: 409, the op needs a higher cluster version
	// than the one committed (ClusterVersionError); nothing was proposed.
	CodeClusterVersion = "cluster_version"
	CodeInternal       = "internal"
)

// StatusOf is the HTTP status of an error code, and whether the code is
// one this build knows.
func StatusOf(code string) (int, bool) {
	c, ok := codes[code]
	return c.status, ok
}

// Codes lists every error code, sorted.
func Codes() []string { return slices.Sorted(maps.Keys(codes)) }

// codes maps each code to its status and the sentinel it matches.
var codes = map[string]struct {
	status   int
	sentinel error
}{
	CodeBadRequest:     {http.StatusBadRequest, ErrBadRequest},
	CodeUnknownField:   {http.StatusBadRequest, ErrBadRequest},
	CodeInvalid:        {http.StatusBadRequest, ErrInvalid},
	CodeTooLarge:       {http.StatusRequestEntityTooLarge, ErrTooLarge},
	CodeNotFound:       {http.StatusNotFound, ErrNotFound},
	CodeConflict:       {http.StatusConflict, ErrConflict},
	CodeFenced:         {http.StatusConflict, &FenceError{Reason: "fenced"}},
	CodeForbidden:      {http.StatusForbidden, ErrForbidden},
	CodeNoLeader:       {http.StatusServiceUnavailable, ErrNoLeader},
	CodeNotLeader:      {http.StatusServiceUnavailable, ErrNotLeader},
	CodeOutcomeUnknown: {http.StatusServiceUnavailable, ErrOutcomeUnknown},
	CodeNotReady:       {http.StatusServiceUnavailable, ErrNotReady},
	CodeUnauthorized:   {http.StatusUnauthorized, ErrUnauthorized},
	CodeRateLimited:    {http.StatusTooManyRequests, ErrRateLimited},
	CodeSecretFound:    {http.StatusUnprocessableEntity, ErrSecretFound},
	CodeClusterVersion: {http.StatusConflict, ErrClusterVersion},
	CodeInternal:       {http.StatusInternalServerError, nil},
}

// APIError is an error body received from (or sent by) a node.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter is the answer's Retry-After (a 429's, whole seconds); 0
	// when it had none.
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
}

// Unwrap returns the sentinel the code stands for, so errors.Is works
// across the wire: errors.Is(err, ErrConflict).
func (e *APIError) Unwrap() error { return codes[e.Code].sentinel }

// ErrorBody is the JSON envelope of every error response.
type ErrorBody struct {
	Error *APIError `json:"error"`
}

// ErrSecretFound: the request holds a secret and secret_guard is refuse.
// 422; the message names each field and rule, never the secret.
var ErrSecretFound = errors.New("secret found")

// ToAPIError classifies err for the wire: the status, code and message a
// node answers it with. An *APIError relayed from another node keeps its
// status and words (a code this build does not know is a 500); anything
// unclassified is 500 internal.
func ToAPIError(err error) *APIError {
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code != "" {
		// Relayed from the leader: keep its status and words.
		out := *apiErr
		if out.Status == 0 {
			// A code this build does not know has no status: 500, not a
			// panic in WriteHeader(0).
			out.Status = http.StatusInternalServerError
			if status, ok := StatusOf(out.Code); ok {
				out.Status = status
			}
		}
		return &out
	}
	code := CodeInternal
	var (
		fe  *FieldError
		nf  *NotFoundError
		fbe *ForbiddenError
		cfe *ConflictError
		qe  *QuotaError
		fce *FenceError
		cve *ClusterVersionError
	)
	switch {
	case errors.As(err, &cve):
		return &APIError{Status: http.StatusConflict, Code: CodeClusterVersion, Message: cve.Error()}
	case errors.As(err, &fce):
		return &APIError{Status: http.StatusConflict, Code: CodeFenced, Message: fce.Error()}
	case errors.As(err, &qe):
		// An artifact over its uploader's quota: the quota's words alone.
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: qe.Error()}
	case errors.As(err, &fe):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalid, Message: fe.Error()}
	case errors.As(err, &nf):
		return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: nf.Error()}
	case errors.As(err, &fbe):
		return &APIError{Status: http.StatusForbidden, Code: CodeForbidden, Message: fbe.Error()}
	case errors.As(err, &cfe):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: cfe.Error()}
	case errors.Is(err, ErrConflict):
		code = CodeConflict
	case errors.Is(err, ErrForbidden):
		code = CodeForbidden
	case errors.Is(err, ErrNotFound):
		code = CodeNotFound
	case errors.Is(err, ErrInvalid):
		code = CodeInvalid
	case errors.Is(err, ErrOutcomeUnknown):
		code = CodeOutcomeUnknown
	case errors.Is(err, ErrNotLeader):
		code = CodeNotLeader
	case errors.Is(err, ErrNoLeader):
		code = CodeNoLeader
	case errors.Is(err, ErrNotReady):
		code = CodeNotReady
	case errors.Is(err, ErrRateLimited):
		code = CodeRateLimited
	case errors.Is(err, ErrSecretFound):
		code = CodeSecretFound
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrQuota):
		code = CodeTooLarge
	case errors.Is(err, ErrBadRequest):
		code = CodeBadRequest
	case errors.Is(err, ErrUnauthorized):
		code = CodeUnauthorized
	}
	status, _ := StatusOf(code)
	return &APIError{Status: status, Code: code, Message: err.Error()}
}
