package transport

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

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
	// (A valid token not allowed to do something is api.ErrForbidden, 403.)
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
	// that is not the current one (api.FenceError); errors.Is matches
	// api.ErrFenced and api.ErrConflict.
	CodeFenced         = "fenced"
	CodeForbidden      = "forbidden"
	CodeNoLeader       = "no_leader"
	CodeNotLeader      = "not_leader"
	CodeOutcomeUnknown = "outcome_unknown"
	CodeNotReady       = "not_ready"
	CodeUnauthorized   = "unauthorized"
	CodeRateLimited    = "rate_limited"
	CodeSecretFound    = "secret_found"
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
	CodeInvalid:        {http.StatusBadRequest, api.ErrInvalid},
	CodeTooLarge:       {http.StatusRequestEntityTooLarge, ErrTooLarge},
	CodeNotFound:       {http.StatusNotFound, api.ErrNotFound},
	CodeConflict:       {http.StatusConflict, api.ErrConflict},
	CodeFenced:         {http.StatusConflict, &api.FenceError{Reason: "fenced"}},
	CodeForbidden:      {http.StatusForbidden, api.ErrForbidden},
	CodeNoLeader:       {http.StatusServiceUnavailable, ErrNoLeader},
	CodeNotLeader:      {http.StatusServiceUnavailable, ErrNotLeader},
	CodeOutcomeUnknown: {http.StatusServiceUnavailable, ErrOutcomeUnknown},
	CodeNotReady:       {http.StatusServiceUnavailable, ErrNotReady},
	CodeUnauthorized:   {http.StatusUnauthorized, ErrUnauthorized},
	CodeRateLimited:    {http.StatusTooManyRequests, ErrRateLimited},
	CodeSecretFound:    {http.StatusUnprocessableEntity, ErrSecretFound},
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
// across the wire: errors.Is(err, api.ErrConflict).
func (e *APIError) Unwrap() error { return codes[e.Code].sentinel }

// ErrorBody is the JSON envelope of every error response.
type ErrorBody struct {
	Error *APIError `json:"error"`
}

// toAPIError classifies err for the wire.
func toAPIError(err error) *APIError {
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
		fe  *api.FieldError
		rfe *rules.FieldError
		nf  *api.NotFoundError
		fbe *api.ForbiddenError
		cfe *api.ConflictError
		qe  *api.QuotaError
		fce *api.FenceError
	)
	switch {
	case errors.As(err, &fce):
		return &APIError{Status: http.StatusConflict, Code: CodeFenced, Message: fce.Error()}
	case errors.As(err, &qe):
		// An artifact over its uploader's quota: the quota's words alone.
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: qe.Error()}
	case errors.As(err, &fe):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalid, Message: fe.Error()}
	case errors.As(err, &rfe):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalid, Message: rfe.Error()}
	case errors.As(err, &nf):
		return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: nf.Error()}
	case errors.As(err, &fbe):
		return &APIError{Status: http.StatusForbidden, Code: CodeForbidden, Message: fbe.Error()}
	case errors.As(err, &cfe):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: cfe.Error()}
	case errors.Is(err, api.ErrConflict):
		code = CodeConflict
	case errors.Is(err, api.ErrForbidden):
		code = CodeForbidden
	case errors.Is(err, api.ErrNotFound):
		code = CodeNotFound
	case errors.Is(err, api.ErrInvalid):
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
	case errors.Is(err, ErrTooLarge), errors.Is(err, api.ErrQuota):
		code = CodeTooLarge
	case errors.Is(err, ErrBadRequest):
		code = CodeBadRequest
	case errors.Is(err, ErrUnauthorized):
		code = CodeUnauthorized
	}
	status, _ := StatusOf(code)
	return &APIError{Status: status, Code: code, Message: err.Error()}
}
