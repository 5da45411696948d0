package transport

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// TestEveryRouteHasARule keeps the route table classified: a route
// without a rule is admin-only, which is safe but surely not what its
// author meant.
func TestEveryRouteHasARule(t *testing.T) {
	s := &Server{opts: ServerOptions{MaxMessageBytes: api.DefaultMaxBytes}}
	seen := map[string]bool{}
	for _, rt := range s.routes() {
		switch {
		case seen[rt.pattern]:
			t.Errorf("route %q is in the table twice", rt.pattern)
		case rt.rule.access == accessUnclassified:
			t.Errorf("route %q has no rule (routes.go): classify it", rt.pattern)
		case (rt.rule.access == accessActor || rt.rule.access == accessReader) && rt.rule.param == "":
			t.Errorf("route %q acts as or reads an agent its rule does not locate", rt.pattern)
		case rt.rule.access != accessActor && rt.rule.access != accessReader && rt.rule.param != "":
			t.Errorf("route %q: param %q on a rule (access %d) that reads no agent", rt.pattern, rt.rule.param, rt.rule.access)
		case rt.handle == nil:
			t.Errorf("route %q has no handler", rt.pattern)
		}
		seen[rt.pattern] = true
	}
	if len(seen) < 50 {
		t.Errorf("only %d routes in the table; routes() lost some", len(seen))
	}
}

// tokenReader is a state holding bearer tokens and nothing else.
type tokenReader struct {
	Reader
	tokens map[string]*api.Token // by hash
}

func (r tokenReader) TokenByHash(hash string) (*api.Token, error) {
	if tok, ok := r.tokens[hash]; ok {
		return tok, nil
	}
	return nil, api.ErrNotFound
}

// An unclassified route fails closed: only an admin token passes it.
func TestUnclassifiedRouteIsAdminOnly(t *testing.T) {
	const admin, alice, rex = "admin-secret-0123456789", "alice-secret", "rex-secret"
	s := &Server{
		opts: ServerOptions{MaxMessageBytes: api.DefaultMaxBytes, Logger: slog.New(slog.DiscardHandler)},
		state: tokenReader{tokens: map[string]*api.Token{
			fsm.HashToken(alice): {ID: "t1", Agent: "alice", Role: api.TokenRoleAgent},
			fsm.HashToken(rex):   {ID: "t2", Agent: "rex", Role: api.TokenRoleModerator},
		}},
		denials: newDenialCoalescer(),
	}
	s.auth = newAuthState(s, &AuthConfig{AdminToken: admin})
	s.denials.running = true // keep denials queued: no node to propose them to
	served := 0
	s.register([]route{{pattern: "POST /v1/brand-new", handle: func(http.ResponseWriter, *http.Request) { served++ }}})
	for _, secret := range []string{alice, rex} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/brand-new", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		s.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "needs an admin token") {
			t.Errorf("%s on an unclassified route: %d %s, want 403 needing an admin token", secret, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/brand-new", nil)
	r.Header.Set("Authorization", "Bearer "+admin)
	s.ServeHTTP(w, r)
	if w.Code != http.StatusOK || served != 1 {
		t.Errorf("admin on an unclassified route: %d (served %d), want it served", w.Code, served)
	}
	if n := len(s.denials.pending); n != 2 {
		t.Errorf("%d denials queued for the audit, want 2", n)
	}
}

func TestParseBearer(t *testing.T) {
	for _, tt := range []struct {
		in     []string
		secret string
	}{
		{[]string{"Bearer abc"}, "abc"},
		{[]string{"bearer abc"}, "abc"},
		{[]string{"BEARER   abc  "}, "abc"},
		{[]string{"Bearer maos_A-b_c.d~e+f/g=="}, "maos_A-b_c.d~e+f/g=="},
		{[]string{"Bearer"}, ""},
		{[]string{"Bearer "}, ""},
		{[]string{"Bearerabc"}, ""},
		{[]string{"Basic abc"}, ""},
		{[]string{"Bearer a b"}, ""},
		{[]string{"Bearer =abc"}, ""},
		{[]string{"Bearer ab=c"}, ""},
		{[]string{"Bearer a\x00b"}, ""},
		{[]string{"Bearer a", "Bearer a"}, ""},
		{nil, ""},
	} {
		secret, problem := parseBearer(tt.in)
		if secret != tt.secret || (secret == "") == (problem == "") {
			t.Errorf("parseBearer(%q) = %q, %q; want secret %q", tt.in, secret, problem, tt.secret)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"héllo", 2, "h"}, // é is 2 bytes: not cut in half
		{"a\xffb", 10, "a\uFFFDb"},
	} {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func denialCmd(reason string) api.AuditDenialCommand {
	return api.AuditDenialCommand{Method: "GET", Path: "/v1/x", Reason: reason, Count: 1}
}

// drainAll takes every line the coalescer hands out from t0 on, moving a
// simulated clock by each wait it asks for, until it is empty or the
// clock passes until. It returns the lines with their times.
func drainAll(c *denialCoalescer, t0, until time.Time) (lines []*api.AuditDenialCommand, at []time.Time) {
	now := t0
	for !now.After(until) {
		cmd, wait := c.next(now)
		switch {
		case cmd != nil:
			lines, at = append(lines, cmd), append(at, now)
		case wait == 0:
			return lines, at
		default:
			now = now.Add(wait)
		}
	}
	return lines, at
}

func TestDenialCoalescerFolds(t *testing.T) {
	c := newDenialCoalescer()
	keys := map[denialKey]int{{"t1", "a"}: 1000, {"t2", "a"}: 1000, {"t1", "b"}: 5}
	starts := 0
	for k, n := range keys {
		for range n {
			if c.add(k, denialCmd(k.reason)) {
				starts++
			}
		}
	}
	if starts != 1 {
		t.Errorf("%d drains started for one burst, want 1", starts)
	}
	t0 := time.Unix(1_700_000_000, 0)
	lines, _ := drainAll(c, t0, t0)
	if len(lines) != 3 {
		t.Fatalf("%d lines for 3 keys, want 3: %v", len(lines), lines)
	}
	total := 0
	for _, l := range lines {
		total += l.Count
	}
	if total != 2005 {
		t.Errorf("lines count %d requests, want 2005", total)
	}
	// The queue is empty and the drain over: the next denial starts one.
	if cmd, wait := c.next(t0); cmd != nil || wait != 0 {
		t.Errorf("empty coalescer: next = %v, %v", cmd, wait)
	}
	if !c.add(denialKey{"t1", "a"}, denialCmd("a")) {
		t.Errorf("a denial after the drain ended did not start a new one")
	}
}

func TestDenialCoalescerBoundsLines(t *testing.T) {
	c := newDenialCoalescer()
	t0 := time.Unix(1_700_000_000, 0)
	// 300 distinct keys, each denied 3 times, all at once.
	for range 3 {
		for i := range 300 {
			c.add(denialKey{fmt.Sprintf("t%d", i), "x"}, denialCmd("x"))
		}
	}
	lines, at := drainAll(c, t0, t0.Add(2*time.Second))
	// Burst at once, then rate a second: at most 10 + 2·10 in 2 s.
	if limit := int(denialBurst + 2*denialRate); len(lines) > limit || len(lines) < limit-1 {
		t.Errorf("%d lines in 2 s, want about %d", len(lines), limit)
	}
	for i := range at {
		if n := countSince(at, at[i], time.Second); n > int(denialBurst+denialRate) {
			t.Errorf("%d lines within 1 s of %v", n, at[i])
		}
	}
	// Meanwhile denials of waiting keys fold, and none is lost.
	for range 50 {
		c.add(denialKey{"t299", "x"}, denialCmd("x"))
	}
	rest, _ := drainAll(c, t0.Add(2*time.Second), t0.Add(time.Hour))
	total, t299 := 0, 0
	for _, l := range append(lines, rest...) {
		total += l.Count
		if l.Count > 3 {
			t299++
		}
	}
	if total != 950 || len(lines)+len(rest) != 300 || t299 != 1 {
		t.Errorf("%d lines counting %d requests (%d folded the extra 50), want 300 lines, 950 requests, 1", len(lines)+len(rest), total, t299)
	}
}

func countSince(at []time.Time, from time.Time, d time.Duration) int {
	n := 0
	for _, x := range at {
		if !x.Before(from) && x.Before(from.Add(d)) {
			n++
		}
	}
	return n
}

func TestDenialCoalescerOverflow(t *testing.T) {
	c := newDenialCoalescer()
	c.maxKeys = 4
	for i := range 10 {
		c.add(denialKey{fmt.Sprintf("t%d", i), "x"}, denialCmd("x"))
	}
	lines, _ := drainAll(c, time.Unix(0, 0), time.Unix(0, 0))
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 4 keys and one overflow line", len(lines))
	}
	last := lines[4]
	if last.Reason != overflowKey.reason || last.Count != 6 {
		t.Errorf("overflow line %+v, want count 6", last)
	}
	if err := last.Validate(); err != nil {
		t.Errorf("overflow line does not validate: %v", err)
	}
	// A count saturates instead of overflowing.
	c.add(denialKey{"t", "x"}, api.AuditDenialCommand{Reason: "x", Count: api.MaxDenialCount})
	c.add(denialKey{"t", "x"}, denialCmd("x"))
	if cmd, _ := c.next(time.Unix(0, 0)); cmd == nil || cmd.Count != api.MaxDenialCount {
		t.Errorf("saturated line %+v, want count %d", cmd, api.MaxDenialCount)
	}
}
