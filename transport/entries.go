package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/maos-project/maos/api"
)

// MaxBatchEntries bounds the entries of one POST /v1/internal/entries: a
// follower's batcher never sends more, and the leader refuses a body that
// holds more with 400.
const MaxBatchEntries = 256

// SplitEntries splits a batch body into its entries (sub-slices of body,
// not copies). Errors name the entry and the limit: an empty or cut-off
// entry, more than MaxBatchEntries, an empty batch.
func SplitEntries(body []byte) ([][]byte, error) {
	var out [][]byte
	for i := 0; len(body) > 0; i++ {
		if i == MaxBatchEntries {
			return nil, fmt.Errorf("entries: more than %d entries in one batch", MaxBatchEntries)
		}
		n, k := binary.Uvarint(body)
		switch {
		case k <= 0:
			return nil, fmt.Errorf("entries[%d]: bad length prefix", i)
		case n == 0:
			return nil, fmt.Errorf("entries[%d]: empty entry", i)
		case n > uint64(len(body)-k):
			return nil, fmt.Errorf("entries[%d]: length %d but %d bytes left", i, n, len(body)-k)
		}
		out = append(out, body[k:k+int(n)])
		body = body[k+int(n):]
	}
	if len(out) == 0 {
		return nil, errors.New("entries: empty batch")
	}
	return out, nil
}

// internalEntries serves POST /v1/internal/entries: a batch of encoded
// entries a follower forwards in one request (Proposer.ApplyEntries), so
// the writes that wait on one follower cost the leader one HTTP request
// rather than one each. The answer holds one result per entry; an entry's
// error fails that entry only. A whole-request error (not the leader, a
// malformed batch) answers as /v1/internal/entry does.
func (s *Server) internalEntries(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != api.ContentTypeEntries {
		s.writeError(w, r, fmt.Errorf("%w: Content-Type: want %s, got %q", api.ErrBadRequest, api.ContentTypeEntries, ct))
		return
	}
	// The route's ceiling (batchLimit, routes.go) already bounds the body.
	body, err := readForwarded(r)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.writeError(w, r, &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("batch of entries over the limit of %d bytes", tooBig.Limit)})
		return
	case err != nil:
		s.writeError(w, r, fmt.Errorf("%w: read entries: %v", api.ErrBadRequest, err))
		return
	}
	entries, err := SplitEntries(body)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("%w: %v", api.ErrBadRequest, err))
		return
	}
	outs, err := s.prop.ApplyEntries(r.Context(), entries)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(outs) != len(entries) {
		s.writeError(w, r, fmt.Errorf("transport: %d results for %d entries", len(outs), len(entries)))
		return
	}
	// Built by hand: the results are JSON already, and json.Marshal would
	// scan each of them again to check it.
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	for i, o := range outs {
		if i > 0 {
			b.WriteByte(',')
		}
		if o.Err != nil {
			apiErr := api.ToAPIError(o.Err)
			e, _ := json.Marshal(api.EntryError{Status: apiErr.Status, Code: apiErr.Code, Message: apiErr.Message})
			b.WriteString(`{"error":`)
			b.Write(e)
		} else {
			b.WriteString(`{"result":`)
			b.Write(o.Result)
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
	writeRawJSON(w, b.Bytes())
}
