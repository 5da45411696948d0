package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// sendBody is a valid send from from to n recipients.
func sendBody(from string, n int) string {
	to := make([]string, n)
	for i := range to {
		to[i] = strconv.Quote(fmt.Sprintf("r%d", i))
	}
	return fmt.Sprintf(`{"from":%q,"to":[%s],"channel":"ops","content":{"text":"hi"}}`, from, strings.Join(to, ","))
}

// limitsFake is a one-node backend with the agents sendBody addresses
// for up to 4 recipients registered (r0..r3): sends may name only agents
// someone answers to.
func limitsFake(t *testing.T) *transporttest.Service {
	t.Helper()
	f := transporttest.New(t)
	f.Register(t, "r0", "r1", "r2", "r3")
	return f
}

// asAgent serves h with the identity named by the X-Test-Agent header (as
// the auth layer would set it), for tests of the identity-keyed limits.
func asAgent(h http.Handler, role api.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("X-Test-Agent"); a != "" {
			r = r.WithContext(transport.WithIdentity(r.Context(), &transport.Identity{Agent: a, Role: role, TokenID: "t-" + a}))
		}
		h.ServeHTTP(w, r)
	})
}

// An agent gets its burst, then 429 with a Retry-After in whole seconds and
// an error naming the limit; the refused send never reaches the service;
// other agents are unaffected; once the bucket refills it may send again.
func TestSendRateLimit(t *testing.T) {
	fake := limitsFake(t)
	srv := serve(t, fake, transport.ServerOptions{Limits: transport.Limits{SendRate: 2, SendBurst: 2}})
	url := srv.URL + "/v1/messages"
	for i := range 2 {
		if r := do(t, "POST", url, sendBody("w1", 1), nil); r.status != http.StatusOK {
			t.Fatalf("send %d within the burst = %d %s", i+1, r.status, r.body)
		}
	}
	r := do(t, "POST", url, sendBody("w1", 1), nil)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("send over the burst = %d %s, want 429", r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want \"1\" (500 ms rounded up to a whole second)", got)
	}
	code, msg := errorOf(t, r.body)
	for _, want := range []string{"agent w1", "2/s", "burst 2", "retry after 1 s", "--send-rate"} {
		if code != api.CodeRateLimited || !strings.Contains(msg, want) {
			t.Errorf("429 body = %s %q, want code %s and a message with %q", code, msg, api.CodeRateLimited, want)
		}
	}
	if n := fake.NumStored(); n != 2 {
		t.Errorf("the service stored %d messages, want the 2 allowed", n)
	}
	if r := do(t, "POST", url, sendBody("w2", 1), nil); r.status != http.StatusOK {
		t.Errorf("another agent's send = %d %s, want 200 (buckets are per agent)", r.status, r.body)
	}

	// The client turns the 429 into ErrRateLimited carrying the delay.
	c := client.NewClient(srv.URL, nil)
	m := &api.Message{From: "w1", To: []string{"r0"}, Channel: "ops", Content: api.Content{Text: "hi"}}
	_, err := c.Send(context.Background(), m)
	if !errors.Is(err, api.ErrRateLimited) || api.RetryAfter(err) != time.Second {
		t.Fatalf("client send over the limit: err = %v (retry after %v), want ErrRateLimited after 1s", err, api.RetryAfter(err))
	}
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
		t.Errorf("client error = %#v, want an *APIError with status 429", err)
	}

	// 2/s refills a token in 500 ms (slow enough that a loaded machine
	// does not refill it between the 429 and the client's send).
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.ID = ""
		if _, err = c.Send(context.Background(), m); err == nil {
			break
		}
		if !errors.Is(err, api.ErrRateLimited) || time.Now().After(deadline) {
			t.Fatalf("send after the refill: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Retry-After rounds the wait up to whole seconds: at 0.25/s the next token
// is 4 s away.
func TestSendRateRetryAfterRoundsUp(t *testing.T) {
	srv := serve(t, limitsFake(t), transport.ServerOptions{Limits: transport.Limits{SendRate: 0.25}})
	url := srv.URL + "/v1/messages"
	if r := do(t, "POST", url, sendBody("w1", 1), nil); r.status != http.StatusOK {
		t.Fatalf("first send = %d %s", r.status, r.body)
	}
	r := do(t, "POST", url, sendBody("w1", 1), nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "4" {
		t.Fatalf("second send = %d, Retry-After %q; want 429 after 4", r.status, r.header.Get("Retry-After"))
	}
	if _, msg := errorOf(t, r.body); !strings.Contains(msg, "0.25/s (burst 1)") {
		t.Errorf("message %q does not name the rate and the default burst (1 for 0.25/s)", msg)
	}
}

// A forwarded send was limited by the node that took it: the leader
// neither refuses it nor charges it to the agent's bucket.
func TestSendRateSkipsForwarded(t *testing.T) {
	fake := limitsFake(t)
	srv := serve(t, fake, transport.ServerOptions{Limits: transport.Limits{SendRate: 0.01, SendBurst: 1}})
	url := srv.URL + "/v1/messages"
	fwd := http.Header{api.HeaderForwarded: {"1"}}
	for i := range 5 {
		if r := do(t, "POST", url, sendBody("w1", 1), fwd); r.status != http.StatusOK {
			t.Fatalf("forwarded send %d = %d %s, want 200", i+1, r.status, r.body)
		}
	}
	if r := do(t, "POST", url, sendBody("w1", 1), nil); r.status != http.StatusOK {
		t.Fatalf("direct send after forwarded ones = %d %s, want 200 (forwarded sends take no token)", r.status, r.body)
	}
	if r := do(t, "POST", url, sendBody("w1", 1), nil); r.status != http.StatusTooManyRequests {
		t.Fatalf("second direct send = %d %s, want 429", r.status, r.body)
	}
}

// With auth only a node (an admin token) vouches for a forwarded request:
// an agent setting the forwarding header itself is still limited.
func TestSendRateForgedForwardIsLimited(t *testing.T) {
	for _, tc := range []struct {
		role api.Role
		want int
	}{
		{api.RoleAgent, http.StatusTooManyRequests},
		{api.RoleModerator, http.StatusTooManyRequests},
		{api.RoleAdmin, http.StatusOK},
	} {
		srv := httptest.NewServer(asAgent(transport.NewServer(limitsFake(t), transport.ServerOptions{
			Logger: discard, Limits: transport.Limits{SendRate: 0.01, SendBurst: 1}}), tc.role))
		h := http.Header{"X-Test-Agent": {"w1"}, api.HeaderForwarded: {"1"}}
		do(t, "POST", srv.URL+"/v1/messages", sendBody("w1", 1), h)
		if r := do(t, "POST", srv.URL+"/v1/messages", sendBody("w1", 1), h); r.status != tc.want {
			t.Errorf("%s token, forwarding header, second send: %d %s, want %d", tc.role, r.status, r.body, tc.want)
		}
		srv.Close()
	}
}

// With auth the bucket is the identity's agent, whatever "from" says.
func TestSendRateKeysOnIdentity(t *testing.T) {
	srv := httptest.NewServer(asAgent(transport.NewServer(limitsFake(t), transport.ServerOptions{
		Logger: discard, Limits: transport.Limits{SendRate: 0.01, SendBurst: 1}}), api.RoleAdmin))
	t.Cleanup(srv.Close)
	h := http.Header{"X-Test-Agent": {"ops"}}
	if r := do(t, "POST", srv.URL+"/v1/messages", sendBody("a", 1), h); r.status != http.StatusOK {
		t.Fatalf("first send = %d %s", r.status, r.body)
	}
	r := do(t, "POST", srv.URL+"/v1/messages", sendBody("b", 1), h)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("second send by the same identity = %d %s, want 429", r.status, r.body)
	}
	if _, msg := errorOf(t, r.body); !strings.Contains(msg, "agent ops ") {
		t.Errorf("message %q does not name the identity's agent", msg)
	}
}

// An interrupt draws on the same bucket as sends.
func TestInterruptIsRateLimited(t *testing.T) {
	fake := limitsFake(t)
	newStreamState(t, fake)
	srv := serve(t, fake, transport.ServerOptions{Limits: transport.Limits{SendRate: 0.01, SendBurst: 1}})
	if r := do(t, "POST", srv.URL+"/v1/messages", sendBody("boss", 1), nil); r.status != http.StatusOK {
		t.Fatalf("send = %d %s", r.status, r.body)
	}
	r := do(t, "POST", srv.URL+"/v1/agents/w1/interrupt", `{"from":"boss","reason":"stop"}`, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("interrupt after the burst = %d (Retry-After %q) %s, want 429", r.status, r.header.Get("Retry-After"), r.body)
	}
}

// The bucket arithmetic, on an injected clock: a burst, then the wait for
// the next token; a refused event takes nothing.
func TestSendLimiterRefill(t *testing.T) {
	l := transport.NewSendLimiter(2, 3, 0)
	t0 := time.Unix(1_000_000, 0)
	for i := range 3 {
		if d := l.Allow("a", t0); d != 0 {
			t.Fatalf("event %d of the burst: wait %v", i+1, d)
		}
	}
	for range 3 { // refused, repeatedly: no debt builds up
		if d := l.Allow("a", t0); d != 500*time.Millisecond {
			t.Fatalf("over the burst: wait %v, want 500ms", d)
		}
	}
	if d := l.Allow("a", t0.Add(499*time.Millisecond)); d != time.Millisecond {
		t.Fatalf("1 ms early: wait %v, want 1ms", d)
	}
	if d := l.Allow("a", t0.Add(500*time.Millisecond)); d != 0 {
		t.Fatalf("after the refill: wait %v, want 0", d)
	}
	if d := l.Allow("a", t0.Add(500*time.Millisecond)); d == 0 {
		t.Fatal("two events on one refilled token")
	}
}

// The map holds at most maxKeys buckets, drops the least recently used
// past that, and drops idle (full) buckets on its own.
func TestSendLimiterBounded(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	l := transport.NewSendLimiter(1, 1, 100)
	for i := range 1000 {
		l.Allow(fmt.Sprintf("k%d", i), t0)
	}
	if n := l.Len(); n != 100 {
		t.Fatalf("after 1000 keys, %d buckets; want the cap of 100", n)
	}
	// Idle for the refill period (burst/rate = 1 s): full, so dropped.
	l.Allow("late", t0.Add(time.Second))
	if n := l.Len(); n != 1 {
		t.Fatalf("after every bucket refilled, %d buckets; want 1", n)
	}

	l = transport.NewSendLimiter(1, 1, 2)
	l.Allow("a", t0)
	l.Allow("b", t0)
	if l.Allow("a", t0) == 0 { // a is now the most recently used
		t.Fatal("a's second event allowed")
	}
	l.Allow("c", t0) // evicts b, the least recently used
	if l.Allow("a", t0) == 0 {
		t.Error("a's bucket was evicted: a recently used agent got a fresh burst")
	}
	if l.Allow("b", t0) != 0 {
		t.Error("b's bucket was kept past the cap")
	}
	if n := l.Len(); n != 2 {
		t.Errorf("%d buckets, want 2", n)
	}
}

// A rate so small that a refill takes longer than a Duration can hold
// still limits (the refill period must not overflow to a negative one).
func TestSendLimiterTinyRate(t *testing.T) {
	l := transport.NewSendLimiter(1e-300, 1, 0)
	t0 := time.Unix(1_000_000, 0)
	if l.Allow("a", t0) != 0 {
		t.Fatal("the first event was refused")
	}
	if l.Allow("a", t0.Add(time.Hour)) == 0 {
		t.Fatal("a second event an hour later was allowed at 1e-300/s")
	}
}

// A dropped idle bucket answers exactly as the kept one would have: full.
func TestSendLimiterIdleDropKeepsAnswers(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	l := transport.NewSendLimiter(1, 2, 0)
	l.Allow("a", t0)
	l.Allow("a", t0)
	t1 := t0.Add(2 * time.Second)
	if l.Allow("a", t1) != 0 || l.Allow("a", t1) != 0 {
		t.Fatal("a full bucket after 2 s allowed fewer than 2 events")
	}
	if l.Allow("a", t1) == 0 {
		t.Fatal("a third event allowed: the bucket came back over its burst")
	}
}

// A "to" over the node's limit is 400 naming the field and the limit; the
// default limit is api.MaxRecipients.
func TestMaxRecipients(t *testing.T) {
	for _, tc := range []struct {
		limit, n int
		want     int
		msg      string
	}{
		{3, 3, http.StatusOK, ""},
		{3, 4, http.StatusBadRequest, "to: 4 recipients, at most 3 (--max-recipients)"},
		{0, api.MaxRecipients, http.StatusOK, ""},
		{0, api.MaxRecipients + 1, http.StatusBadRequest, fmt.Sprintf("at most %d", api.MaxRecipients)},
	} {
		fake := limitsFake(t)
		// The bound counts names: up to api.MaxRecipients of them, more
		// than a test registers, so names no one answers to are let
		// through here.
		if _, err := fake.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "unknown_recipients", Value: json.RawMessage(`"accept"`)}); err != nil {
			t.Fatal(err)
		}
		srv := serve(t, fake, transport.ServerOptions{Limits: transport.Limits{MaxRecipients: tc.limit}})
		r := do(t, "POST", srv.URL+"/v1/messages", sendBody("w1", tc.n), nil)
		if r.status != tc.want {
			t.Errorf("limit %d, %d recipients: %d %s, want %d", tc.limit, tc.n, r.status, r.body, tc.want)
			continue
		}
		if tc.want == http.StatusOK {
			continue
		}
		if code, msg := errorOf(t, r.body); code != api.CodeInvalid || !strings.Contains(msg, tc.msg) {
			t.Errorf("limit %d, %d recipients: %s %q, want invalid with %q", tc.limit, tc.n, code, msg, tc.msg)
		}
		if fake.NumStored() != 0 {
			t.Errorf("limit %d: a refused send was stored", tc.limit)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		l     transport.Limits
		field string
	}{
		{transport.Limits{}, ""},
		{transport.Limits{SendRate: 50, SendBurst: 100, MaxRecipients: 10, MaxStreamsPerAgent: 16}, ""},
		{transport.Limits{SendRate: -1}, "SendRate"},
		{transport.Limits{SendRate: math.NaN()}, "SendRate"},
		{transport.Limits{SendRate: math.Inf(1)}, "SendRate"},
		{transport.Limits{SendBurst: -1}, "SendBurst"},
		{transport.Limits{SendBurst: 5}, "SendBurst"}, // a burst without a rate limits nothing
		{transport.Limits{MaxRecipients: -1}, "MaxRecipients"},
		{transport.Limits{MaxRecipients: api.MaxRecipients + 1}, "MaxRecipients"},
		{transport.Limits{MaxStreamsPerAgent: -1}, "MaxStreamsPerAgent"},
	} {
		err := tc.l.Validate()
		var fe *api.FieldError
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v, want valid", tc.l, err)
			}
			continue
		}
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a FieldError on %s", tc.l, err, tc.field)
		}
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "SendBurst") {
			t.Errorf("NewServer with a negative burst: panic %v, want one naming SendBurst", p)
		}
	}()
	transport.NewServer(limitsFake(t), transport.ServerOptions{Limits: transport.Limits{SendBurst: -1}})
}

func TestDefaultSendBurst(t *testing.T) {
	for rate, want := range map[float64]int{0.1: 1, 0.5: 1, 1: 2, 2.2: 5, 50: 100, 1e300: math.MaxInt32} {
		if got := transport.DefaultSendBurst(rate); got != want {
			t.Errorf("DefaultSendBurst(%v) = %d, want %d", rate, got, want)
		}
	}
}

// openStream opens a stream and waits for its ready event; cancel closes
// it. A refusal is returned.
func openStream(t *testing.T, c *client.Client, q api.StreamQuery) (closeStream func(), err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.Stream(ctx, q, func(ev api.StreamEvent) error {
			if ev.Ready {
				close(ready)
			}
			return nil
		})
	}()
	select {
	case <-ready:
		return func() { cancel(); <-done }, nil
	case err := <-done:
		cancel()
		return nil, err
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("stream %+v: no ready event within 10s", q)
		return nil, nil
	}
}

// Streams past the per-agent cap get 429 with Retry-After; the count is per
// agent; closing a stream frees its slot.
func TestMaxStreamsPerAgent(t *testing.T) {
	fake := limitsFake(t)
	newStreamState(t, fake)
	srv := serve(t, fake, transport.ServerOptions{Limits: transport.Limits{MaxStreamsPerAgent: 2}})
	c := client.NewClient(srv.URL, nil)
	w1 := api.StreamQuery{Agent: "w1"}
	var open []func()
	for range 2 {
		cancel, err := openStream(t, c, w1)
		if err != nil {
			t.Fatalf("stream within the cap: %v", err)
		}
		open = append(open, cancel)
	}
	t.Cleanup(func() {
		for _, cancel := range open {
			cancel()
		}
	})
	_, err := openStream(t, c, w1)
	if !errors.Is(err, api.ErrRateLimited) || api.RetryAfter(err) != time.Second {
		t.Fatalf("third stream of w1: %v (retry after %v), want ErrRateLimited after 1s", err, api.RetryAfter(err))
	}
	if !strings.Contains(err.Error(), "agent w1 has 2 streams open") || !strings.Contains(err.Error(), "--max-streams-per-agent") {
		t.Errorf("refusal %q does not name the agent and the limit", err)
	}
	r := do(t, "GET", srv.URL+"/v1/stream?agent=w1", "", nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
		t.Errorf("raw third stream: %d, Retry-After %q; want 429 after 1", r.status, r.header.Get("Retry-After"))
	}
	cancelW2, err := openStream(t, c, api.StreamQuery{Agent: "w2"})
	if err != nil {
		t.Fatalf("another agent's stream: %v", err)
	}
	cancelW2()

	// Close one of w1's: its slot frees once the server sees the close.
	open[0]()
	open = open[1:]
	deadline := time.Now().Add(5 * time.Second)
	for {
		cancel, err := openStream(t, c, w1)
		if err == nil {
			open = append(open, cancel)
			break
		}
		if !errors.Is(err, api.ErrRateLimited) || time.Now().After(deadline) {
			t.Fatalf("stream after closing one: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stream with no agent counts against its client's IP without auth, and
// against the identity's agent with it.
func TestMaxStreamsKeys(t *testing.T) {
	fake := limitsFake(t)
	newStreamState(t, fake)
	srv := httptest.NewServer(asAgent(transport.NewServer(fake, transport.ServerOptions{
		Logger: discard, Limits: transport.Limits{MaxStreamsPerAgent: 1}}), api.RoleModerator))
	t.Cleanup(srv.Close)
	anon := client.NewClient(srv.URL, nil)
	cancel, err := openStream(t, anon, api.StreamQuery{})
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	defer cancel()
	if _, err := openStream(t, anon, api.StreamQuery{Channel: "ops"}); !errors.Is(err, api.ErrRateLimited) ||
		!strings.Contains(err.Error(), "client 127.0.0.1") {
		t.Fatalf("second stream from the same IP: %v, want 429 naming client 127.0.0.1", err)
	}
	as := func(agent string) *client.Client {
		return client.NewClient(srv.URL, &http.Client{Transport: headerTransport{"X-Test-Agent", agent}})
	}
	// Same IP, but identities: counted per agent.
	for _, a := range []string{"w1", "w2"} {
		cancel, err := openStream(t, as(a), api.StreamQuery{})
		if err != nil {
			t.Fatalf("%s's first stream: %v", a, err)
		}
		defer cancel()
	}
	if _, err := openStream(t, as("w1"), api.StreamQuery{Agent: "w3"}); !errors.Is(err, api.ErrRateLimited) ||
		!strings.Contains(err.Error(), "agent w1 ") {
		t.Fatalf("w1's second stream: %v, want 429 naming agent w1", err)
	}
}

type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// bounded gives r a deadline, so a handler that wrongly runs (a stream)
// fails the test instead of hanging it.
func bounded(t *testing.T, r *http.Request) *http.Request {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	t.Cleanup(cancel)
	return r.WithContext(ctx)
}

// Every route refuses a body over its ceiling with 413 before its handler
// runs, and no route refuses one at its ceiling with 413. The walk is over
// Server.Routes, so a route added later is covered without editing this
// test.
func TestEveryRouteCapsItsBody(t *testing.T) {
	const maxMsg = 1000
	fake := limitsFake(t)
	newStreamState(t, fake) // handlers that read the state have one
	const maxArtifact = 1 << 20
	s := transport.NewServer(fake, transport.ServerOptions{Logger: discard, MaxMessageBytes: maxMsg,
		Limits: transport.Limits{MaxArtifactBytes: maxArtifact}})
	routes := s.Routes()
	// The ceilings that are not the 64 KiB control default; a rename or a
	// lost registration fails here.
	want := map[string]int64{
		"POST /v1/messages":           maxMsg,
		"PUT /v1/rules":               rules.MaxBytes,
		"PUT /v1/bulletin":            api.MaxBulletinBytes + 4<<10,
		"PATCH /v1/bulletin":          api.MaxBulletinBytes + 4<<10,
		"POST /v1/locks":              16 << 10,
		"POST /v1/locks/renew":        16 << 10,
		"POST /v1/locks/release":      16 << 10,
		"POST /v1/locks/check":        16 << 10,
		"PUT /v1/presence/{agent}":    4 << 10,
		"POST /v1/internal/entry":     2 << 20,
		"POST /v1/internal/entries":   2<<20 + 10,
		"POST /v1/cluster/join":       64 << 10,
		"DELETE /v1/agents/{id}":      64 << 10,
		"PUT /v1/artifacts":           maxArtifact,
		"PUT /v1/internal/blobs/{id}": maxArtifact,
	}
	seen := map[string]bool{}
	big := bytes.Repeat([]byte("x"), 3<<20)
	writes := 0
	for _, rt := range routes {
		if lim, ok := want[rt.Pattern]; ok && rt.MaxBodyBytes != lim {
			t.Errorf("%s: ceiling %d, want %d", rt.Pattern, rt.MaxBodyBytes, lim)
		}
		seen[rt.Pattern] = true
		method, path, ok := strings.Cut(rt.Pattern, " ")
		if !ok {
			continue // the catch-all "/"
		}
		path = pathParam.ReplaceAllString(path, "a1")
		if int64(len(big)) <= rt.MaxBodyBytes {
			t.Fatalf("%s: ceiling %d over the test's body", rt.Pattern, rt.MaxBodyBytes)
		}
		// Over the ceiling, declared: 413 naming the route and the limit.
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, bounded(t, httptest.NewRequest(method, path, bytes.NewReader(big[:rt.MaxBodyBytes+1]))))
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with %d bytes: %d %s, want 413", rt.Pattern, rt.MaxBodyBytes+1, rec.Code, rec.Body)
			continue
		}
		code, msg := errorOf(t, rec.Body.Bytes())
		if code != api.CodeTooLarge || !strings.Contains(msg, rt.Pattern) || !strings.Contains(msg, fmt.Sprint(rt.MaxBodyBytes)) {
			t.Errorf("%s: 413 body %s %q, want too_large naming the route and %d", rt.Pattern, code, msg, rt.MaxBodyBytes)
		}
		if method == http.MethodGet || method == http.MethodHead {
			continue
		}
		writes++
		// At the ceiling: whatever the handler makes of it, not 413.
		body := append([]byte(`{"pad":"`), big[:rt.MaxBodyBytes-10]...)
		body = append(body, `"}`...)
		rec = httptest.NewRecorder()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s with a body at the ceiling panicked: %v", rt.Pattern, p)
				}
			}()
			s.ServeHTTP(rec, bounded(t, httptest.NewRequest(method, path, bytes.NewReader(body))))
		}()
		if rec.Code == http.StatusRequestEntityTooLarge {
			t.Errorf("%s with %d bytes (its ceiling): 413 %s", rt.Pattern, len(body), rec.Body)
		}
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("route %s is not registered", p)
		}
	}
	if writes < 20 {
		t.Errorf("walked %d write routes; the route list looks incomplete: %v", writes, routes)
	}
}

// A chunked body (no Content-Length) is capped while the handler reads it.
func TestChunkedBodyCapped(t *testing.T) {
	s := transport.NewServer(limitsFake(t), transport.ServerOptions{Logger: discard, MaxMessageBytes: 1000})
	for _, tc := range []struct {
		method, path string
		size         int
	}{
		{"POST", "/v1/messages", 1001},
		{"POST", "/v1/cluster/join", 64<<10 + 1},
		{"PUT", "/v1/cluster/config", 64<<10 + 1},
	} {
		body := `{"from":"` + strings.Repeat("x", tc.size) + `"}`
		req := httptest.NewRequest(tc.method, tc.path, io.NopCloser(strings.NewReader(body)))
		req.ContentLength = -1
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s chunked, %d bytes: %d %s, want 413", tc.method, tc.path, len(body), rec.Code, rec.Body)
		}
	}
}

// A forwarded write may carry a message at --max-message-bytes re-encoded
// (up to 6 bytes a character): its ceiling grows with the message limit.
func TestForwardCeilingFollowsMaxMessageBytes(t *testing.T) {
	for _, tc := range []struct {
		maxMsg, want int64
	}{
		{100 << 10, 2 << 20},
		{1 << 20, 8 << 20},
	} {
		s := transport.NewServer(limitsFake(t), transport.ServerOptions{Logger: discard, MaxMessageBytes: tc.maxMsg})
		for _, rt := range s.Routes() {
			if rt.Pattern == "POST /v1/internal/entry" && rt.MaxBodyBytes != tc.want {
				t.Errorf("max message %d: %s ceiling %d, want %d", tc.maxMsg, rt.Pattern, rt.MaxBodyBytes, tc.want)
			}
		}
	}
}

// A stream with no agent over a Unix socket (maosd's <data dir>/api.sock,
// RemoteAddr "@") counts against the client "local", one key of its own:
// not an empty or "@" key, and not 127.0.0.1's over TCP.
func TestMaxStreamsKeysUnixSocket(t *testing.T) {
	fake := limitsFake(t)
	newStreamState(t, fake)
	h := transport.NewServer(fake, transport.ServerOptions{Logger: discard, Limits: transport.Limits{MaxStreamsPerAgent: 1}})
	dir, err := os.MkdirTemp("", "maos-sock") // short: a socket's path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	unixSrv := &http.Server{Handler: h}
	go func() { _ = unixSrv.Serve(ln) }()
	t.Cleanup(func() { _ = unixSrv.Close() })
	tcpSrv := httptest.NewServer(h)
	t.Cleanup(tcpSrv.Close)

	tr := client.NewHTTPTransport()
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}
	local := client.NewClient("http://maosd.local", &http.Client{Transport: tr})
	cancel, err := openStream(t, local, api.StreamQuery{})
	if err != nil {
		t.Fatalf("first stream over the socket: %v", err)
	}
	defer cancel()
	if _, err := openStream(t, local, api.StreamQuery{Channel: "ops"}); !errors.Is(err, api.ErrRateLimited) ||
		!strings.Contains(err.Error(), "client local has 1 streams open") {
		t.Fatalf("second stream over the socket: %v, want 429 naming client local", err)
	}
	// 127.0.0.1 over TCP has its own slot.
	cancelTCP, err := openStream(t, client.NewClient(tcpSrv.URL, nil), api.StreamQuery{})
	if err != nil {
		t.Fatalf("a TCP client's stream beside the socket's: %v", err)
	}
	cancelTCP()
}
