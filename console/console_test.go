package console_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/console"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

const adminSecret = "admin-bootstrap-0123456789abcdef"

// serve mounts the console in front of a one-node API with auth.
func serve(t *testing.T) string {
	t.Helper()
	svc := transporttest.New(t)
	if _, err := svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: "tok-alice", Agent: "alice", Role: api.TokenRoleAgent, Hash: fsm.HashToken("maos_alice-0123456789")}); err != nil {
		t.Fatal(err)
	}
	apiServer := transport.NewServer(svc, transport.ServerOptions{Logger: slog.New(slog.DiscardHandler), Auth: &transport.AuthConfig{AdminToken: adminSecret}})
	hs := httptest.NewServer(console.Mount(apiServer, console.Options{}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func do(t *testing.T, method, url, body string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The assets are served without a token and hold no data; the API behind
// them still wants one.
func TestAssetsPublicAPIStillGuarded(t *testing.T) {
	url := serve(t)
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		resp, body := do(t, "GET", url+p, "", nil)
		if resp.StatusCode != 200 || body == "" || resp.Header.Get("Content-Security-Policy") == "" {
			t.Fatalf("GET %s: %d, %d bytes, CSP %q", p, resp.StatusCode, len(body), resp.Header.Get("Content-Security-Policy"))
		}
	}
	if resp, _ := do(t, "GET", url+"/ui", "", nil); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/v1/overview", "/v1/stream", "/ui/api/cluster"} {
		if resp, _ := do(t, "GET", url+p, "", nil); resp.StatusCode != 401 {
			t.Fatalf("GET %s without a token: %d, want 401", p, resp.StatusCode)
		}
	}
}

// A login with a good token sets an HttpOnly, SameSite=Strict cookie that
// names a session on the node (never the token); a bad token sets none; a
// login from another site is refused; logout ends the session.
func TestLoginOpensASessionCookie(t *testing.T) {
	url := serve(t)
	resp, body := do(t, "POST", url+"/ui/login", `{"token":"maos_wrong-0123456789"}`, nil)
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("bad token: %d %s, cookies %v", resp.StatusCode, body, resp.Cookies())
	}
	resp, body = do(t, "POST", url+"/ui/login", `{"token":"maos_alice-0123456789"}`, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Fatalf("cross-site login: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", url+"/ui/login", `{"token":"maos_alice-0123456789"}`, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != 200 || !strings.Contains(body, `"agent":"alice"`) {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != transport.CookieSession || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" ||
		cs[0].MaxAge <= 0 || cs[0].MaxAge > int(transport.SessionTTL.Seconds()) {
		t.Fatalf("cookie: %+v", cs)
	}
	// The cookie names a session; it never holds the token.
	if strings.Contains(resp.Header.Get("Set-Cookie"), "maos_alice") {
		t.Fatalf("the cookie holds the token: %s", resp.Header.Get("Set-Cookie"))
	}
	session := map[string]string{"Cookie": cs[0].Name + "=" + cs[0].Value}
	_, body = do(t, "GET", url+"/v1/whoami", "", session)
	if !strings.Contains(body, `"agent":"alice"`) {
		t.Fatalf("whoami with the cookie: %s", body)
	}
	// A cookie holding the token itself is no session.
	if resp, _ := do(t, "GET", url+"/v1/whoami", "", map[string]string{"Cookie": transport.CookieSession + "=maos_alice-0123456789"}); resp.StatusCode != 401 {
		t.Fatalf("a token in the cookie: %d, want 401", resp.StatusCode)
	}
	resp, _ = do(t, "POST", url+"/ui/logout", "", session)
	if cs := resp.Cookies(); resp.StatusCode != 204 || len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Fatalf("logout: %d %+v", resp.StatusCode, cs)
	}
	// Logout ended the session on the node, not only in the browser.
	if resp, body := do(t, "GET", url+"/v1/whoami", "", session); resp.StatusCode != 401 || !strings.Contains(body, "log in again") {
		t.Fatalf("whoami after logout: %d %s, want 401", resp.StatusCode, body)
	}
}

// A revoked token ends its sessions.
func TestRevokedTokenEndsItsSession(t *testing.T) {
	url := serve(t)
	resp, body := do(t, "POST", url+"/ui/login", `{"token":"maos_alice-0123456789"}`, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	session := map[string]string{"Cookie": resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value}
	if resp, _ := do(t, "DELETE", url+"/v1/tokens/tok-alice", "", map[string]string{"Authorization": "Bearer " + adminSecret}); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	for _, want := range []string{"revoked", "log in again"} {
		if resp, body := do(t, "GET", url+"/v1/whoami", "", session); resp.StatusCode != 401 || !strings.Contains(body, want) {
			t.Fatalf("whoami with a revoked token's session: %d %s, want 401 saying %q", resp.StatusCode, body, want)
		}
	}
}

// Under TLS the cookie is Secure and __Host- prefixed.
func TestSessionCookieUnderTLS(t *testing.T) {
	svc := transporttest.New(t)
	apiServer := transport.NewServer(svc, transport.ServerOptions{Logger: slog.New(slog.DiscardHandler), Auth: &transport.AuthConfig{AdminToken: adminSecret}})
	req := httptest.NewRequest("POST", "https://node/ui/login", nil)
	ck, err := apiServer.OpenSession(req, adminSecret)
	if err != nil || ck.Name != transport.CookieSessionTLS || !ck.Secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly {
		t.Fatalf("cookie under TLS: %+v, %v", ck, err)
	}
}

// The cluster view's last contact of a node that died before this node's
// console ever asked it is when gossip last heard from it, not "never":
// the console has no answer of its own to show, the membership has one.
func TestClusterLastContactFromGossip(t *testing.T) {
	svc := transporttest.New(t)
	seen := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	svc.EditMembers(func(m *api.MembersResponse) {
		for i := range m.Members {
			if m.Members[i].NodeID == "n2" {
				m.Members[i].LastContact = &seen
			}
		}
	})
	apiServer := transport.NewServer(svc, transport.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	// n2's API address is a closed loopback port: it does not answer.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	svc.EditStatus(func(st *api.Status) {
		for i := range st.Voters {
			if st.Voters[i].ID == "n2" {
				st.Voters[i].APIAddr = deadAddr
			}
		}
	})
	hs := httptest.NewServer(console.Mount(apiServer, console.Options{PeerTimeout: 2 * time.Second}))
	t.Cleanup(hs.Close)
	resp, body := do(t, "GET", hs.URL+"/ui/api/cluster", "", nil)
	var v console.ClusterView
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("cluster view: %d %s", resp.StatusCode, body)
	}
	byID := map[string]console.NodeView{}
	for _, n := range v.Nodes {
		byID[n.NodeID] = n
	}
	n2, ok := byID["n2"]
	if !ok || n2.Reachable || n2.LastContact == nil || !n2.LastContact.Equal(seen) {
		t.Fatalf("n2 (dead, last heard by gossip at %v): %+v", seen, n2)
	}
	// This node answered the console itself: its contact is the console's.
	if n1 := byID["n1"]; !n1.Reachable || n1.LastContact == nil || !n1.LastContact.After(seen) {
		t.Fatalf("n1 (this node): %+v", n1)
	}
}
