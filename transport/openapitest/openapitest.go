// Package openapitest holds requests to, and answers of, a maos node to
// the API's OpenAPI document (transport.OpenAPI), with libopenapi-validator,
// so a test that talks to a node also checks that the document says what
// the node does. Validate checks one exchange; Client wraps an HTTP
// client's transport so every exchange it makes is checked.
//
// Security requirements are not validated: a node without --auth takes
// requests without a token, and which token a route takes is held to the
// route table by transport's TestOpenAPIMatchesRoutes.
package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/errors"

	"github.com/maos-project/maos/transport"
)

var (
	once   sync.Once
	shared validator.Validator
	mu     sync.Mutex // the validator is used by one exchange at a time
	setup  error
)

// load builds the validator once per process.
func load() (validator.Validator, error) {
	once.Do(func() {
		doc, err := libopenapi.NewDocument(transport.OpenAPI())
		if err != nil {
			setup = fmt.Errorf("openapitest: parse the OpenAPI document: %w", err)
			return
		}
		v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation())
		if len(errs) > 0 {
			setup = fmt.Errorf("openapitest: build the validator: %v", errs)
			return
		}
		shared = v
	})
	return shared, setup
}

// Document checks the document itself against the OpenAPI 3.1 schema.
func Document(t testing.TB) {
	t.Helper()
	v, err := load()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ok, errs := v.ValidateDocument(); !ok {
		t.Errorf("the OpenAPI document is not valid OpenAPI 3.1:\n%s", describe(errs))
	}
}

type offDocumentKey struct{}

// OffDocument marks a request as deliberately outside the document (a
// malformed body, to see the 400): Check then checks only its answer.
func OffDocument(req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), offDocumentKey{}, true))
}

// Validate checks req and its answer resp against the document: the
// path and method are documented, the parameters and the request body fit
// (the body is read from req.GetBody, which http.NewRequest sets for the
// usual bodies; a request without it is checked without its body), the
// status is documented for the operation and the answer's body fits its
// schema. resp.Body is read and put back, so the caller can still read
// it; an event stream's body is not read. Failures are t.Errorf.
func Validate(t testing.TB, req *http.Request, resp *http.Response) {
	t.Helper()
	if err := Check(req, resp); err != nil {
		t.Error(err)
	}
}

// Check is Validate's verdict as an error (nil when the exchange fits the
// document), for a caller outside a test's goroutine.
func Check(req *http.Request, resp *http.Response) error {
	v, err := load()
	if err != nil {
		return err
	}
	r := req.Clone(req.Context())
	r.Body = http.NoBody
	if req.GetBody != nil {
		if r.Body, err = req.GetBody(); err != nil {
			return fmt.Errorf("openapitest: %s %s: reread the request body: %w", req.Method, req.URL.Path, err)
		}
	}
	if r.Body == http.NoBody || r.Body == nil {
		// A request without a body is validated as one (the validator
		// reads a nil body as none).
		r.Body = nil
	}
	var out *http.Response
	if resp != nil {
		out = new(http.Response)
		*out = *resp
		if streaming(resp) {
			out.Body = io.NopCloser(strings.NewReader(""))
		} else if resp.Body != nil {
			b, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			if rerr != nil {
				return fmt.Errorf("openapitest: %s %s: read the answer: %w", req.Method, req.URL.Path, rerr)
			}
			out.Body = io.NopCloser(bytes.NewReader(b))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var errs []*errors.ValidationError
	off, _ := req.Context().Value(offDocumentKey{}).(bool)
	if !off {
		_, errs = v.ValidateHttpRequestSync(r)
	}
	if out != nil {
		_, rerrs := v.ValidateHttpResponse(r, out)
		errs = append(errs, rerrs...)
	}
	if len(errs) > 0 {
		status := ""
		if resp != nil {
			status = fmt.Sprintf(" → %d", resp.StatusCode)
		}
		return fmt.Errorf("openapitest: %s %s%s does not fit the OpenAPI document (transport/openapi.json):\n%s", req.Method, req.URL.RequestURI(), status, describe(errs))
	}
	return nil
}

// streaming reports whether resp is an event stream, whose body is read by
// the caller as it comes.
func streaming(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

func describe(errs []*errors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %s", e.Message)
		if e.Reason != "" {
			fmt.Fprintf(&b, ": %s", e.Reason)
		}
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s (%s)", se.FieldPath, se.Reason, se.KeywordLocation)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Transport is an http.RoundTripper that checks every exchange through base
// (http.DefaultTransport when nil) with Check and reports a misfit with
// t.Errorf. A request body without GetBody is buffered so it can be both
// sent and checked.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &roundTripper{t: t, base: base}
}

// Client is an HTTP client whose exchanges are checked (Transport), to
// give transport.NewClient.
func Client(t testing.TB, base http.RoundTripper) *http.Client {
	return &http.Client{Transport: Transport(t, base)}
}

type roundTripper struct {
	t    testing.TB
	base http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapitest: read the request body: %w", err)
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if err := Check(req, resp); err != nil {
		rt.t.Errorf("%v", err)
	}
	return resp, nil
}
