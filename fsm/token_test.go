package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

func tokenCmd(id, agent, role, secret string) api.CreateTokenCommand {
	return api.CreateTokenCommand{ID: id, Agent: agent, Role: role, Hash: HashToken(secret)}
}

func mustToken(tb testing.TB, r any) *api.Token {
	tb.Helper()
	tok, ok := r.(*api.Token)
	if !ok {
		tb.Fatalf("result = %T (%v), want *Token", r, r)
	}
	return tok
}

func TestHashToken(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 appendix B.1.
	if got, want := HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("HashToken(abc) = %s, want %s", got, want)
	}
	if !api.ValidHash(HashToken("")) || api.ValidHash(strings.ToUpper(HashToken("x"))) || api.ValidHash("abc") {
		t.Errorf("validHash accepts the wrong forms")
	}
}

func TestTokenCreateLookupRevoke(t *testing.T) {
	b := newMbox(t)
	tok := mustToken(t, b.ok(api.OpCreateToken, tokenCmd("tok-1", "alice", api.TokenRoleAgent, "s3cret-alice")))
	if tok.ID != "tok-1" || tok.Agent != "alice" || tok.Role != "agent" || tok.Revoked() {
		t.Fatalf("created %+v", tok)
	}
	if want := time.Unix(0, b.ts).UTC(); !tok.CreatedAt.Equal(want) {
		t.Errorf("CreatedAt = %v, want the entry's time %v", tok.CreatedAt, want)
	}
	b.ok(api.OpCreateToken, tokenCmd("tok-2", "rex", api.TokenRoleModerator, "s3cret-rex"))

	got, err := b.f.TokenByHash(HashToken("s3cret-alice"))
	if err != nil || got.ID != "tok-1" || got.Agent != "alice" {
		t.Fatalf("TokenByHash(alice's) = %+v, %v", got, err)
	}
	for _, secret := range []string{"s3cret-bob", "", "S3CRET-ALICE"} {
		if _, err := b.f.TokenByHash(HashToken(secret)); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("TokenByHash(%q) = %v, want ErrNotFound", secret, err)
		}
	}

	// Revoke: refused from the applying entry on; the other token lives.
	rv := mustToken(t, b.ok(api.OpRevokeToken, api.RevokeTokenCommand{ID: "tok-1", By: "bootstrap"}))
	if !rv.Revoked() || !rv.RevokedAt.Equal(time.Unix(0, b.ts).UTC()) {
		t.Errorf("revoked token %+v, want RevokedAt at the entry's time", rv)
	}
	_, err = b.f.TokenByHash(HashToken("s3cret-alice"))
	var rte *RevokedTokenError
	if !errors.Is(err, api.ErrNotFound) || !errors.As(err, &rte) || rte.Token.ID != "tok-1" || rte.Token.Agent != "alice" ||
		!rte.Token.RevokedAt.Equal(rv.RevokedAt) {
		t.Errorf("TokenByHash after revoke = %v, want a RevokedTokenError naming tok-1 (wrapping ErrNotFound)", err)
	}
	if _, err := b.f.TokenByHash(HashToken("s3cret-rex")); err != nil {
		t.Errorf("the other token after a revoke: %v", err)
	}

	// A second revoke changes nothing and answers the token as it stands.
	before := dataDump(t, b.f)
	again := mustToken(t, b.ok(api.OpRevokeToken, api.RevokeTokenCommand{ID: "tok-1"}))
	if !again.RevokedAt.Equal(rv.RevokedAt) {
		t.Errorf("second revoke moved RevokedAt: %v → %v", rv.RevokedAt, again.RevokedAt)
	}
	if dataDump(t, b.f) != before {
		t.Errorf("a second revoke changed the state")
	}
	if err := mustError(t, b.apply(api.OpRevokeToken, api.RevokeTokenCommand{ID: "tok-9"})); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("revoke of an unknown id: %v, want ErrNotFound", err)
	}

	// The listing has both, the revoked one with its time, and no hash.
	list, err := b.f.Tokens()
	if err != nil || len(list) != 2 || list[0].ID != "tok-1" || !list[0].Revoked() || list[1].ID != "tok-2" || list[1].Revoked() {
		t.Fatalf("Tokens() = %+v, %v", list, err)
	}
	if s := mustMarshal(list); strings.Contains(s, "hash") || strings.Contains(s, HashToken("s3cret-rex")) {
		t.Errorf("Tokens() JSON shows a hash: %s", s)
	}
	if s := mustMarshal(list[1]); strings.Contains(s, "revoked_at") {
		t.Errorf("a live token's JSON has revoked_at: %s", s)
	}

	// The trail: created twice, revoked once; never a hash.
	lines := strings.Join(b.auditLines(), "\n")
	for _, want := range []string{"[alice] TOKEN_CREATE: token tok-1 created for alice, role agent",
		"[rex] TOKEN_CREATE: token tok-2 created for rex, role moderator", "[alice] TOKEN_REVOKE: token tok-1 of alice revoked by token bootstrap"} {
		if !strings.Contains(lines, want) {
			t.Errorf("audit trail lacks %q:\n%s", want, lines)
		}
	}
	if strings.Count(lines, "TOKEN_REVOKE") != 1 {
		t.Errorf("audit trail has %d revoke lines, want 1:\n%s", strings.Count(lines, "TOKEN_REVOKE"), lines)
	}
}

func TestTokenCreateConflicts(t *testing.T) {
	b := newMbox(t)
	first := tokenCmd("tok-1", "alice", api.TokenRoleAgent, "one")
	b.ok(api.OpCreateToken, first)

	// A retry of the very same command is the same token, not a conflict.
	before := dataDump(t, b.f)
	if tok := mustToken(t, b.ok(api.OpCreateToken, first)); tok.ID != "tok-1" {
		t.Errorf("retry answered %+v", tok)
	}
	if dataDump(t, b.f) != before {
		t.Errorf("a retried create changed the state")
	}

	for name, cmd := range map[string]api.CreateTokenCommand{
		"id reused for another agent": tokenCmd("tok-1", "bob", api.TokenRoleAgent, "one"),
		"id reused with another role": tokenCmd("tok-1", "alice", api.TokenRoleAdmin, "one"),
		"id reused with another hash": tokenCmd("tok-1", "alice", api.TokenRoleAgent, "two"),
		"hash reused under a new id":  tokenCmd("tok-2", "bob", api.TokenRoleAgent, "one"),
	} {
		if err := mustError(t, b.apply(api.OpCreateToken, cmd)); !errors.Is(err, api.ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", name, err)
		}
	}
	// A revoked id and a revoked hash stay taken, even by the same command.
	b.ok(api.OpRevokeToken, api.RevokeTokenCommand{ID: "tok-1"})
	if err := mustError(t, b.apply(api.OpCreateToken, first)); !errors.Is(err, api.ErrConflict) {
		t.Errorf("re-create of a revoked id: %v, want ErrConflict", err)
	}
	if err := mustError(t, b.apply(api.OpCreateToken, tokenCmd("tok-3", "alice", api.TokenRoleAgent, "one"))); !errors.Is(err, api.ErrConflict) {
		t.Errorf("a revoked secret registered again under a new id: %v, want ErrConflict", err)
	}
	if _, err := b.f.TokenByHash(first.Hash); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a refused re-create brought the revoked token back: %v", err)
	}
}

func TestTokenCommandValidation(t *testing.T) {
	good := tokenCmd("tok-1", "alice", api.TokenRoleAgent, "x")
	for _, tt := range []struct {
		name, field string
		edit        func(*api.CreateTokenCommand)
	}{
		{"empty id", "id", func(c *api.CreateTokenCommand) { c.ID = "" }},
		{"bad id", "id", func(c *api.CreateTokenCommand) { c.ID = "Tok 1" }},
		{"reserved id", "id", func(c *api.CreateTokenCommand) { c.ID = api.BootstrapTokenID }},
		{"empty agent", "agent", func(c *api.CreateTokenCommand) { c.Agent = "" }},
		{"bad agent", "agent", func(c *api.CreateTokenCommand) { c.Agent = "-alice" }},
		{"empty role", "role", func(c *api.CreateTokenCommand) { c.Role = "" }},
		{"unknown role", "role", func(c *api.CreateTokenCommand) { c.Role = "root" }},
		{"short hash", "hash", func(c *api.CreateTokenCommand) { c.Hash = c.Hash[:63] }},
		{"upper-case hash", "hash", func(c *api.CreateTokenCommand) { c.Hash = strings.ToUpper(c.Hash) }},
		{"secret instead of hash", "hash", func(c *api.CreateTokenCommand) { c.Hash = "maos_secret" }},
		{"bad by", "by", func(c *api.CreateTokenCommand) { c.By = "Not Valid" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, api.ErrInvalid) {
				t.Fatalf("Validate() = %v, want a FieldError on %s", err, tt.field)
			}
			// Apply refuses it the same way and writes nothing.
			b := newMbox(t)
			before := dataDump(t, b.f)
			if err := mustError(t, b.apply(api.OpCreateToken, c)); !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("apply: %v, want a FieldError on %s", err, tt.field)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused create changed the state")
			}
		})
	}
	if err := good.Validate(); err != nil {
		t.Errorf("valid command: %v", err)
	}
	for _, c := range []api.RevokeTokenCommand{{ID: ""}, {ID: "UPPER"}, {ID: "tok-1", By: "x y"}} {
		var fe *api.FieldError
		if err := c.Validate(); !errors.As(err, &fe) {
			t.Errorf("revoke %+v: Validate() = %v, want a FieldError", c, err)
		}
	}
}

func TestAuditDenial(t *testing.T) {
	b := newMbox(t)
	cmd := api.AuditDenialCommand{Node: "n1", Agent: "alice", TokenID: "tok-1", Method: "POST", Path: "/v1/messages",
		Reason: `from "bob" is not this token's agent "alice"`, Count: 3}
	before := dumpWithout(t, b.f, "audit")
	if got, ok := b.ok(api.OpAuditDenial, cmd).(*api.AuditDenialCommand); !ok || *got != cmd {
		t.Fatalf("result %+v, want the command", got)
	}
	if dumpWithout(t, b.f, "audit") != before {
		t.Errorf("audit_denial wrote outside the audit trail")
	}
	p, err := b.f.Audit(0, 10)
	if err != nil || len(p.Events) != 1 {
		t.Fatalf("Audit = %+v, %v", p, err)
	}
	ev := p.Events[0]
	if ev.Kind != AuditDenied || ev.Label != "DENIED" || ev.From != "alice" {
		t.Errorf("event %+v", ev)
	}
	want := `POST /v1/messages: from "bob" is not this token's agent "alice" (token tok-1, node n1, 3 times)`
	if ev.Text != want {
		t.Errorf("text %q, want %q", ev.Text, want)
	}

	// A path with control characters stays on one line, cut to length.
	long := api.AuditDenialCommand{Node: "n1", Method: "GET", Path: "/v1/x\n\x00" + strings.Repeat("é", 200), Reason: "unknown token", Count: 1}
	b.ok(api.OpAuditDenial, long)
	p, _ = b.f.Audit(1, 10)
	if txt := p.Events[0].Text; strings.ContainsAny(txt, "\n\x00") || len(txt) > 300 || !strings.HasPrefix(txt, "GET /v1/x??é") ||
		!strings.HasSuffix(txt, "…: unknown token (node n1)") {
		t.Errorf("text %q", txt)
	}
}

func TestAuditDenialValidation(t *testing.T) {
	good := api.AuditDenialCommand{Node: "n1", Method: "GET", Path: "/", Reason: "r", Count: 1}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for _, tt := range []struct {
		field string
		edit  func(*api.AuditDenialCommand)
	}{
		{"node", func(c *api.AuditDenialCommand) { c.Node = strings.Repeat("n", api.MaxDenialIDLen+1) }},
		{"agent", func(c *api.AuditDenialCommand) { c.Agent = strings.Repeat("a", api.MaxDenialIDLen+1) }},
		{"token_id", func(c *api.AuditDenialCommand) { c.TokenID = strings.Repeat("t", api.MaxDenialIDLen+1) }},
		{"method", func(c *api.AuditDenialCommand) { c.Method = strings.Repeat("M", api.MaxDenialMethodLen+1) }},
		{"path", func(c *api.AuditDenialCommand) { c.Path = "/" + strings.Repeat("p", api.MaxDenialPathLen) }},
		// (Invalid UTF-8 cannot reach apply: JSON encoding replaces it.)
		{"path", func(c *api.AuditDenialCommand) { c.Path = "/\xff" }},
		{"reason", func(c *api.AuditDenialCommand) { c.Reason = strings.Repeat("r", api.MaxDenialReasonLen+1) }},
		{"reason", func(c *api.AuditDenialCommand) { c.Reason = "" }},
		{"count", func(c *api.AuditDenialCommand) { c.Count = 0 }},
		{"count", func(c *api.AuditDenialCommand) { c.Count = api.MaxDenialCount + 1 }},
	} {
		c := good
		tt.edit(&c)
		var fe *api.FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: Validate() = %v, want a FieldError on %s", tt.field, err, tt.field)
		}
		if !utf8.ValidString(c.Path) {
			continue
		}
		b := newMbox(t)
		if err := mustError(t, b.apply(api.OpAuditDenial, c)); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%s: apply = %v, want ErrInvalid", tt.field, err)
		}
		if lines := b.auditLines(); len(lines) != 0 {
			t.Errorf("%s: a refused denial wrote %q", tt.field, lines)
		}
	}
}

// tokenLog builds n entries of token creates (some retried, some reusing
// an id or hash), revokes (some of unknown ids, some repeated) and denial
// lines, with proposer clocks jumping back and forth.
func tokenLog(tb testing.TB, seed uint64, n int) []*raft.Log {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	var logs []*raft.Log
	for i := range n {
		idx := uint64(i + 1)
		ts := baseTS + int64(idx)*1000 + rng.Int64N(20000) - 10000
		id := fmt.Sprintf("tok-%d", rng.IntN(n/3+1))
		switch k := rng.IntN(10); {
		case k < 5:
			agent := fmt.Sprintf("agent-%d", rng.IntN(5))
			logs = append(logs, opEntry(tb, idx, ts, api.OpCreateToken,
				tokenCmd(id, agent, api.TokenRoles[rng.IntN(len(api.TokenRoles))], fmt.Sprintf("secret-%d", rng.IntN(n/2+1)))))
		case k < 8:
			logs = append(logs, opEntry(tb, idx, ts, api.OpRevokeToken, api.RevokeTokenCommand{ID: id}))
		default:
			logs = append(logs, opEntry(tb, idx, ts, api.OpAuditDenial, api.AuditDenialCommand{Node: "n1", TokenID: id,
				Method: "GET", Path: "/v1/agents/x/inbox", Reason: "not yours", Count: 1 + rng.IntN(5)}))
		}
	}
	return logs
}

func TestTokensDeterministicAndSnapshotted(t *testing.T) {
	const n = 300
	logs := tokenLog(t, 11, n)
	apply := func(sizes func() int) (*FSM, []string) {
		f, _ := openTemp(t)
		return f, applyChunksWith(f, logs, sizes, renderResult)
	}
	singles, resSingles := apply(func() int { return 1 })
	rng := rand.New(rand.NewPCG(5, 6))
	random, resRandom := apply(func() int { return 1 + rng.IntN(40) })

	counts := map[string]int{}
	for _, r := range resSingles {
		switch {
		case strings.Contains(r, "apply create_token") && strings.Contains(r, api.ErrConflict.Error()):
			counts["create conflicts"]++
		case strings.Contains(r, "apply revoke_token") && strings.Contains(r, "not found"):
			counts["unknown revokes"]++
		case strings.Contains(r, `"revoked_at"`):
			counts["revoked"]++
		case strings.HasPrefix(r, "*api.Token"):
			counts["live"]++
		case strings.HasPrefix(r, "*api.AuditDenialCommand"):
			counts["denials"]++
		default:
			t.Errorf("unexpected result %s", r)
		}
	}
	for _, what := range []string{"create conflicts", "unknown revokes", "revoked", "live", "denials"} {
		if counts[what] == 0 {
			t.Errorf("the generated log has no %s (%v)", what, counts)
		}
	}
	for i := range resSingles {
		if resSingles[i] != resRandom[i] {
			t.Errorf("entry %d: results differ:\nsingles %s\nrandom  %s", i+1, resSingles[i], resRandom[i])
		}
	}
	want := dump(t, singles)
	if dump(t, random) != want {
		t.Fatalf("Dump differs between batch splits")
	}
	if !strings.Contains(want, "tokens ") || !strings.Contains(want, "token_hashes ") {
		t.Fatalf("the dump covers no token buckets")
	}

	// A snapshot carries the tokens: the restored state authenticates and
	// refuses exactly as the source does.
	dst, _ := openTemp(t)
	if err := dst.Restore(takeSnapshot(t, singles).Reader()); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if dump(t, dst) != want {
		t.Errorf("Dump after Restore differs from the source")
	}
	srcList, _ := singles.Tokens()
	dstList, err := dst.Tokens()
	if err != nil || mustMarshal(srcList) != mustMarshal(dstList) || len(dstList) == 0 {
		t.Errorf("Tokens after Restore = %d tokens (%v), want the source's %d", len(dstList), err, len(srcList))
	}
	live := 0
	for i := range n/2 + 1 {
		h := HashToken(fmt.Sprintf("secret-%d", i))
		a, errA := singles.TokenByHash(h)
		b, errB := dst.TokenByHash(h)
		if (errA == nil) != (errB == nil) || (errA == nil && mustMarshal(a) != mustMarshal(b)) {
			t.Errorf("secret-%d: source %v/%v, restored %v/%v", i, a, errA, b, errB)
		}
		if errA == nil {
			live++
		}
	}
	if live == 0 {
		t.Errorf("no live token left to compare")
	}
}
