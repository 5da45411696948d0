package transport

import (
	"errors"
	"net/http"

	"github.com/maos-project/maos/api"
)

// toAPIError classifies err for the wire.
func toAPIError(err error) *api.APIError {
	var apiErr *api.APIError
	if errors.As(err, &apiErr) && apiErr.Code != "" {
		// Relayed from the leader: keep its status and words.
		out := *apiErr
		if out.Status == 0 {
			// A code this build does not know has no status: 500, not a
			// panic in WriteHeader(0).
			out.Status = http.StatusInternalServerError
			if status, ok := api.StatusOf(out.Code); ok {
				out.Status = status
			}
		}
		return &out
	}
	code := api.CodeInternal
	var (
		fe  *api.FieldError
		nf  *api.NotFoundError
		fbe *api.ForbiddenError
		cfe *api.ConflictError
		qe  *api.QuotaError
		fce *api.FenceError
		cve *api.ClusterVersionError
	)
	switch {
	case errors.As(err, &cve):
		return &api.APIError{Status: http.StatusConflict, Code: api.CodeClusterVersion, Message: cve.Error()}
	case errors.As(err, &fce):
		return &api.APIError{Status: http.StatusConflict, Code: api.CodeFenced, Message: fce.Error()}
	case errors.As(err, &qe):
		// An artifact over its uploader's quota: the quota's words alone.
		return &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: qe.Error()}
	case errors.As(err, &fe):
		return &api.APIError{Status: http.StatusBadRequest, Code: api.CodeInvalid, Message: fe.Error()}
	case errors.As(err, &nf):
		return &api.APIError{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: nf.Error()}
	case errors.As(err, &fbe):
		return &api.APIError{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: fbe.Error()}
	case errors.As(err, &cfe):
		return &api.APIError{Status: http.StatusConflict, Code: api.CodeConflict, Message: cfe.Error()}
	case errors.Is(err, api.ErrConflict):
		code = api.CodeConflict
	case errors.Is(err, api.ErrForbidden):
		code = api.CodeForbidden
	case errors.Is(err, api.ErrNotFound):
		code = api.CodeNotFound
	case errors.Is(err, api.ErrInvalid):
		code = api.CodeInvalid
	case errors.Is(err, api.ErrOutcomeUnknown):
		code = api.CodeOutcomeUnknown
	case errors.Is(err, api.ErrNotLeader):
		code = api.CodeNotLeader
	case errors.Is(err, api.ErrNoLeader):
		code = api.CodeNoLeader
	case errors.Is(err, api.ErrNotReady):
		code = api.CodeNotReady
	case errors.Is(err, api.ErrRateLimited):
		code = api.CodeRateLimited
	case errors.Is(err, api.ErrSecretFound):
		code = api.CodeSecretFound
	case errors.Is(err, api.ErrTooLarge), errors.Is(err, api.ErrQuota):
		code = api.CodeTooLarge
	case errors.Is(err, api.ErrBadRequest):
		code = api.CodeBadRequest
	case errors.Is(err, api.ErrUnauthorized):
		code = api.CodeUnauthorized
	}
	status, _ := api.StatusOf(code)
	return &api.APIError{Status: status, Code: code, Message: err.Error()}
}
