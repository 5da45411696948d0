package transport_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// cookieReq sends one request authenticated by a console session of
// secret's (opened as the console's login does), with the extra headers h.
func (e *authEnv) cookieReq(secret, method, path, body string, h map[string]string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	ck, err := e.srv.OpenSession(req, secret)
	if err != nil {
		e.t.Fatal(err)
	}
	if ck.Name != transport.CookieSession || ck.Value == secret || strings.Contains(ck.String(), secret) {
		e.t.Fatalf("session cookie %s: want %s holding an id, not the token", ck, transport.CookieSession)
	}
	req.AddCookie(ck)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The console's cookie authenticates as the header does: reads pass, a
// bad secret is 401, the header wins over the cookie.
func TestAuthCookieReads(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	if code, body := e.cookieReq(aliceSecret, "GET", "/v1/whoami", "", nil); code != 200 || !strings.Contains(body, `"agent":"alice"`) {
		t.Fatalf("whoami by cookie: %d %s", code, body)
	}
	if code, _ := e.cookieReq("maos_nobody-0123456789", "GET", "/v1/whoami", "", nil); code != 401 {
		t.Fatalf("unknown cookie secret: %d, want 401", code)
	}
	code, body := e.cookieReq("maos_nobody-0123456789", "GET", "/v1/whoami", "", map[string]string{"Authorization": "Bearer " + bobSecret})
	if code != 200 || !strings.Contains(body, `"agent":"bob"`) {
		t.Fatalf("header with a cookie: %d %s, want bob's header to win", code, body)
	}
}

// A write authenticated by the cookie needs the console's CSRF header and
// must not come from another site; one with a bearer header needs neither.
func TestAuthCookieWritesNeedCSRFDefence(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	send := `{"from":"alice","to":["bob"],"channel":"c","content":{"text":"hi"}}`
	for _, c := range []struct {
		name string
		h    map[string]string
		want int
	}{
		{"no CSRF header", nil, http.StatusForbidden},
		{"cross-site", map[string]string{api.HeaderCSRF: "1", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"other origin", map[string]string{api.HeaderCSRF: "1", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"same origin", map[string]string{api.HeaderCSRF: "1", "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
	} {
		code, body := e.cookieReq(aliceSecret, "POST", "/v1/messages", send, c.h)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if _, sends := e.writes(); sends != 1 {
		t.Fatalf("%d sends reached Apply, want 1", sends)
	}
	if r := e.as(aliceSecret, "POST", "/v1/messages", send); r.status != 200 {
		t.Fatalf("header-authenticated send: %d %s", r.status, r.body)
	}
}
