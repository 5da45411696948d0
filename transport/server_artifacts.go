package transport

import (
	"cmp"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
)

// The artifact routes (client_artifacts.go lists them). The bytes go
// through Blobs (stored on a majority of the voters before anything is
// proposed), the record through the log (api.OpArtifactPut, forwarded to
// the leader by Apply as any write).

// errNoBlobs answers the artifact routes of a server without Blobs.
var errNoBlobs = &api.APIError{Status: http.StatusServiceUnavailable, Code: api.CodeNotReady,
	Message: "this node serves no artifacts' bytes: its API server has no blob store (transport.ServerOptions.Blobs)"}

// placeholderArtifactID stands for the id in a put's early check, made
// before the bytes are read.
var placeholderArtifactID = api.ArtifactIDPrefix + strings.Repeat("0", 64)

// putArtifact serves PUT /v1/artifacts?name=N&from=F: the raw body is the
// artifact, its Content-Type the artifact's type. 201 with the record, or
// 200 with existed:true when the same bytes were stored already.
func (s *Server) putArtifact(w http.ResponseWriter, r *http.Request) {
	if s.opts.Blobs == nil {
		s.writeError(w, r, errNoBlobs)
		return
	}
	q := r.URL.Query()
	if err := checkParams(q, "name", "from"); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Everything but the bytes is checked before a byte is read.
	cmd := api.ArtifactPutCommand{ID: placeholderArtifactID, Name: q.Get("name"),
		ContentType: cmp.Or(r.Header.Get("Content-Type"), api.DefaultArtifactContentType), From: q.Get("from")}
	if cmd.From == "" {
		if id := IdentityFrom(r.Context()); id != nil && id.Agent != "" {
			cmd.From = id.Agent
		} else {
			s.writeError(w, r, &api.FieldError{Field: "from", Reason: "required: the uploading agent, ?from= (with --auth an agent's token names its own)"})
			return
		}
	}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Acting as from, and an upload drawn on the sender's bucket like a
	// send (the route's limit), before a byte is read.
	if !s.admit(w, r, "from", cmd.From) {
		return
	}
	// The quota, early: a declared body that cannot fit is refused unread.
	// (The apply checks it again, with the state it commits on.)
	if err := s.checkArtifactQuota(cmd.From, max(r.ContentLength, 0)); err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := s.maxArtifactBytes()
	body, scanned := s.scanArtifact(r, cmd.From, r.Body)
	id, size, err := s.opts.Blobs.StoreBlob(r.Context(), body, limit)
	if serr := scanned(); err == nil {
		err = serr
	}
	if err != nil {
		s.writeError(w, r, artifactBodyError(err, limit))
		return
	}
	if r.ContentLength < 0 {
		// A chunked body's size is known only now.
		if err := s.checkArtifactQuota(cmd.From, size); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	cmd.ID, cmd.Size = id, size
	a, ok := proposeResult(s, w, r, api.OpArtifactPut, cmd, func(a api.Artifact) bool { return a.ID == id })
	if !ok {
		return
	}
	status := http.StatusCreated
	if a.Existed {
		status = http.StatusOK
	}
	writeJSON(w, status, a)
}

// checkArtifactQuota refuses size more bytes for agent when its usage
// already read says they do not fit (*api.QuotaError: 413).
func (s *Server) checkArtifactQuota(agent string, size int64) error {
	used, quota, err := s.state.ArtifactUsage(agent)
	if err != nil {
		return fmt.Errorf("transport: artifact usage of %s: %w", agent, err)
	}
	return fsm.CheckQuota(agent, used, size, quota)
}

// artifactBodyError is the answer to err, met storing an artifact's body
// capped at limit bytes: 413 naming the flag when it was too long.
func artifactBodyError(err error, limit int64) error {
	if errors.As(err, new(*http.MaxBytesError)) || errors.Is(err, api.ErrTooLarge) {
		return &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("artifact over the limit of %d bytes (--max-artifact-bytes)", limit)}
	}
	return err
}

// pathArtifactID is the {id} of the path, checked.
func pathArtifactID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !api.ValidArtifactID(id) {
		return "", api.ArtifactIDError("id", id)
	}
	return id, nil
}

// blobTarget is the checked {id} of a route that reads or writes bytes
// (with no query parameters when noQuery), once the server has Blobs; it
// answers the error itself and returns false otherwise.
func (s *Server) blobTarget(w http.ResponseWriter, r *http.Request, noQuery bool) (string, bool) {
	id, err := pathArtifactID(r)
	if err == nil && noQuery {
		err = checkParams(r.URL.Query())
	}
	if err == nil && s.opts.Blobs == nil {
		err = errNoBlobs
	}
	if err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	return id, true
}

// getArtifact serves GET (and HEAD) /v1/artifacts/{id}: the bytes,
// checked against the id by Blobs.OpenBlob, with Range and If-None-Match
// (http.ServeContent); the record must exist (404).
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	id, ok := s.blobTarget(w, r, true)
	if !ok {
		return
	}
	rec, err := s.artifactRecord(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rs, _, source, err := s.opts.Blobs.OpenBlob(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rs.Close()
	h := w.Header()
	h.Set("Content-Type", cmp.Or(rec.ContentType, api.DefaultArtifactContentType))
	h.Set("ETag", `"`+id+`"`)
	if cd := mime.FormatMediaType("attachment", map[string]string{"filename": rec.Name}); cd != "" {
		h.Set("Content-Disposition", cd)
	}
	h.Set(client.HeaderArtifactSource, source)
	// The bytes under an id never change.
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	http.ServeContent(w, r, "", rec.Created, rs)
}

// artifactRecord reads id's record at the request's consistency. A
// record this node has not applied yet is read again after a strong read
// before it is called not found: an artifact uploaded through one node and
// fetched through another at once (its bytes land on every node before its
// record is proposed) is there, not a 404.
func (s *Server) artifactRecord(r *http.Request, id string) (*api.Artifact, error) {
	c, err := consistency(r)
	if err != nil {
		return nil, err
	}
	if err := s.prop.Linearize(r.Context(), c); err != nil {
		return nil, err
	}
	rec, err := s.state.ArtifactFor(id, viewerFrom(r.Context()))
	if errors.Is(err, api.ErrNotFound) && c != api.Strong {
		if err := s.prop.Linearize(r.Context(), api.Strong); err != nil {
			return nil, err
		}
		rec, err = s.state.ArtifactFor(id, viewerFrom(r.Context()))
	}
	return rec, err
}

// artifactInfo serves GET /v1/artifacts/{id}/info: the record.
func (s *Server) artifactInfo(w http.ResponseWriter, r *http.Request) {
	id, err := pathArtifactID(r)
	if err == nil {
		err = checkParams(r.URL.Query())
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.artifactRecord(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// listArtifacts serves GET /v1/artifacts?from=&name=&after=&limit=: a page
// of records in index order.
func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	if err := checkParams(v, "from", "name", "after", "limit"); err != nil {
		s.writeError(w, r, err)
		return
	}
	after, limit, err := pageParams(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := api.ArtifactQuery{From: v.Get("from"), Name: v.Get("name"), After: after, Limit: limit, Viewer: viewerFrom(r.Context())}
	s.query(w, r, func(st Reader) (any, error) { return st.Artifacts(q) })
}

// deleteArtifact serves DELETE /v1/artifacts/{id} (admin): the record goes
// through the log; each node's GC removes the bytes once the record is gone.
func (s *Server) deleteArtifact(w http.ResponseWriter, r *http.Request) {
	id, err := pathArtifactID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := api.ArtifactDeleteCommand{ID: id, By: "admin"}
	if ident := IdentityFrom(r.Context()); ident != nil && ident.Agent != "" {
		cmd.By = ident.Agent
	}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, ok := proposeResult(s, w, r, api.OpArtifactDelete, cmd, func(a api.Artifact) bool { return a.ID == id })
	if ok {
		writeJSON(w, http.StatusOK, a)
	}
}

// receiveBlob serves PUT /v1/internal/blobs/{id}: a peer's copy of the
// bytes, stored when they hash to the id. 204.
func (s *Server) receiveBlob(w http.ResponseWriter, r *http.Request) {
	id, ok := s.blobTarget(w, r, false)
	if !ok {
		return
	}
	if err := s.opts.Blobs.ReceiveBlob(r.Context(), id, r.Body, r.ContentLength); err != nil {
		s.writeError(w, r, artifactBodyError(err, s.maxArtifactBytes()))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// localBlob serves GET /v1/internal/blobs/{id}: this node's own copy,
// checked; 404 when it has none or a damaged one.
func (s *Server) localBlob(w http.ResponseWriter, r *http.Request) {
	id, ok := s.blobTarget(w, r, false)
	if !ok {
		return
	}
	rs, _, err := s.opts.Blobs.LocalBlob(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rs.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+id+`"`)
	http.ServeContent(w, r, "", time.Time{}, rs)
}

// maxArtifactBytes is Limits.MaxArtifactBytes with its default.
func (s *Server) maxArtifactBytes() int64 {
	if s.limits == nil || s.limits.cfg.MaxArtifactBytes == 0 {
		return DefaultMaxArtifactBytes
	}
	return s.limits.cfg.MaxArtifactBytes
}
