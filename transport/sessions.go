package transport

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Console sessions. The web console cannot put a header on an EventSource,
// so a browser authenticates by cookie; the cookie holds a random session
// id, never a bearer token: cookies are scoped by host, not port, so any
// process on a node's host (agents run code there) would read a token
// kept in one. The console's login (package console) checks the token and
// opens a session here; the id maps to the token in this node's memory
// only, so a session lives on the node that opened it (as the cookie lives
// on its host), ends at logout or after SessionTTL, and every request
// through it authenticates the token again: a revoked token ends its
// sessions at their next request.

const (
	// CookieSession is the console's session cookie over plain HTTP.
	CookieSession = "maos_session"
	// CookieSessionTLS is its name under TLS: the __Host- prefix makes a
	// browser keep it only if it is Secure, for this host and path "/",
	// so no other site or subdomain can set it.
	CookieSessionTLS = "__Host-maos_session"
	// SessionTTL is how long a console session lasts after its login.
	SessionTTL = 12 * time.Hour
	// maxSessions bounds a node's open sessions; the oldest goes first.
	maxSessions = 4096
)

type session struct {
	secret  string
	expires time.Time
}

// sessions is a node's open console sessions, by id.
type sessions struct {
	mu sync.Mutex
	m  map[string]session
}

func newSessions() *sessions { return &sessions{m: map[string]session{}} }

// OpenSession opens a console session for the bearer secret (which the
// caller has authenticated) and returns the cookie that names it:
// HttpOnly, SameSite=Strict, Path "/", expiring with the session, and
// under TLS Secure with the __Host- prefix.
func (s *Server) OpenSession(r *http.Request, secret string) (*http.Cookie, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.opts.Now()
	expires := now.Add(SessionTTL)
	ss := s.sessions
	ss.mu.Lock()
	for k, v := range ss.m {
		if !now.Before(v.expires) {
			delete(ss.m, k)
		}
	}
	for len(ss.m) >= maxSessions {
		oldest := ""
		for k, v := range ss.m {
			if oldest == "" || v.expires.Before(ss.m[oldest].expires) {
				oldest = k
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[id] = session{secret: secret, expires: expires}
	ss.mu.Unlock()
	return sessionCookie(r, id, expires), nil
}

// CloseSession ends the session r's cookie names (if any) and returns the
// cookie that clears it in the browser.
func (s *Server) CloseSession(r *http.Request) *http.Cookie {
	if id, ok := sessionID(r); ok {
		s.sessions.mu.Lock()
		delete(s.sessions.m, id)
		s.sessions.mu.Unlock()
	}
	c := sessionCookie(r, "", time.Time{})
	c.MaxAge = -1
	return c
}

// sessionSecret is the bearer secret of the session r's cookie names:
// present is whether r carries the cookie at all, ok whether it names an
// open session (an unknown or expired one is not).
func (s *Server) sessionSecret(r *http.Request) (secret string, present, ok bool) {
	id, present := sessionID(r)
	if !present {
		return "", false, false
	}
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	v, ok := s.sessions.m[id]
	if ok && !s.opts.Now().Before(v.expires) {
		delete(s.sessions.m, id)
		ok = false
	}
	return v.secret, true, ok
}

// SessionToken is the bearer secret of the open session r's cookie names,
// "" for none: for the console, which asks other nodes with it.
func (s *Server) SessionToken(r *http.Request) string {
	secret, _, ok := s.sessionSecret(r)
	if !ok {
		return ""
	}
	return secret
}

// endSessionsOf ends every session of secret (its token was refused).
func (s *Server) endSessionsOf(secret string) {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	for k, v := range s.sessions.m {
		if v.secret == secret {
			delete(s.sessions.m, k)
		}
	}
}

// sessionID is the session id r's cookie carries, under either name.
func sessionID(r *http.Request) (string, bool) {
	for _, name := range []string{CookieSessionTLS, CookieSession} {
		if c, err := r.Cookie(name); err == nil && c.Value != "" {
			return c.Value, true
		}
	}
	return "", false
}

func sessionCookie(r *http.Request, id string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: CookieSession, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Expires: expires}
	if r.TLS != nil {
		c.Name, c.Secure = CookieSessionTLS, true
	}
	if !expires.IsZero() {
		c.MaxAge = int(SessionTTL / time.Second)
	}
	return c
}
