package transport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/maos-project/maos/transport"
)

// FuzzAuthorizationHeader feeds arbitrary Authorization values, methods
// and paths to a server with auth on. Whatever comes in: no panic, a
// status below 500, a request without a valid credential answered 401
// (with WWW-Authenticate: Bearer) unless it is a probe or its path is
// unclean (404 first), and the admin token never refused.
func FuzzAuthorizationHeader(f *testing.F) {
	e := newAuthEnv(f, &transport.AuthConfig{AdminToken: adminSecret})
	for _, seed := range []struct {
		header, path string
		method       byte
	}{
		{"", "/v1/channels", 0},
		{"Bearer " + adminSecret, "/v1/tokens", 0},
		{"Bearer " + adminSecret, "/v1/tokens", 1},
		{"Bearer " + aliceSecret, "/v1/agents/bob/inbox", 0},
		{"Bearer " + aliceSecret, "/v1/cluster/snapshot", 1},
		{"Bearer " + rexSecret, "/v1/stream", 0},
		{"bearer\t" + bobSecret, "/v1/agents/bob/cursor", 2},
		{"Bearer maos_unknown", "/v1/messages", 1},
		{"Basic Zm9vOmJhcg==", "/v1/cluster/join", 1},
		{"Bearer a b", "/v1/../x", 0},
		{"Bearer ===", "/healthz", 0},
		{"Bearer " + strings.Repeat("A", 600), "/readyz", 3},
		{"Bearer \x00\xff", "/v1/tokens/\xff", 3},
		{"Bearer " + adminSecret, "//v1//internal/entry", 1},
	} {
		f.Add(seed.header, seed.path, seed.method)
	}
	valid := map[string]bool{adminSecret: true, aliceSecret: true, bobSecret: true, rexSecret: true, opsSecret: true}
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
	// A canceled context: a stream reaching its loop ends at once, and no
	// handler waits on anything.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, header, path string, m byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(ctx, methods[int(m)%len(methods)], "http://node/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL, req.Body = &url.URL{Path: path}, http.NoBody // a server request always has a body
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)

		if rec.Code < 200 || rec.Code >= 500 {
			t.Fatalf("%q %s %q: status %d %s", header, req.Method, path, rec.Code, rec.Body)
		}
		scheme, cred, _ := strings.Cut(strings.Trim(header, " \t"), " ")
		cred = strings.Trim(cred, " \t")
		good := strings.EqualFold(scheme, "bearer") && valid[cred]
		probe := path == "/healthz" || path == "/readyz"
		switch {
		case !good && !probe && rec.Code != http.StatusUnauthorized && rec.Code != http.StatusNotFound:
			t.Fatalf("%q %s %q without a valid token: status %d %s", header, req.Method, path, rec.Code, rec.Body)
		case rec.Code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer "):
			t.Fatalf("401 without WWW-Authenticate: Bearer: %q", rec.Header().Get("WWW-Authenticate"))
		case good && (rec.Code == http.StatusUnauthorized):
			t.Fatalf("%q %s %q: a valid token refused 401: %s", header, req.Method, path, rec.Body)
		case good && (cred == adminSecret || cred == opsSecret) && rec.Code == http.StatusForbidden:
			t.Fatalf("%s %q: an admin token refused 403: %s", req.Method, path, rec.Body)
		}
	})
}
