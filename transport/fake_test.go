package transport_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// The helpers the handler tests share. The fake service they run against
// is transporttest.Service, shared with package cli's tests.

var discard = slog.New(slog.DiscardHandler)

// serve starts a loopback HTTP server for the API in front of f, usually
// a *transporttest.Service.
func serve(t testing.TB, f transport.Backend, opts transport.ServerOptions) *httptest.Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	srv := httptest.NewServer(transport.NewServer(f, opts))
	t.Cleanup(srv.Close)
	return srv
}

// reply is a raw HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends one raw request; body "" sends none.
func do(t testing.TB, method, url, body string, header http.Header) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// errorOf checks that data is exactly {"error":{"code":...,"message":...}}
// with a non-empty message and returns code and message.
func errorOf(t testing.TB, data []byte) (code, message string) {
	t.Helper()
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(data, &outer); err != nil {
		t.Fatalf("error body is not a JSON object: %v: %s", err, data)
	}
	if len(outer) != 1 || outer["error"] == nil {
		t.Fatalf("error body has keys %v, want only \"error\": %s", keys(outer), data)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(outer["error"], &inner); err != nil {
		t.Fatalf("\"error\" is not an object: %v: %s", err, data)
	}
	if got := keys(inner); !slices.Equal(got, []string{"code", "message"}) {
		t.Fatalf("\"error\" has keys %v, want [code message]: %s", got, data)
	}
	if err := json.Unmarshal(inner["code"], &code); err != nil {
		t.Fatalf("code is not a string: %s", data)
	}
	if err := json.Unmarshal(inner["message"], &message); err != nil {
		t.Fatalf("message is not a string: %s", data)
	}
	if code == "" || message == "" {
		t.Fatalf("empty code or message: %s", data)
	}
	return code, message
}

// wantError checks an error answer: status, JSON content type, body shape
// and code; it returns the message.
func wantError(t testing.TB, r reply, status int, code string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	gotCode, msg := errorOf(t, r.body)
	if gotCode != code {
		t.Fatalf("code %q, want %q; body %s", gotCode, code, r.body)
	}
	return msg
}

// wantOK checks a 200 JSON answer and decodes it into v (if not nil).
func wantOK(t testing.TB, r reply, v any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// msg is a valid message body to send.
func msg(id, from, channel, text string, to ...string) *api.Message {
	return &api.Message{ID: id, From: from, Channel: channel, To: to, Content: api.Content{Text: text}}
}
