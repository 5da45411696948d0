package client

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/maos-project/maos/api"
)

// HeaderArtifactSource names, on GET /v1/artifacts/{id}, whose copy of the
// bytes was served: "local", or "peer NODE (local copy missing)" / "peer
// NODE (local copy damaged)" when this node's was not good and it served
// (and kept) a peer's.
const HeaderArtifactSource = "X-Maos-Artifact-Source"

// PutArtifact uploads size bytes from body (size -1: unknown, sent
// chunked) and returns the record once the bytes are on a majority of the
// nodes and the record is committed. The same bytes again return the
// stored record with Existed set. Over the node's --max-artifact-bytes or
// the agent's quota: an *APIError with status 413 naming the limit.
func (c *Client) PutArtifact(ctx context.Context, body io.Reader, size int64, up api.ArtifactUpload) (api.Artifact, error) {
	q := url.Values{"name": {up.Name}}
	if up.From != "" {
		q.Set("from", up.From)
	}
	h := http.Header{}
	h.Set("Content-Type", cmp.Or(up.ContentType, api.DefaultArtifactContentType))
	var out api.Artifact
	resp, err := c.stream(ctx, http.MethodPut, "/v1/artifacts", q, h, body, size)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("transport: PUT /v1/artifacts: decode answer: %w", err)
	}
	return out, nil
}

// ArtifactReader is an artifact's bytes as a node serves them. Read
// checks the bytes against the id as they pass: at the end of a whole
// read, a mismatch is an error wrapping ErrArtifactDamaged (a Range read
// is not checked here; the node checked its copy).
type ArtifactReader struct {
	io.ReadCloser
	// Size is the Content-Length, Source the HeaderArtifactSource.
	Size   int64
	Source string
	// Name and ContentType are the record's.
	Name        string
	ContentType string
}

// ErrArtifactDamaged is bytes that do not match their artifact id.
var ErrArtifactDamaged = fmt.Errorf("artifact bytes do not match their id")

// OpenArtifact opens artifact id's bytes from offset (0 for all; above 0
// asks for the rest with a Range header); an unknown id is an error
// wrapping api.ErrNotFound. The caller closes it.
func (c *Client) OpenArtifact(ctx context.Context, id string, offset int64) (*ArtifactReader, error) {
	h := http.Header{}
	if offset > 0 {
		h.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	}
	resp, err := c.stream(ctx, http.MethodGet, artifactPath(id), nil, h, nil, 0)
	if err != nil {
		return nil, err
	}
	r := &ArtifactReader{ReadCloser: resp.Body, Size: resp.ContentLength, Source: resp.Header.Get(HeaderArtifactSource),
		ContentType: resp.Header.Get("Content-Type")}
	if _, params, err := mimeParams(resp.Header.Get("Content-Disposition")); err == nil {
		r.Name = params["filename"]
	}
	if offset == 0 {
		r.ReadCloser = &verifyingReader{rc: resp.Body, want: id, h: sha256.New()}
	}
	return r, nil
}

// GetArtifact copies artifact id's bytes into w, checked against the id,
// and returns how many it wrote; a mismatch is an error wrapping
// ErrArtifactDamaged (w then holds bytes that are not the artifact).
func (c *Client) GetArtifact(ctx context.Context, id string, w io.Writer) (int64, error) {
	r, err := c.OpenArtifact(ctx, id, 0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return io.Copy(w, r)
}

// ArtifactInfo returns artifact id's record.
func (c *Client) ArtifactInfo(ctx context.Context, id string, cons api.Consistency) (api.Artifact, error) {
	return request[api.Artifact](ctx, c, http.MethodGet, artifactPath(id)+"/info", consQuery(cons), nil)
}

// Artifacts lists artifact records in the order they were stored.
func (c *Client) Artifacts(ctx context.Context, q api.ArtifactQuery, cons api.Consistency) (api.ArtifactPage, error) {
	v := listQuery(cons, q.Limit, map[string]string{"from": q.From, "name": q.Name, "after": seqParam(q.After)})
	return request[api.ArtifactPage](ctx, c, http.MethodGet, "/v1/artifacts", v, nil)
}

// DeleteArtifact removes artifact id (an admin token) and returns the
// record it removed.
func (c *Client) DeleteArtifact(ctx context.Context, id string) (api.Artifact, error) {
	return request[api.Artifact](ctx, c, http.MethodDelete, artifactPath(id), nil, nil)
}

// PushBlob stores size bytes of artifact id on the node (a peer's copy;
// PUT /v1/internal/blobs/{id}): the node checks them against id.
func (c *Client) PushBlob(ctx context.Context, id string, body io.Reader, size int64) error {
	resp, err := c.stream(ctx, http.MethodPut, blobPath(id), nil, http.Header{"Content-Type": {"application/octet-stream"}}, body, size)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// FetchBlob opens the node's own copy of artifact id (GET
// /v1/internal/blobs/{id}), checked by the node; api.ErrNotFound when it
// has none or its copy is damaged. The reader checks the bytes again.
func (c *Client) FetchBlob(ctx context.Context, id string) (*ArtifactReader, error) {
	resp, err := c.stream(ctx, http.MethodGet, blobPath(id), nil, nil, nil, 0)
	if err != nil {
		return nil, err
	}
	return &ArtifactReader{ReadCloser: &verifyingReader{rc: resp.Body, want: id, h: sha256.New()}, Size: resp.ContentLength,
		Source: "local"}, nil
}

func artifactPath(id string) string { return "/v1/artifacts/" + url.PathEscape(id) }

func blobPath(id string) string { return "/v1/internal/blobs/" + url.PathEscape(id) }

// stream sends one request whose body is streamed (size -1: unknown; 0
// with body nil: none) and returns the 2xx response for the caller to
// read and close; any other answer is decoded as doRaw does.
func (c *Client) stream(ctx context.Context, method, path string, q url.Values, h http.Header, body io.Reader, size int64) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("transport: %s %s: %w", method, u, err)
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	if c.forwarded {
		req.Header.Set(api.HeaderForwarded, "1")
	}
	c.setAuth(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.requestError(method, u, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Code == "" {
		return nil, &api.APIError{Status: resp.StatusCode, Code: api.CodeInternal,
			Message: fmt.Sprintf("%s %s: %s", method, u, strings.TrimSpace(string(data)))}
	}
	eb.Error.Status = resp.StatusCode
	eb.Error.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	return nil, eb.Error
}

// verifyingReader hashes what passes and, at EOF, fails unless the hash
// is want.
type verifyingReader struct {
	rc   io.ReadCloser
	want string
	h    interface {
		io.Writer
		Sum([]byte) []byte
	}
	done bool
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF && !v.done {
		v.done = true
		if got := api.ArtifactID(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("transport: artifact %s: %w (read %s)", v.want, ErrArtifactDamaged, got)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.rc.Close() }

// mimeParams parses a Content-Disposition header.
func mimeParams(v string) (string, map[string]string, error) { return mime.ParseMediaType(v) }
