package transport

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A handler that reads its body with no limit of its own still cannot read
// past the route's ceiling when the body's length is not declared.
func TestCapBodyBoundsUndeclaredBodies(t *testing.T) {
	var read int
	var readErr error
	h := capBody("POST /x", bodyCap{limit: 100}, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		read, readErr = len(data), err
	}))
	req := httptest.NewRequest("POST", "/x", io.NopCloser(strings.NewReader(strings.Repeat("x", 1000))))
	req.ContentLength = -1
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !errors.As(readErr, new(*http.MaxBytesError)) || read > 100 {
		t.Fatalf("read %d bytes, err %v; want at most 100 and an *http.MaxBytesError", read, readErr)
	}

	req = httptest.NewRequest("POST", "/x", io.NopCloser(strings.NewReader(strings.Repeat("x", 100))))
	req.ContentLength = -1
	h.ServeHTTP(httptest.NewRecorder(), req)
	if readErr != nil || read != 100 {
		t.Fatalf("a body at the ceiling: read %d, err %v; want all 100 bytes", read, readErr)
	}
}

// clientOf keys a request by its IP, and one with none (a Unix socket's
// "@" or "", or a malformed address) as "local", never "" or "@".
func TestClientOf(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"127.0.0.1:5000", "127.0.0.1"},
		{"10.0.0.5:80", "10.0.0.5"},
		{"[::1]:7070", "::1"},
		{"10.0.0.6", "10.0.0.6"},
		{"@", localClient},
		{"", localClient},
		{":7070", localClient},
	} {
		r := &http.Request{RemoteAddr: tc.remote}
		if got := clientOf(r); got != tc.want {
			t.Errorf("clientOf(RemoteAddr %q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}
