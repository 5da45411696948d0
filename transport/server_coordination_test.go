package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// coordEnv is the API in front of the fake service with a real state
// machine: Apply stamps the command with the env's clock (set by the test,
// so lease expiry is exact) and applies it at the next index.
type coordEnv struct {
	t      *testing.T
	fake   *transporttest.Service
	state  *fsm.FSM
	url    string
	client *client.Client

	mu sync.Mutex
	ts int64
}

var coordT0 = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC).UnixNano()

func newCoordEnv(t *testing.T) *coordEnv {
	t.Helper()
	e := &coordEnv{t: t, ts: coordT0}
	e.fake = transporttest.New(t, transporttest.Clock(func(uint64) time.Time {
		e.mu.Lock()
		defer e.mu.Unlock()
		return time.Unix(0, e.ts)
	}))
	e.state = e.fake.FSM()
	srv := serve(t, e.fake, transport.ServerOptions{})
	e.url = srv.URL
	e.client = client.NewClient(srv.URL, nil)
	return e
}

// at sets the timestamp of the next entries.
func (e *coordEnv) at(ts int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ts = ts
}

func (e *coordEnv) do(method, path, body string, h http.Header) reply {
	e.t.Helper()
	return do(e.t, method, e.url+path, body, h)
}

// dataDump is the state without the meta bucket, which every entry moves.
func (e *coordEnv) dataDump() string {
	e.t.Helper()
	var buf bytes.Buffer
	if err := e.state.Dump(&buf); err != nil {
		e.t.Fatal(err)
	}
	var keep []string
	for line := range strings.Lines(buf.String()) {
		if !strings.HasPrefix(line, "meta ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

func (e *coordEnv) applies() int { return len(e.fake.CallsTo("Apply")) }

// coordError decodes {"error":{code,message}} and whatever else the body has.
func coordError(t *testing.T, r reply) (code, msg string, rest map[string]json.RawMessage) {
	t.Helper()
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &outer); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	var apiErr api.APIError
	if err := json.Unmarshal(outer["error"], &apiErr); err != nil || apiErr.Code == "" || apiErr.Message == "" {
		t.Fatalf("no error object in %s", r.body)
	}
	delete(outer, "error")
	return apiErr.Code, apiErr.Message, outer
}

func decodeAs[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return v
}

func TestBulletinHTTP(t *testing.T) {
	e := newCoordEnv(t)
	r := e.do("GET", "/v1/bulletin", "", nil)
	b := decodeAs[api.Bulletin](t, r)
	if r.status != 200 || b.Version != 0 || !strings.Contains(string(b.Doc), `"system_status":"normal"`) {
		t.Fatalf("empty GET = %d %s", r.status, r.body)
	}

	r = e.do("PUT", "/v1/bulletin?by=orchestrator", `{"system_status":"normal","current_phase":"implementation",
		"warnings":[],"shared_resources":{"api_server":"available"}}`, nil)
	put := decodeAs[api.BulletinResult](t, r)
	if r.status != 200 || put.Version != 1 || put.UpdatedBy != "orchestrator" || put.Conflict {
		t.Fatalf("PUT = %d %s", r.status, r.body)
	}

	// PATCH with if_version in the body: applied, the key is not stored.
	r = e.do("PATCH", "/v1/bulletin?by=ops", `{"system_status":"degraded","if_version":1}`, nil)
	patched := decodeAs[api.BulletinResult](t, r)
	if r.status != 200 || patched.Version != 2 || strings.Contains(string(patched.Doc), "if_version") ||
		!strings.Contains(string(patched.Doc), `"current_phase":"implementation"`) {
		t.Fatalf("PATCH = %d %s", r.status, r.body)
	}

	// A lost compare-and-set: 409 with the current version, nothing changed.
	before := e.dataDump()
	for _, tc := range []struct {
		method, body string
		h            http.Header
	}{
		{"PATCH", `{"current_phase":"x","if_version":1}`, nil},
		{"PUT", `{"current_phase":"x"}`, http.Header{"If-Match": {`"1"`}}},
		{"PATCH", `{"current_phase":"x"}`, http.Header{"If-Match": {`W/"0"`}}},
	} {
		r = e.do(tc.method, "/v1/bulletin?by=ops", tc.body, tc.h)
		code, msg, rest := coordError(t, r)
		if r.status != 409 || code != api.CodeConflict || string(rest["version"]) != "2" ||
			!strings.Contains(msg, "at version 2") {
			t.Errorf("%s %s %v = %d %s, want 409 with version 2", tc.method, tc.body, tc.h, r.status, r.body)
		}
	}
	if e.dataDump() != before {
		t.Error("a lost compare-and-set changed the state")
	}
	r = e.do("PATCH", "/v1/bulletin?by=ops", `{"current_phase":"review"}`, http.Header{"If-Match": {`"2"`}})
	current := decodeAs[api.BulletinResult](t, r)
	// The version is the Raft index of the change; the refused entries
	// took indexes too.
	if r.status != 200 || current.Version != 6 {
		t.Errorf("PATCH with If-Match at the current version = %d %s", r.status, r.body)
	}

	// Through the client.
	ctx := context.Background()
	v := uint64(2)
	_, err := e.client.PutBulletin(ctx, json.RawMessage(`{"current_phase":"lost"}`), api.BulletinWrite{IfVersion: &v, By: "ops"})
	var ce *client.BulletinConflictError
	var apiErr *api.APIError
	if !errors.As(err, &ce) || ce.Version != current.Version || !errors.Is(err, api.ErrConflict) || !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("client CAS error = %#v, want a BulletinConflictError at version %d", err, current.Version)
	}
	res, err := e.client.PatchBulletin(ctx, json.RawMessage(`{"warnings":["disk"]}`), api.BulletinWrite{IfVersion: &ce.Version, By: "ops"})
	if err != nil || res.Version != 8 || res.UpdatedBy != "ops" || !strings.Contains(string(res.Doc), `"warnings":["disk"]`) {
		t.Errorf("client PATCH = %+v, %v", res, err)
	}
	got, err := e.client.Bulletin(ctx, api.Strong)
	if err != nil || got.Version != 8 {
		t.Errorf("client GET = %+v, %v", got, err)
	}
	if calls := e.fake.CallsTo("Linearize"); len(calls) == 0 || calls[len(calls)-1].Cons != api.Strong {
		t.Errorf("strong GET did not linearize: %+v", calls)
	}
}

// refusal is a request the coordination API must refuse: with status and
// code, mention in the message, and having reached the state machine or
// not (proposes: refused at apply, such as a patch's merged result).
type refusal struct {
	name, method, path, body string
	h                        http.Header
	status                   int
	code, mention            string
	proposes                 bool
}

// checkRefusals sends each request and checks it is refused as it says,
// leaving the state as it was.
func (e *coordEnv) checkRefusals(t *testing.T, tests []refusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, applies := e.dataDump(), e.applies()
			r := e.do(tt.method, tt.path, tt.body, tt.h)
			code, msg, _ := coordError(t, r)
			if r.status != tt.status || code != tt.code || !strings.Contains(msg, tt.mention) {
				t.Errorf("= %d %s %q, want %d %s mentioning %q", r.status, code, msg, tt.status, tt.code, tt.mention)
			}
			if e.dataDump() != before {
				t.Error("the refused request changed the state")
			}
			if proposed := e.applies() > applies; proposed != tt.proposes {
				t.Errorf("proposed = %t, want %t", proposed, tt.proposes)
			}
		})
	}
}

// TestBulletinHTTPBadInput: each bad request is a clear 4xx naming what to
// fix, and none changes the state.
func TestBulletinHTTPBadInput(t *testing.T) {
	e := newCoordEnv(t)
	e.do("PUT", "/v1/bulletin?by=ops", `{"shared_resources":{"a":"`+strings.Repeat("x", api.MaxBulletinBytes/2)+`"}}`, nil)
	e.checkRefusals(t, []refusal{
		{"malformed JSON", "PUT", "/v1/bulletin?by=ops", `{"a":`, nil, 400, "invalid", "malformed JSON", false},
		{"an array", "PATCH", "/v1/bulletin?by=ops", `[1]`, nil, 400, "invalid", "got an array", false},
		{"null", "PUT", "/v1/bulletin?by=ops", `null`, nil, 400, "invalid", "got null", false},
		{"empty", "PUT", "/v1/bulletin?by=ops", ``, nil, 400, "bad_request", "empty body", false},
		{"bad system_status", "PATCH", "/v1/bulletin?by=ops", `{"system_status":"on fire"}`, nil, 400, "invalid", "system_status: want one of normal, degraded, maintenance", false},
		{"warnings not an array", "PUT", "/v1/bulletin?by=ops", `{"warnings":"x"}`, nil, 400, "invalid", "warnings", false},
		{"if_version not a number", "PATCH", "/v1/bulletin?by=ops", `{"if_version":"3"}`, nil, 400, "invalid", "if_version", false},
		{"negative if_version", "PATCH", "/v1/bulletin?by=ops", `{"if_version":-1}`, nil, 400, "invalid", "if_version", false},
		{"bad If-Match", "PATCH", "/v1/bulletin?by=ops", `{"a":1}`, http.Header{"If-Match": {"abc"}}, 400, "bad_request", "If-Match", false},
		{"If-Match and if_version disagree", "PATCH", "/v1/bulletin?by=ops", `{"a":1,"if_version":2}`, http.Header{"If-Match": {`"1"`}}, 400, "bad_request", "disagree", false},
		{"bad by", "PATCH", "/v1/bulletin?by=Not%20An%20Id", `{"a":1}`, nil, 400, "invalid", "by", false},
		{"body over the limit", "PUT", "/v1/bulletin?by=ops", `{"a":"` + strings.Repeat("x", api.MaxBulletinBytes+5<<10) + `"}`, nil, 413, "too_large", "capped at 65536 bytes", false},
		{"document over the limit", "PUT", "/v1/bulletin?by=ops", `{"a":"` + strings.Repeat("x", api.MaxBulletinBytes) + `"}`, nil, 400, "invalid", "limit of 65536 bytes", false},
		{"patch result over the limit", "PATCH", "/v1/bulletin?by=ops", `{"b":"` + strings.Repeat("y", api.MaxBulletinBytes/2) + `"}`, nil, 400, "invalid", "limit of 65536 bytes", true},
	})
}

func TestLocksHTTP(t *testing.T) {
	e := newCoordEnv(t)
	r := e.do("POST", "/v1/locks", `{"path":"src/retry.go","holder":"codex","ttl":"5m"}`, nil)
	granted := decodeAs[api.LockResult](t, r)
	if r.status != 200 || granted.Outcome != api.LockGranted || granted.Lock.Token != 1 ||
		!granted.Lock.ExpiresAt.Equal(time.Unix(0, coordT0).Add(5*time.Minute)) {
		t.Fatalf("acquire = %d %s", r.status, r.body)
	}

	// Another holder: 409 with the holder, its token and expiry.
	e.at(coordT0 + int64(time.Minute))
	before := e.dataDump()
	r = e.do("POST", "/v1/locks", `{"path":"src/retry.go","holder":"claude","ttl":60}`, nil)
	code, msg, rest := coordError(t, r)
	var lock api.Lock
	_ = json.Unmarshal(rest["lock"], &lock)
	if r.status != 409 || code != api.CodeConflict || string(rest["outcome"]) != `"held"` ||
		lock.Holder != "codex" || lock.Token != 1 || !lock.ExpiresAt.Equal(granted.Lock.ExpiresAt) ||
		!strings.Contains(msg, "held by codex (token 1) until 2026-11-21T10:35:00Z") {
		t.Errorf("contended acquire = %d %s", r.status, r.body)
	}
	if e.dataDump() != before {
		t.Error("a refused acquire changed the state")
	}

	r = e.do("POST", "/v1/locks/renew", `{"path":"src/retry.go","holder":"codex","token":1,"ttl":"10m"}`, nil)
	renewed := decodeAs[api.LockResult](t, r)
	// Entry times are made monotonic: the renewal is stamped a few ns
	// after the refused acquire at T+1m, and lasts 10m from there.
	if r.status != 200 || renewed.Outcome != api.LockExtended || renewed.Lock.Token != 1 ||
		renewed.Lock.RenewedAt.Sub(time.Unix(0, coordT0)) < time.Minute || renewed.Lock.RenewedAt.Sub(time.Unix(0, coordT0)) > time.Minute+time.Millisecond ||
		!renewed.Lock.ExpiresAt.Equal(renewed.Lock.RenewedAt.Add(10*time.Minute)) {
		t.Errorf("renew = %d %s", r.status, r.body)
	}

	r = e.do("POST", "/v1/locks/check", `{"path":"src/retry.go","token":1}`, nil)
	if c := decodeAs[api.LockCheck](t, r); r.status != 200 || !c.Current || c.Holder != "codex" || c.Token != 1 {
		t.Errorf("check = %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/locks?prefix=src/&holder=codex", "", nil)
	if p := decodeAs[api.LockPage](t, r); r.status != 200 || len(p.Locks) != 1 || p.Locks[0].Path != "src/retry.go" || p.HasMore {
		t.Errorf("list = %d %s", r.status, r.body)
	}
	// The bulletin shows the lock.
	r = e.do("GET", "/v1/bulletin", "", nil)
	if !strings.Contains(string(r.body), `"src/retry.go":{"managed_by":"lock","holder":"codex","token":1`) {
		t.Errorf("bulletin does not show the lock: %s", r.body)
	}

	// Release by someone else: 409 not_holder; by the holder: 200.
	r = e.do("POST", "/v1/locks/release", `{"path":"src/retry.go","holder":"claude","token":1}`, nil)
	if _, _, rest := coordError(t, r); r.status != 409 || string(rest["outcome"]) != `"not_holder"` {
		t.Errorf("release by another = %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/locks/release", `{"path":"src/retry.go","holder":"codex","token":1}`, nil)
	if res := decodeAs[api.LockResult](t, r); r.status != 200 || res.Outcome != api.LockReleased {
		t.Errorf("release = %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/locks/check", `{"path":"src/retry.go","token":1}`, nil)
	if c := decodeAs[api.LockCheck](t, r); r.status != 200 || c.Current || c.Reason == "" {
		t.Errorf("check after release = %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/bulletin", "", nil)
	if strings.Contains(string(r.body), "src/retry.go") {
		t.Errorf("bulletin still shows the released lock: %s", r.body)
	}
}

// TestLockExpiredRenewHTTP: a renew at the lease's expiry time is a 409
// "expired" and changes nothing; acquiring again gives a new token.
func TestLockExpiredRenewHTTP(t *testing.T) {
	e := newCoordEnv(t)
	ctx := context.Background()
	l, err := e.client.AcquireLock(ctx, api.LockAcquireCommand{Path: "db", Holder: "codex", TTL: api.LockTTL(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	e.at(coordT0 + int64(time.Second))
	before := e.dataDump()
	_, err = e.client.RenewLock(ctx, api.LockRenewCommand{Path: "db", Holder: "codex", Token: l.Lock.Token, TTL: api.LockTTL(time.Minute)})
	var refused *client.LockRefusedError
	if !errors.As(err, &refused) || refused.Outcome != api.LockLapsed || refused.Lock == nil || !refused.Lock.Expired ||
		!errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "expired at 2026-11-21T10:30:01Z") {
		t.Fatalf("renew at expiry: %#v (%v), want a 409 expired refusal", err, err)
	}
	if e.dataDump() != before {
		t.Error("an expired renew changed the state")
	}
	again, err := e.client.AcquireLock(ctx, api.LockAcquireCommand{Path: "db", Holder: "codex", TTL: api.LockTTL(time.Minute)})
	if err != nil || again.Outcome != api.LockGranted || again.Lock.Token <= l.Lock.Token {
		t.Errorf("re-acquire = %+v, %v", again, err)
	}
	// The client's check and list.
	c, err := e.client.CheckLock(ctx, "db", l.Lock.Token, api.Local)
	if err != nil || c.Current || c.Token != again.Lock.Token {
		t.Errorf("check of the old token = %+v, %v", c, err)
	}
	page, err := e.client.Locks(ctx, api.LockQuery{Holder: "codex", Limit: 5}, api.Local)
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Token != again.Lock.Token {
		t.Errorf("list = %+v, %v", page, err)
	}
	// A forced release through the client.
	rel, err := e.client.ReleaseLock(ctx, api.LockReleaseCommand{Path: "db", Force: true, By: "admin"})
	if err != nil || rel.Outcome != api.LockReleased {
		t.Errorf("forced release = %+v, %v", rel, err)
	}
}

func TestLocksHTTPBadInput(t *testing.T) {
	e := newCoordEnv(t)
	e.do("POST", "/v1/locks", `{"path":"db","holder":"codex","ttl":"1m"}`, nil)
	long := strings.Repeat("a", api.MaxLockPathLen+1)
	e.checkRefusals(t, []refusal{
		{"unknown field", "POST", "/v1/locks", `{"path":"x","holder":"codex","ttl":"1m","mode":"x"}`, nil, 400, "unknown_field", "mode", false},
		{"no path", "POST", "/v1/locks", `{"holder":"codex","ttl":"1m"}`, nil, 400, "invalid", "path: required", false},
		{"path too long", "POST", "/v1/locks", `{"path":"` + long + `","holder":"codex","ttl":"1m"}`, nil, 400, "invalid", "at most 1024", false},
		{"path with a control character", "POST", "/v1/locks", `{"path":"a\u0007b","holder":"codex","ttl":"1m"}`, nil, 400, "invalid", "control characters", false},
		{"bad holder", "POST", "/v1/locks", `{"path":"x","holder":"Codex","ttl":"1m"}`, nil, 400, "invalid", "holder", false},
		{"ttl not a duration", "POST", "/v1/locks", `{"path":"x","holder":"codex","ttl":"soon"}`, nil, 400, "bad_request", "ttl", false},
		{"ttl too short", "POST", "/v1/locks", `{"path":"x","holder":"codex","ttl":0.5}`, nil, 400, "invalid", "outside the limits 1s to 24h0m0s", false},
		{"ttl too long", "POST", "/v1/locks", `{"path":"x","holder":"codex","ttl":"48h"}`, nil, 400, "invalid", "outside the limits 1s to 24h0m0s", false},
		{"no ttl", "POST", "/v1/locks", `{"path":"x","holder":"codex"}`, nil, 400, "invalid", "ttl: required", false},
		{"body too large", "POST", "/v1/locks", `{"path":"` + strings.Repeat("b", 20<<10) + `"}`, nil, 413, "too_large", "lock path is at most 1024", false},
		{"renew without token", "POST", "/v1/locks/renew", `{"path":"db","holder":"codex","ttl":"1m"}`, nil, 400, "invalid", "token", false},
		{"renew of an unknown lock", "POST", "/v1/locks/renew", `{"path":"nope","holder":"codex","token":1,"ttl":"1m"}`, nil, 404, "not_found", `no lock on "nope"`, true},
		{"renew with a stale token", "POST", "/v1/locks/renew", `{"path":"db","holder":"codex","token":9,"ttl":"1m"}`, nil, 409, "conflict", "token 9 is not the current", true},
		{"release without holder", "POST", "/v1/locks/release", `{"path":"db","token":1}`, nil, 400, "invalid", "holder: required", false},
		{"forced release without by", "POST", "/v1/locks/release", `{"path":"db","force":true}`, nil, 400, "invalid", "by: required with force", false},
		{"release of an unknown lock", "POST", "/v1/locks/release", `{"path":"nope","holder":"codex","token":1}`, nil, 404, "not_found", "no lock", true},
		{"check without token", "POST", "/v1/locks/check", `{"path":"db"}`, nil, 400, "invalid", "token", false},
		{"check malformed", "POST", "/v1/locks/check", `{"path":`, nil, 400, "bad_request", "malformed JSON", false},
		{"list with a bad holder", "GET", "/v1/locks?holder=Bad!", "", nil, 400, "bad_request", "holder", false},
		{"list with a bad limit", "GET", "/v1/locks?limit=5000", "", nil, 400, "bad_request", "limit", false},
		{"list with a long prefix", "GET", "/v1/locks?prefix=" + long, "", nil, 400, "bad_request", "prefix", false},
		{"list with a bad consistency", "GET", "/v1/locks?consistency=eventual", "", nil, 400, "bad_request", "consistency", false},
	})
}

// TestCoordinationUnexpectedResult: an apply answer that is not a lock or
// bulletin result is a 500, never mistaken for a grant.
func TestCoordinationUnexpectedResult(t *testing.T) {
	f := transporttest.New(t)
	f.OnApply(func(api.Op, json.RawMessage) (any, error) { return map[string]any{}, nil })
	srv := serve(t, f, transport.ServerOptions{})
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/locks", `{"path":"db","holder":"codex","ttl":"1m"}`},
		{"POST", "/v1/locks/release", `{"path":"db","holder":"codex","token":1}`},
		{"PATCH", "/v1/bulletin?by=ops", `{"a":1}`},
	} {
		r := do(t, tc.method, srv.URL+tc.path, tc.body, nil)
		if code, _ := errorOf(t, r.body); r.status != 500 || code != api.CodeInternal {
			t.Errorf("%s %s with an empty apply result = %d %s, want 500", tc.method, tc.path, r.status, r.body)
		}
	}
	// Service errors pass through with their status.
	f.Fail("Apply", api.ErrNoLeader)
	r := do(t, "POST", srv.URL+"/v1/locks", `{"path":"db","holder":"codex","ttl":"1m"}`, nil)
	if code, _ := errorOf(t, r.body); r.status != 503 || code != api.CodeNoLeader {
		t.Errorf("no leader = %d %s", r.status, r.body)
	}
}
