package transport

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/maos-project/maos/api"
)

// internalEntry serves POST /v1/internal/entry: body one encoded entry, a
// write a follower forwards as it encoded it (Proposer.ApplyEntry).
// Forwarding the entry itself spares the leader decoding, validating and
// re-encoding the request a second time: on a 3-node cluster two sends in
// three take this path.
func (s *Server) internalEntry(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != api.ContentTypeEntry {
		s.writeError(w, r, fmt.Errorf("%w: Content-Type: want %s, got %q", api.ErrBadRequest, api.ContentTypeEntry, ct))
		return
	}
	// The route's ceiling (forwardLimit, routes.go) already bounds the body.
	entry, err := readForwarded(r)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.writeError(w, r, &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("entry over the limit of %d bytes", tooBig.Limit)})
		return
	case err != nil:
		s.writeError(w, r, fmt.Errorf("%w: read entry: %v", api.ErrBadRequest, err))
		return
	case len(entry) == 0:
		s.writeError(w, r, fmt.Errorf("%w: empty entry", api.ErrBadRequest))
		return
	}
	res, err := s.prop.ApplyEntry(r.Context(), entry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeRawJSON(w, res)
}

// readForwarded reads a forwarded request's body: in one allocation of its
// declared length when it has one (capBody has held that to the route's
// ceiling), rather than io.ReadAll's doubling from 512 bytes, which
// allocates and copies about twice a batch's size.
func readForwarded(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	b := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		return nil, err
	}
	return b, nil
}
