package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// coordEntry encodes op with body as the entry at index stamped ts.
func coordEntry(tb testing.TB, index uint64, ts int64, op api.Op, body any) *raft.Log {
	tb.Helper()
	data, err := Encode(op, ts, body)
	if err != nil {
		tb.Fatalf("Encode %s: %v", op, err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

// coordFSM is a state machine fed entries one at a time at increasing
// indexes with chosen timestamps.
type coordFSM struct {
	tb    testing.TB
	f     *FSM
	index uint64
}

func newCoordFSM(tb testing.TB) *coordFSM {
	f, _ := openTemp(tb)
	return &coordFSM{tb: tb, f: f}
}

// apply applies op at the next index, stamped ts, and returns the result.
func (c *coordFSM) apply(ts int64, op api.Op, body any) any {
	c.tb.Helper()
	c.index++
	return applyOne(c.f, coordEntry(c.tb, c.index, ts, op, body))
}

// tick applies an entry that touches no lock, so the latest applied time
// (what reads judge expiry by) becomes ts.
func (c *coordFSM) tick(ts int64) {
	c.tb.Helper()
	c.index++
	res := applyOne(c.f, nodeEntry(c.tb, c.index, ts, api.RegisterNodeCommand{NodeID: "n1", APIAddr: "127.0.0.1:1"}))
	if _, ok := res.(*NodeInfo); !ok {
		c.tb.Fatalf("tick: %v", res)
	}
}

func (c *coordFSM) lockResult(ts int64, op api.Op, body any) *api.LockResult {
	c.tb.Helper()
	res := c.apply(ts, op, body)
	r, ok := res.(*api.LockResult)
	if !ok {
		c.tb.Fatalf("%s: result %T (%v), want *LockResult", op, res, res)
	}
	return r
}

func (c *coordFSM) acquire(ts int64, path, holder string, ttl time.Duration) *api.LockResult {
	c.tb.Helper()
	return c.lockResult(ts, api.OpLockAcquire, api.LockAcquireCommand{Path: path, Holder: holder, TTL: api.LockTTL(ttl)})
}

// granted acquires and fails the test unless the lock was granted anew.
func (c *coordFSM) granted(ts int64, path, holder string, ttl time.Duration) *api.Lock {
	c.tb.Helper()
	r := c.acquire(ts, path, holder, ttl)
	if r.Outcome != api.LockGranted || r.Lock == nil {
		c.tb.Fatalf("acquire %s by %s at %d: %+v, want granted", path, holder, ts, r)
	}
	return r.Lock
}

func (c *coordFSM) auditLines() []string {
	c.tb.Helper()
	page, err := c.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		c.tb.Fatalf("Audit: %v", err)
	}
	var out []string
	for _, ev := range page.Events {
		out = append(out, ev.Line())
	}
	return out
}

func (c *coordFSM) lastAudit() api.AuditEvent {
	c.tb.Helper()
	page, err := c.f.Audit(0, api.MaxPageLimit)
	if err != nil || len(page.Events) == 0 {
		c.tb.Fatalf("Audit: %v, %d events", err, len(page.Events))
	}
	return page.Events[len(page.Events)-1]
}

const sec = int64(time.Second)

// TestLockExpiryBoundary: a lease granted at entry time T with ttl D covers
// [T, T+D): at T+D-1 it is held (another acquire is refused, the holder's
// renew works, check says current), at T+D it has expired (another acquire
// takes it over with a new token, the holder's renew is refused as
// expired, check says not current). All from entry timestamps.
func TestLockExpiryBoundary(t *testing.T) {
	const ttl = 30 * time.Second
	T := baseTS
	end := T + int64(ttl)
	tests := []struct {
		name    string
		at      int64
		holder  string // acquire by holder ("" means: renew by codex)
		outcome string
	}{
		{"other holder one ns before expiry", end - 1, "claude", api.LockHeld},
		{"other holder at expiry", end, "claude", api.LockGranted},
		{"other holder after expiry", end + sec, "claude", api.LockGranted},
		{"renew one ns before expiry", end - 1, "", api.LockExtended},
		{"renew at expiry", end, "", api.LockLapsed},
		{"same holder re-acquires one ns before expiry", end - 1, "codex", api.LockExtended},
		{"same holder re-acquires at expiry", end, "codex", api.LockGranted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCoordFSM(t)
			first := c.granted(T, "src/retry.go", "codex", ttl)
			if first.Token != 1 || !first.ExpiresAt.Equal(time.Unix(0, end)) || first.Expired {
				t.Fatalf("grant = %+v, want token 1 expiring at T+30s", first)
			}
			before := dataDump(t, c.f)
			var r *api.LockResult
			if tt.holder == "" {
				r = c.lockResult(tt.at, api.OpLockRenew, api.LockRenewCommand{Path: "src/retry.go", Holder: "codex", Token: 1, TTL: api.LockTTL(ttl)})
			} else {
				r = c.acquire(tt.at, "src/retry.go", tt.holder, ttl)
			}
			if r.Outcome != tt.outcome {
				t.Fatalf("outcome %q (%s), want %q", r.Outcome, r.Message, tt.outcome)
			}
			switch tt.outcome {
			case api.LockHeld, api.LockLapsed:
				if after := dataDump(t, c.f); after != before {
					t.Errorf("a refused command changed the state:\nbefore %s\nafter  %s", before, after)
				}
				if r.Lock == nil || r.Lock.Holder != "codex" || r.Lock.Token != 1 || r.Message == "" {
					t.Errorf("refusal = %+v, want the current lock and a message", r)
				}
				if tt.outcome == api.LockHeld && (r.Lock.Expired || !strings.Contains(r.Message, "held by codex (token 1)")) {
					t.Errorf("held refusal = %+v %q", r.Lock, r.Message)
				}
				if tt.outcome == api.LockLapsed && (!r.Lock.Expired || !strings.Contains(r.Message, "expired")) {
					t.Errorf("expired refusal = %+v %q", r.Lock, r.Message)
				}
			case api.LockExtended:
				if r.Lock.Token != 1 || !r.Lock.ExpiresAt.Equal(time.Unix(0, tt.at+int64(ttl))) ||
					!r.Lock.RenewedAt.Equal(time.Unix(0, tt.at)) || !r.Lock.AcquiredAt.Equal(time.Unix(0, T)) {
					t.Errorf("extended lock = %+v, want token 1 until at+ttl", r.Lock)
				}
				if ev := c.lastAudit(); ev.Label != "LOCK_RENEW" || ev.From != "codex" {
					t.Errorf("audit %+v, want LOCK_RENEW by codex", ev)
				}
			case api.LockGranted:
				if r.Lock.Token != 2 || r.Lock.Holder != tt.holder || r.Previous == nil ||
					r.Previous.Token != 1 || r.Previous.Holder != "codex" || !r.Previous.Expired {
					t.Errorf("takeover = %+v previous %+v, want token 2 and the expired grant 1", r.Lock, r.Previous)
				}
				lines := c.auditLines()
				if len(lines) != 3 || !strings.Contains(lines[1], "[codex] LOCK_EXPIRED: src/retry.go token=1 expired") ||
					!strings.Contains(lines[2], "["+tt.holder+"] LOCK_ACQUIRE: src/retry.go token=2") {
					t.Errorf("audit trail:\n%s", strings.Join(lines, "\n"))
				}
			}
		})
	}
}

// TestLockCheckBoundary: reads judge expiry by the latest applied entry's
// time, with the same [T, T+D) rule.
func TestLockCheckBoundary(t *testing.T) {
	c := newCoordFSM(t)
	T := baseTS
	lock := c.granted(T, "db", "codex", time.Minute)
	end := T + int64(time.Minute)

	c.tick(end - 1)
	got, err := c.f.CheckLock("db", lock.Token)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Current || got.Expired || got.Holder != "codex" || got.Token != lock.Token ||
		!got.ExpiresAt.Equal(time.Unix(0, end)) || !got.AsOf.Equal(time.Unix(0, end-1)) {
		t.Errorf("check at T+D-1 = %+v, want current", got)
	}
	page, _ := c.f.Locks(api.LockQuery{})
	if len(page.Locks) != 1 || page.Locks[0].Expired {
		t.Errorf("list at T+D-1 = %+v", page)
	}

	c.tick(end)
	got, _ = c.f.CheckLock("db", lock.Token)
	if got.Current || !got.Expired || !strings.Contains(got.Reason, "expired") {
		t.Errorf("check at T+D = %+v, want expired", got)
	}
	page, _ = c.f.Locks(api.LockQuery{})
	if len(page.Locks) != 1 || !page.Locks[0].Expired || !page.AsOf.Equal(time.Unix(0, end)) {
		t.Errorf("list at T+D = %+v, want the lock listed as expired", page)
	}
}

func TestLockCheck(t *testing.T) {
	c := newCoordFSM(t)
	first := c.granted(baseTS, "db", "codex", time.Minute)
	c.lockResult(baseTS+sec, api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "codex", Token: first.Token})
	second := c.granted(baseTS+2*sec, "db", "claude", time.Minute)
	if second.Token <= first.Token {
		t.Fatalf("tokens %d then %d, want increasing", first.Token, second.Token)
	}
	tests := []struct {
		path    string
		token   uint64
		current bool
		reason  string
	}{
		{"db", second.Token, true, ""},
		{"db", first.Token, false, "not the current grant"},
		{"db", second.Token + 1, false, "not the current grant"},
		{"nope", 1, false, "no lock"},
	}
	for _, tt := range tests {
		got, err := c.f.CheckLock(tt.path, tt.token)
		if err != nil {
			t.Fatal(err)
		}
		if got.Current != tt.current || !strings.Contains(got.Reason, tt.reason) {
			t.Errorf("check %s %d = %+v, want current=%t reason ~%q", tt.path, tt.token, got, tt.current, tt.reason)
		}
		if tt.path == "db" && (got.Holder != "claude" || got.Token != second.Token) {
			t.Errorf("check %s %d = %+v, want claude's grant described", tt.path, tt.token, got)
		}
	}
}

func TestLockTokensAndRenewal(t *testing.T) {
	c := newCoordFSM(t)
	a := c.granted(baseTS, "src/a.go", "codex", time.Minute)
	// The same holder asking again while it holds the lock extends it.
	r := c.acquire(baseTS+10*sec, "src/a.go", "codex", 2*time.Minute)
	if r.Outcome != api.LockExtended || r.Lock.Token != a.Token || !r.Lock.ExpiresAt.Equal(time.Unix(0, baseTS+130*sec)) {
		t.Fatalf("re-acquire = %+v, want extended, same token, until +130s", r.Lock)
	}
	// Renew with the token.
	r = c.lockResult(baseTS+20*sec, api.OpLockRenew, api.LockRenewCommand{Path: "src/a.go", Holder: "codex", Token: a.Token, TTL: api.LockTTL(time.Second)})
	if r.Outcome != api.LockExtended || !r.Lock.ExpiresAt.Equal(time.Unix(0, baseTS+21*sec)) || r.Lock.TTL != api.LockTTL(time.Second) {
		t.Fatalf("renew = %+v, want until +21s (a renewal may shorten)", r.Lock)
	}
	// Release, then a new grant of the same path: a larger token.
	r = c.lockResult(baseTS+22*sec, api.OpLockRelease, api.LockReleaseCommand{Path: "src/a.go", Holder: "codex", Token: a.Token})
	if r.Outcome != api.LockReleased || r.Lock.Token != a.Token {
		t.Fatalf("release = %+v", r)
	}
	if _, err := c.f.CheckLock("src/a.go", a.Token); err != nil {
		t.Fatal(err)
	}
	b := c.granted(baseTS+23*sec, "src/a.go", "codex", time.Minute)
	if b.Token <= a.Token || b.Token != c.index {
		t.Errorf("new grant token %d, want the grant's index %d > %d", b.Token, c.index, a.Token)
	}
	// Re-acquiring after the lease lapsed is a new grant, not an extension.
	lapsed := c.acquire(baseTS+23*sec+int64(time.Minute), "src/a.go", "codex", time.Minute)
	if lapsed.Outcome != api.LockGranted || lapsed.Lock.Token <= b.Token || lapsed.Previous == nil {
		t.Errorf("re-acquire after expiry = %+v, want a new token", lapsed)
	}
	lines := c.auditLines()
	want := []string{"LOCK_ACQUIRE", "LOCK_RENEW", "LOCK_RENEW", "LOCK_RELEASE", "LOCK_ACQUIRE", "LOCK_EXPIRED", "LOCK_ACQUIRE"}
	if len(lines) != len(want) {
		t.Fatalf("audit trail:\n%s", strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], "[codex] "+w+": src/a.go token=") {
			t.Errorf("audit line %d = %q, want %s", i, lines[i], w)
		}
	}
}

// TestLockRefusalsChangeNothing: every refused lock command (invalid,
// unknown path, held, stale, expired, wrong holder) leaves the state as it
// was and says why.
func TestLockRefusalsChangeNothing(t *testing.T) {
	long := strings.Repeat("x", api.MaxLockPathLen+1)
	tests := []struct {
		name    string
		op      api.Op
		body    any
		outcome string // a refusal result, or "" for an error value
		err     error
		field   string // FieldError field, for ErrInvalid
	}{
		{"acquire held by another", api.OpLockAcquire, api.LockAcquireCommand{Path: "db", Holder: "claude", TTL: api.LockTTL(time.Minute)}, api.LockHeld, nil, ""},
		{"renew by another holder", api.OpLockRenew, api.LockRenewCommand{Path: "db", Holder: "claude", Token: 1, TTL: api.LockTTL(time.Minute)}, api.LockNotHolder, nil, ""},
		{"renew with a stale token", api.OpLockRenew, api.LockRenewCommand{Path: "db", Holder: "codex", Token: 7, TTL: api.LockTTL(time.Minute)}, api.LockStaleToken, nil, ""},
		{"release by another holder", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "claude", Token: 1}, api.LockNotHolder, nil, ""},
		{"release with a stale token", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "codex", Token: 7}, api.LockStaleToken, nil, ""},
		{"forced release pinned to another holder", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "claude", Force: true, By: "admin"}, api.LockNotHolder, nil, ""},
		{"forced release pinned to a stale token", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Token: 7, Force: true, By: "admin"}, api.LockStaleToken, nil, ""},
		{"renew of an unknown path", api.OpLockRenew, api.LockRenewCommand{Path: "nope", Holder: "codex", Token: 1, TTL: api.LockTTL(time.Minute)}, "", api.ErrNotFound, ""},
		{"release of an unknown path", api.OpLockRelease, api.LockReleaseCommand{Path: "nope", Holder: "codex", Token: 1}, "", api.ErrNotFound, ""},
		{"empty path", api.OpLockAcquire, api.LockAcquireCommand{Holder: "codex", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "path"},
		{"path too long", api.OpLockAcquire, api.LockAcquireCommand{Path: long, Holder: "codex", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "path"},
		{"path with a newline", api.OpLockAcquire, api.LockAcquireCommand{Path: "a\nb", Holder: "codex", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "path"},
		{"path with DEL", api.OpLockAcquire, api.LockAcquireCommand{Path: "a\x7fb", Holder: "codex", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "path"},
		{"no holder", api.OpLockAcquire, api.LockAcquireCommand{Path: "x", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "holder"},
		{"bad holder", api.OpLockAcquire, api.LockAcquireCommand{Path: "x", Holder: "Codex!", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "holder"},
		{"no ttl", api.OpLockAcquire, api.LockAcquireCommand{Path: "x", Holder: "codex"}, "", api.ErrInvalid, "ttl"},
		{"ttl under 1s", api.OpLockAcquire, api.LockAcquireCommand{Path: "x", Holder: "codex", TTL: api.LockTTL(999 * time.Millisecond)}, "", api.ErrInvalid, "ttl"},
		{"ttl over 24h", api.OpLockAcquire, api.LockAcquireCommand{Path: "x", Holder: "codex", TTL: api.LockTTL(24*time.Hour + 1)}, "", api.ErrInvalid, "ttl"},
		{"negative ttl", api.OpLockAcquire, api.LockAcquireCommand{Path: "x", Holder: "codex", TTL: api.LockTTL(-time.Minute)}, "", api.ErrInvalid, "ttl"},
		{"renew without token", api.OpLockRenew, api.LockRenewCommand{Path: "db", Holder: "codex", TTL: api.LockTTL(time.Minute)}, "", api.ErrInvalid, "token"},
		{"renew ttl over 24h", api.OpLockRenew, api.LockRenewCommand{Path: "db", Holder: "codex", Token: 1, TTL: api.LockTTL(25 * time.Hour)}, "", api.ErrInvalid, "ttl"},
		{"release without holder", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Token: 1}, "", api.ErrInvalid, "holder"},
		{"release without token", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "codex"}, "", api.ErrInvalid, "token"},
		{"forced release without by", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Force: true}, "", api.ErrInvalid, "by"},
		{"by without force", api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "codex", Token: 1, By: "admin"}, "", api.ErrInvalid, "by"},
		{"release holders: none", api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{}, "", api.ErrInvalid, "holders"},
		{"release holders: bad id", api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{Holders: []string{"codex", "BAD"}}, "", api.ErrInvalid, "holders[1]"},
		{"release holders: too many", api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{Holders: make([]string, api.MaxReleaseHolders+1)}, "", api.ErrInvalid, "holders"},
		{"undecodable body", api.OpLockAcquire, map[string]any{"path": 5}, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCoordFSM(t)
			c.granted(baseTS, "db", "codex", time.Minute)
			before := dataDump(t, c.f)
			res := c.apply(baseTS+sec, tt.op, tt.body)
			if after := dataDump(t, c.f); after != before {
				t.Errorf("the refused command changed the state:\nbefore %s\nafter  %s", before, after)
			}
			if tt.outcome != "" {
				r, ok := res.(*api.LockResult)
				if !ok || r.Outcome != tt.outcome || !r.Refused() || r.Lock == nil || r.Message == "" {
					t.Fatalf("result %T %+v, want refusal %q with the lock and a message", res, res, tt.outcome)
				}
				return
			}
			err := mustError(t, res)
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("error %v, want %v", err, tt.err)
			}
			var fe *api.FieldError
			if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
				t.Errorf("error %v, want a FieldError on %q", err, tt.field)
			}
		})
	}
}

func TestLockForcedRelease(t *testing.T) {
	c := newCoordFSM(t)
	l := c.granted(baseTS, "db", "codex", time.Minute)
	r := c.lockResult(baseTS+sec, api.OpLockRelease, api.LockReleaseCommand{Path: "db", Token: l.Token, Force: true, By: "admin"})
	if r.Outcome != api.LockReleased || r.Lock.Holder != "codex" {
		t.Fatalf("forced release = %+v", r)
	}
	ev := c.lastAudit()
	if ev.Kind != AuditLock || ev.Label != "LOCK_RELEASE" ||
		!strings.HasSuffix(ev.Line(), "[admin→codex] LOCK_RELEASE: db token=1 forced by admin") {
		t.Errorf("audit = %q", ev.Line())
	}
	if page, _ := c.f.Locks(api.LockQuery{}); len(page.Locks) != 0 {
		t.Errorf("locks after release: %+v", page.Locks)
	}
	// The lock is gone: a second release answers not found.
	if res := c.apply(baseTS+2*sec, api.OpLockRelease, api.LockReleaseCommand{Path: "db", Force: true, By: "admin"}); !isErr(res, api.ErrNotFound) {
		t.Errorf("second release = %v, want ErrNotFound", res)
	}
}

func TestReleaseHolderLocks(t *testing.T) {
	c := newCoordFSM(t)
	c.granted(baseTS, "src/b.go", "codex", time.Minute)
	c.granted(baseTS+sec, "src/a.go", "codex", time.Second) // expires before the release
	c.granted(baseTS+2*sec, "src/c.go", "claude", time.Minute)
	c.granted(baseTS+3*sec, "src/d.go", "gemini", time.Minute)

	res := c.apply(baseTS+10*sec, api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{
		Holders: []string{"codex", "nobody", "codex", "claude"}, Reason: "node n2 declared dead"})
	rr, ok := res.(*ReleaseHolderLocksResult)
	if !ok {
		t.Fatalf("result %T %v", res, res)
	}
	var got []string
	for _, l := range rr.Released {
		got = append(got, l.Holder+":"+l.Path)
	}
	if want := "codex:src/a.go codex:src/b.go claude:src/c.go"; strings.Join(got, " ") != want {
		t.Errorf("released %v, want %s", got, want)
	}
	if !rr.Released[0].Expired || rr.Released[1].Expired {
		t.Errorf("expired flags: %+v", rr.Released)
	}
	page, _ := c.f.Locks(api.LockQuery{})
	if len(page.Locks) != 1 || page.Locks[0].Path != "src/d.go" {
		t.Errorf("left: %+v, want only gemini's src/d.go", page.Locks)
	}
	for _, h := range []string{"codex", "claude"} {
		if p, _ := c.f.Locks(api.LockQuery{Holder: h}); len(p.Locks) != 0 {
			t.Errorf("holder index of %s still lists %+v", h, p.Locks)
		}
	}
	lines := c.auditLines()
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "[claude] LOCK_RELEASE: src/c.go token=3 released with its holder: node n2 declared dead") {
		t.Errorf("audit: %q", last)
	}
	// Idempotent: proposing it again releases nothing and is no error.
	before := dataDump(t, c.f)
	res = c.apply(baseTS+11*sec, api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{Holders: []string{"codex", "claude"}})
	if rr, ok := res.(*ReleaseHolderLocksResult); !ok || len(rr.Released) != 0 {
		t.Errorf("second run = %v", res)
	}
	if dataDump(t, c.f) != before {
		t.Error("a release of holders without locks changed the state")
	}
}

func TestLocksList(t *testing.T) {
	c := newCoordFSM(t)
	paths := []struct{ path, holder string }{
		{"src/a.go", "codex"}, {"docs/x.md", "claude"}, {"src/b.go", "claude"},
		{"src/c/d.go", "codex"}, {"zeta", "codex"},
	}
	for i, p := range paths {
		c.granted(baseTS+int64(i)*sec, p.path, p.holder, time.Hour)
	}
	list := func(q api.LockQuery) (string, bool) {
		t.Helper()
		page, err := c.f.Locks(q)
		if err != nil {
			t.Fatalf("Locks(%+v): %v", q, err)
		}
		var out []string
		for _, l := range page.Locks {
			out = append(out, l.Path)
		}
		return strings.Join(out, " "), page.HasMore
	}
	tests := []struct {
		q    api.LockQuery
		want string
		more bool
	}{
		{api.LockQuery{}, "docs/x.md src/a.go src/b.go src/c/d.go zeta", false},
		{api.LockQuery{Limit: 2}, "docs/x.md src/a.go", true},
		{api.LockQuery{After: "src/a.go", Limit: 2}, "src/b.go src/c/d.go", true},
		{api.LockQuery{After: "src/c/d.go", Limit: 2}, "zeta", false},
		{api.LockQuery{Prefix: "src/"}, "src/a.go src/b.go src/c/d.go", false},
		{api.LockQuery{Prefix: "src/", After: "src/a.go"}, "src/b.go src/c/d.go", false},
		{api.LockQuery{Prefix: "src/", After: "a"}, "src/a.go src/b.go src/c/d.go", false},
		{api.LockQuery{Prefix: "src/", After: "t"}, "", false},
		{api.LockQuery{Holder: "codex"}, "src/a.go src/c/d.go zeta", false},
		{api.LockQuery{Holder: "codex", Prefix: "src/"}, "src/a.go src/c/d.go", false},
		{api.LockQuery{Holder: "codex", After: "src/a.go", Limit: 1}, "src/c/d.go", true},
		{api.LockQuery{Holder: "nobody"}, "", false},
		{api.LockQuery{Prefix: "nothing/"}, "", false},
	}
	for _, tt := range tests {
		got, more := list(tt.q)
		if got != tt.want || more != tt.more {
			t.Errorf("Locks(%+v) = %q more=%t, want %q more=%t", tt.q, got, more, tt.want, tt.more)
		}
	}
	if _, err := c.f.Locks(api.LockQuery{Holder: "Bad Name"}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("bad holder filter: %v", err)
	}
}

func TestLockTTLJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string // decode error, or "" then Validate's field error on ttl if bad
		bad  bool
	}{
		{`"5m"`, 5 * time.Minute, "", false},
		{`"1h30m"`, 90 * time.Minute, "", false},
		{`30`, 30 * time.Second, "", false},
		{`1.5`, 1500 * time.Millisecond, "", false},
		{`"abc"`, 0, "not a duration", false},
		{`true`, 0, "not a duration", false},
		{`0.5`, 500 * time.Millisecond, "", true},
		{`1e300`, 0, "", true},
		{`-1e300`, 0, "", true},
		{`"25h"`, 25 * time.Hour, "", true},
	}
	for _, tt := range tests {
		var cmd api.LockAcquireCommand
		err := json.Unmarshal([]byte(`{"path":"p","holder":"codex","ttl":`+tt.in+`}`), &cmd)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ttl %s: decode error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ttl %s: %v", tt.in, err)
			continue
		}
		if tt.want != 0 && time.Duration(cmd.TTL) != tt.want {
			t.Errorf("ttl %s = %s, want %s", tt.in, time.Duration(cmd.TTL), tt.want)
		}
		var fe *api.FieldError
		if err := cmd.Validate(); tt.bad != (err != nil) || (tt.bad && (!errors.As(err, &fe) || fe.Field != "ttl" || !strings.Contains(fe.Reason, "1s to 24h0m0s"))) {
			t.Errorf("ttl %s: Validate = %v, want bad=%t naming the limits", tt.in, err, tt.bad)
		}
	}
	b, _ := json.Marshal(api.LockAcquireCommand{Path: "p", Holder: "codex", TTL: api.LockTTL(90 * time.Second)})
	if !strings.Contains(string(b), `"ttl":"1m30s"`) {
		t.Errorf("encoded %s", b)
	}
}

// TestLockDeterminism: the same lock entries applied in one batch or one
// by one leave byte-identical states and equal results.
func TestLockDeterminism(t *testing.T) {
	var entries []*raft.Log
	add := func(ts int64, op api.Op, body any) {
		entries = append(entries, coordEntry(t, uint64(len(entries)+1), ts, op, body))
	}
	add(baseTS, api.OpLockAcquire, api.LockAcquireCommand{Path: "a", Holder: "codex", TTL: api.LockTTL(time.Second)})
	add(baseTS, api.OpLockAcquire, api.LockAcquireCommand{Path: "b", Holder: "claude", TTL: api.LockTTL(time.Minute)})
	add(baseTS+sec/2, api.OpLockAcquire, api.LockAcquireCommand{Path: "a", Holder: "claude", TTL: api.LockTTL(time.Minute)})
	add(baseTS+2*sec, api.OpLockAcquire, api.LockAcquireCommand{Path: "a", Holder: "claude", TTL: api.LockTTL(time.Minute)})
	add(baseTS+3*sec, api.OpLockRenew, api.LockRenewCommand{Path: "b", Holder: "claude", Token: 2, TTL: api.LockTTL(time.Hour)})
	add(baseTS+4*sec, api.OpSetBulletin, api.BulletinCommand{Doc: json.RawMessage(`{"system_status":"degraded"}`), Merge: true})
	add(baseTS+5*sec, api.OpReleaseHolderLocks, api.ReleaseHolderLocksCommand{Holders: []string{"claude"}})
	add(baseTS+6*sec, api.OpLockRelease, api.LockReleaseCommand{Path: "a", Holder: "claude", Token: 4})

	one, _ := openTemp(t)
	many, _ := openTemp(t)
	res1 := one.ApplyBatch(entries)
	for i, e := range entries {
		a, b := coordResultString(res1[i]), coordResultString(applyOne(many, e))
		if a != b {
			t.Errorf("entry %d: results differ:\n%s\n%s", i+1, a, b)
		}
	}
	if d1, d2 := dump(t, one), dump(t, many); d1 != d2 {
		t.Errorf("states differ:\n%s\n---\n%s", d1, d2)
	}
}

// coordResultString renders an apply result (or error) for comparison.
func coordResultString(r any) string {
	if err, ok := r.(error); ok {
		return "error " + err.Error()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "unencodable " + err.Error()
	}
	return string(b)
}
