// Package console is the web console every maosd serves at /ui/: plain
// HTML, CSS and JS embedded in the binary (no CDN, no build step), and the
// few handlers around them: the login that keeps a token in an HttpOnly
// cookie, and the cluster view's fan-out to the other nodes. The pages
// read and write through the public API like any client, so they see
// what the token sees and add no back door. See DESIGN.md.
package console

import (
	"bytes"
	"crypto/tls"
	"embed"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// Options configure Mount.
type Options struct {
	// ClientTLS is the config the cluster view dials other nodes' APIs
	// with when they serve https (the node's client config); nil: http.
	ClientTLS *tls.Config
	// PeerTimeout bounds one call to another node (default 1.5 s).
	PeerTimeout time.Duration
}

// Mount serves the console at /ui/ in front of api, which gets every
// other request unchanged. The assets are public (they hold no data);
// everything with data comes from api, behind its auth.
func Mount(apiHandler http.Handler, opts Options) http.Handler {
	if opts.PeerTimeout == 0 {
		opts.PeerTimeout = 1500 * time.Millisecond
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	c := &console{api: apiHandler, opts: opts, clients: map[string]*client.Client{}, contact: map[string]time.Time{}}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	mux := http.NewServeMux()
	mux.Handle("GET /ui/", secured(files))
	mux.Handle("GET /ui", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
	mux.Handle("POST /ui/login", secured(http.HandlerFunc(c.login)))
	mux.Handle("POST /ui/logout", secured(http.HandlerFunc(c.logout)))
	mux.Handle("GET /ui/api/cluster", secured(http.HandlerFunc(c.cluster)))
	mux.Handle("/", apiHandler)
	return mux
}

// secured adds the console's response headers: no framing, no sniffing,
// scripts and styles from this node only; connect-src allows the other
// nodes' /healthz, which the page probes when its node goes away.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' http: https:; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

type console struct {
	api  http.Handler
	opts Options

	mu      sync.Mutex
	clients map[string]*client.Client // by API address
	contact map[string]time.Time      // node id → when it last answered the cluster view
}

// loginCSRF refuses a login or logout from another site (login CSRF:
// planting the attacker's token in the victim's browser).
var loginCSRF = http.NewCrossOriginProtection()

// maxLoginBody caps the login's body: a token and some JSON.
const maxLoginBody = 4 << 10

// sessionAPI is what the console needs of the API server for its login:
// console sessions (*transport.Server; transport/sessions.go).
type sessionAPI interface {
	OpenSession(r *http.Request, secret string) (*http.Cookie, error)
	CloseSession(r *http.Request) *http.Cookie
	SessionToken(r *http.Request) string
}

// login takes {"token"}, checks it with the API's GET /v1/whoami and, if
// it authenticates, opens a session on this node for it and sets the
// session's cookie (a random id, never the token: HttpOnly,
// SameSite=Strict, __Host- under TLS); it answers whoami's answer, or the
// API's refusal.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	if err := loginCSRF.Check(r); err != nil {
		writeErr(w, http.StatusForbidden, "login from another site refused")
		return
	}
	var in struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxLoginBody)).Decode(&in); err != nil || in.Token == "" {
		writeErr(w, http.StatusBadRequest, `want {"token":"…"}`)
		return
	}
	in.Token = strings.TrimSpace(in.Token)
	rec := c.local(r, "/v1/whoami", in.Token)
	if rec.code != http.StatusOK {
		relay(w, rec)
		return
	}
	sa, ok := c.api.(sessionAPI)
	if !ok {
		writeErr(w, http.StatusInternalServerError, "this node's API keeps no console sessions")
		return
	}
	// Without --auth whoami answers any token, and no session is needed.
	var me api.WhoAmI
	if json.Unmarshal(rec.body.Bytes(), &me) == nil && me.Auth {
		ck, err := sa.OpenSession(r, in.Token)
		if err != nil {
			writeErr(w, http.StatusInternalServerError, "open a session: "+err.Error())
			return
		}
		http.SetCookie(w, ck)
	}
	relay(w, rec)
}

// logout ends the session and clears its cookie.
func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	if err := loginCSRF.Check(r); err != nil {
		writeErr(w, http.StatusForbidden, "logout from another site refused")
		return
	}
	if sa, ok := c.api.(sessionAPI); ok {
		http.SetCookie(w, sa.CloseSession(r))
	}
	w.WriteHeader(http.StatusNoContent)
}

// token is the bearer secret r carries: its Authorization header's, else
// its console session's ("" for none).
func (c *console) token(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	if sa, ok := c.api.(sessionAPI); ok {
		return sa.SessionToken(r)
	}
	return ""
}

// recorded is an answer of the API served in process.
type recorded struct {
	code   int
	header http.Header
	body   bytes.Buffer
}

func (rec *recorded) Header() http.Header { return rec.header }
func (rec *recorded) Write(b []byte) (int, error) {
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return rec.body.Write(b)
}
func (rec *recorded) WriteHeader(code int) {
	if rec.code == 0 {
		rec.code = code
	}
}

// local asks this node's API for GET path with the bearer secret
// (nothing when ""), in process: through the same auth as any request.
func (c *console) local(r *http.Request, path, secret string) *recorded {
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, path, nil)
	req.Host, req.RemoteAddr, req.TLS = r.Host, r.RemoteAddr, r.TLS
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := &recorded{header: http.Header{}}
	c.api.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return rec
}

// relay writes an in-process answer back.
func relay(w http.ResponseWriter, rec *recorded) {
	for _, k := range []string{"Content-Type", "WWW-Authenticate", "Retry-After"} {
		if v := rec.header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(rec.code)
	_, _ = w.Write(rec.body.Bytes())
}

// writeErr answers the API's error body.
func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.APIError{Code: codeFor(code), Message: msg}})
}

func codeFor(status int) string {
	switch status {
	case http.StatusForbidden:
		return api.CodeForbidden
	case http.StatusBadRequest:
		return api.CodeBadRequest
	}
	return api.CodeInternal
}
