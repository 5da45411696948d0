package fsm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// registry used by the addressing tests: sender codex (writer) and five
// other agents of three roles.
func addressingRegistry(b *mbox) {
	b.register("codex", "writer")
	b.register("alice", "reviewer", "go", "review")
	b.register("bob", "reviewer", "review")
	b.register("carol", "engineer", "go")
	b.register("engineer_1", "engineer")
	b.register("engineer_2", "engineer")
	b.register("dave", "lead", "plan")
}

func TestAddressingForms(t *testing.T) {
	everyone := []string{"alice", "bob", "carol", "dave", "engineer_1", "engineer_2"}
	tests := []struct {
		name string
		from string
		to   []string
		text string
		want []string
	}{
		{"plain registered id", "codex", []string{"alice"}, "hi", []string{"alice"}},
		{"plain unregistered id", "codex", []string{"zed"}, "hi", []string{"zed"}},
		{"several ids in order", "codex", []string{"carol", "alice"}, "hi", []string{"carol", "alice"}},
		{"all", "codex", []string{"all"}, "hi", everyone},
		{"star", "codex", []string{"*"}, "hi", everyone},
		{"all excludes the sender", "alice", []string{"all"}, "hi", []string{"bob", "carol", "codex", "dave", "engineer_1", "engineer_2"}},
		{"role", "codex", []string{"role:reviewer"}, "hi", []string{"alice", "bob"}},
		{"role excludes the sender", "alice", []string{"role:reviewer"}, "hi", []string{"bob"}},
		{"glob with a literal prefix", "codex", []string{"engineer_*"}, "hi", []string{"engineer_1", "engineer_2"}},
		{"glob with a class", "codex", []string{"[ab]*"}, "hi", []string{"alice", "bob"}},
		{"glob with ?", "codex", []string{"?ob"}, "hi", []string{"bob"}},
		{"glob excludes the sender", "engineer_1", []string{"engineer_?"}, "hi", []string{"engineer_2"}},
		{"mentions add registered agents", "codex", []string{"alice"},
			"@carol please look; mail x@bob.com; @nobody and @codex, and @dave.", []string{"alice", "carol", "dave"}},
		{"mention at the start", "codex", []string{"alice"}, "@bob: review", []string{"alice", "bob"}},
		{"duplicates collapse", "codex", []string{"alice", "role:reviewer", "a*"}, "@alice @bob", []string{"alice", "bob"}},
		{"explicit self", "codex", []string{"codex"}, "note to self", []string{"codex"}},
		{"forms mixed", "codex", []string{"zed", "role:lead", "engineer_2"}, "@carol", []string{"zed", "dave", "engineer_2", "carol"}},
		{"capability", "codex", []string{"capability:go"}, "hi", []string{"alice", "carol"}},
		{"capability excludes the sender", "alice", []string{"capability:review"}, "hi", []string{"bob"}},
		{"capability and role overlap", "codex", []string{"capability:review", "role:engineer"}, "hi", []string{"alice", "bob", "carol", "engineer_1", "engineer_2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newMbox(t)
			addressingRegistry(b)
			m := b.msg(tt.from, tt.text, tt.to...)
			r := b.send(m)
			got, err := b.f.Message(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Recipients, tt.want) {
				t.Errorf("recipients = %q, want %q", got.Recipients, tt.want)
			}
			if !slices.Equal(got.To, tt.to) {
				t.Errorf("to = %q, want it kept as written %q", got.To, tt.to)
			}
			rc := b.receipts(r.ID)
			if len(rc) != len(tt.want) {
				t.Errorf("%d receipts, want %d: %+v", len(rc), len(tt.want), rc)
			}
			for _, a := range append(slices.Clone(everyone), "codex", "zed") {
				inbox, err := b.f.Inbox(a, api.InboxQuery{})
				delivered := slices.Contains(tt.want, a)
				switch {
				case errors.Is(err, api.ErrNotFound) && !delivered:
				case err != nil:
					t.Errorf("Inbox(%s): %v", a, err)
				case delivered && (len(inbox.Messages) != 1 || inbox.Messages[0].ID != r.ID || inbox.Messages[0].Read):
					t.Errorf("inbox of %s = %+v, want the message, unread", a, inbox.Messages)
				case !delivered && len(inbox.Messages) != 0:
					t.Errorf("inbox of %s has %d messages, want none", a, len(inbox.Messages))
				}
				if delivered {
					// zed is in no registry and never sent: its
					// receipt says so rather than delivered.
					want := api.ReceiptDelivered
					if a == "zed" {
						want = api.ReceiptNoSuchAgent
					}
					if rc[a].State != want || !rc[a].DeliveredAt.Equal(got.Timestamp) {
						t.Errorf("receipt of %s = %+v, want %s at %s", a, rc[a], want, got.Timestamp)
					}
				}
			}
		})
	}
}

func TestAddressingRefusals(t *testing.T) {
	tests := []struct {
		name   string
		from   string
		to     []string
		field  string
		reason string
	}{
		{"role with no agents", "codex", []string{"alice", "role:tester"}, "to[1]", `"role:tester" matches no agent`},
		{"role with only the sender", "dave", []string{"role:lead"}, "to[0]", `"role:lead" matches no agent`},
		{"glob matching nobody", "codex", []string{"qa_*"}, "to[0]", `"qa_*" matches no agent`},
		{"capability with no agents", "codex", []string{"capability:rust"}, "to[0]", `"capability:rust" matches no agent: no registered agent other than the sender has capability "rust"`},
		{"capability with only the sender", "dave", []string{"alice", "capability:plan"}, "to[1]", `"capability:plan" matches no agent`},
		{"bad capability", "codex", []string{"capability:Go"}, "to[0]", `"capability:Go" is not an agent id, "all", "*", "role:NAME", "capability:NAME" or a glob`},
		{"glob matching only the sender", "dave", []string{"d*"}, "to[0]", `"d*" matches no agent`},
		{"bad glob", "codex", []string{"alice", "eng[ineer"}, "to[1]", `"eng[ineer" is not a valid glob`},
		{"plain id too long", "codex", []string{strings.Repeat("a", 65)}, "to[0]", "not a valid agent id: must match " + api.NamePattern + ` (got "aaaa`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newMbox(t)
			addressingRegistry(b)
			before := dataDump(t, b.f)
			err := b.sendErr(b.msg(tt.from, "hi", tt.to...))
			var fe *api.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, api.ErrInvalid) || fe.Field != tt.field || !strings.Contains(fe.Reason, tt.reason) {
				t.Errorf("error = %v, want a FieldError on %s containing %q", err, tt.field, tt.reason)
			}
			if after := dataDump(t, b.f); after != before {
				t.Errorf("a refused send changed the state")
			}
		})
	}
}

func TestSendToAllWithNobodyElse(t *testing.T) {
	b := newMbox(t)
	r := b.send(b.msg("codex", "anyone there?", "all"))
	m, err := b.f.Message(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Recipients) != 0 {
		t.Errorf("recipients = %q, want none", m.Recipients)
	}
	if n := channelCount(t, b.f, "general"); n != 1 {
		t.Errorf("channel count = %d, want 1: the message is in the channel log", n)
	}
}

func TestMentions(t *testing.T) {
	for _, tt := range []struct {
		text string
		want []string
	}{
		{"@claude please review", []string{"claude"}},
		{"hey @claude, @gemini.", []string{"claude", "gemini"}},
		{"mail me at me@claude.dev", nil},
		{"@Claude is not an id", nil},
		{"@a-b_c.d-", []string{"a-b_c.d"}},
		{"(@x)\n@y", []string{"x", "y"}},
		{"@x @x", []string{"x"}},
		{"@" + strings.Repeat("a", 65), nil},
	} {
		if got := mentions(tt.text, api.MaxRecipients); !slices.Equal(got, tt.want) {
			t.Errorf("mentions(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
	if got := mentions("@a @b @c", 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("mentions capped at 2 = %q", got)
	}
}

func TestSendAutoRegistersSender(t *testing.T) {
	b := newMbox(t)
	r := b.send(b.msg("codex", "first", "claude"))
	a, err := b.f.Agent("codex")
	if err != nil {
		t.Fatalf("sender not registered: %v", err)
	}
	if a.Role != api.DefaultRole || !a.Auto || a.Index != r.Seq {
		t.Errorf("auto-registered sender = %+v, want role agent, auto, index %d", a, r.Seq)
	}
	if _, err := b.f.Agent("claude"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a recipient got registered: %v", err)
	}
	b.send(b.msg("codex", "second", "claude"))
	lines := b.auditLines()
	var registers int
	for _, l := range lines {
		if strings.Contains(l, "REGISTER") {
			registers++
		}
	}
	if registers != 1 || len(lines) != 3 || !strings.Contains(lines[0], "[codex] REGISTER: role agent") ||
		!strings.Contains(lines[1], "[codex→claude] CHAT: first") {
		t.Errorf("audit = %q, want one REGISTER then two messages", lines)
	}
	// An explicit register replaces the automatic one.
	b.register("codex", "writer")
	if a, _ := b.f.Agent("codex"); a.Auto || a.Role != "writer" || !a.RegisteredAt.Equal(r.Timestamp) {
		t.Errorf("after register = %+v", a)
	}
}

func TestStrictSenders(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "strict_senders", Value: []byte("true")})
	before := dumpWithout(t, b.f, string(bucketAudit))
	auditBefore := len(b.auditLines())

	err := b.sendErr(b.msg("mallory", "let me in", "alice"))
	if !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "mallory") || !strings.Contains(err.Error(), "strict_senders") {
		t.Errorf("error = %v, want ErrForbidden naming mallory and strict_senders", err)
	}
	if after := dumpWithout(t, b.f, string(bucketAudit)); after != before {
		t.Errorf("a refused send changed more than the audit trail")
	}
	lines := b.auditLines()
	if len(lines) != auditBefore+1 || !strings.Contains(lines[len(lines)-1], "[mallory→alice] BLOCKED: sender mallory is not a registered agent") {
		t.Errorf("audit = %q, want one BLOCKED line", lines)
	}
	// A registered sender still sends; and with the setting off again an
	// unknown one is registered on the spot.
	b.send(b.msg("alice", "fine", "bob"))
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "strict_senders", Value: []byte("false")})
	b.send(b.msg("mallory", "now", "alice"))
	if a, err := b.f.Agent("mallory"); err != nil || !a.Auto {
		t.Errorf("mallory after strict_senders off: %+v, %v", a, err)
	}
}

// rulesTesterReviewer forbids tester → reviewer (by role) with a reason.
var rulesTesterReviewer = api.SetRulesCommand{Rules: &rules.Document{
	Forbidden: []rules.ForbiddenRule{{From: "role:tester", To: "role:reviewer", Reason: "testers go through the developer first"}},
}}

func TestRulesBlockEveryRecipient(t *testing.T) {
	b := newMbox(t)
	b.register("tina", "tester")
	b.register("rex", "reviewer")
	b.register("ray", "reviewer")
	b.ok(api.OpSetRules, rulesTesterReviewer)
	before := dumpWithout(t, b.f, string(bucketAudit))
	auditBefore := len(b.auditLines())

	m := b.msg("tina", "please merge", "role:reviewer")
	err := b.sendErr(m)
	if !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "testers go through the developer first") ||
		!strings.Contains(err.Error(), "ray") || !strings.Contains(err.Error(), "rex") {
		t.Errorf("error = %v, want ErrForbidden with the reason for ray and rex", err)
	}
	if after := dumpWithout(t, b.f, string(bucketAudit)); after != before {
		t.Errorf("a blocked send stored more than audit lines")
	}
	if _, err := b.f.Message(m.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("blocked message is stored: %v", err)
	}
	lines := b.auditLines()[auditBefore:]
	want := []string{"[tina→ray] BLOCKED: testers go through the developer first", "[tina→rex] BLOCKED: testers go through the developer first"}
	if len(lines) != 2 || !strings.HasSuffix(lines[0], want[0]) || !strings.HasSuffix(lines[1], want[1]) {
		t.Errorf("audit lines = %q, want %q", lines, want)
	}
}

func TestRulesBlockSomeRecipients(t *testing.T) {
	b := newMbox(t)
	b.register("tina", "tester")
	b.register("rex", "reviewer")
	b.register("dev", "developer")
	b.ok(api.OpSetRules, rulesTesterReviewer)

	m := b.msg("tina", "results attached", "rex", "dev")
	r := b.send(m)
	wantBlocked := []api.BlockedRecipient{{ID: "rex", Reason: "testers go through the developer first"}}
	if !slices.Equal(r.Blocked, wantBlocked) {
		t.Errorf("blocked = %+v, want %+v", r.Blocked, wantBlocked)
	}
	stored, err := b.f.Message(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stored.Recipients, []string{"dev"}) {
		t.Errorf("recipients = %q, want [dev]", stored.Recipients)
	}
	if c := b.counts("rex"); c.Total != 0 {
		t.Errorf("rex's inbox has %d messages, want 0", c.Total)
	}
	if c := b.counts("dev"); c.Total != 1 || c.Unread != 1 {
		t.Errorf("dev's counts = %+v, want 1 unread", c)
	}
	rc := b.receipts(m.ID)
	if rc["rex"].State != api.ReceiptBlocked || rc["rex"].Blocked != wantBlocked[0].Reason || !rc["rex"].DeliveredAt.IsZero() {
		t.Errorf("rex's receipt = %+v, want blocked", rc["rex"])
	}
	if rc["dev"].State != api.ReceiptDelivered {
		t.Errorf("dev's receipt = %+v, want delivered", rc["dev"])
	}
	lines := b.auditLines()
	if !strings.Contains(lines[len(lines)-2], "[tina→dev] CHAT: results attached") ||
		!strings.Contains(lines[len(lines)-1], "[tina→rex] BLOCKED: testers go through") {
		t.Errorf("audit tail = %q", lines[len(lines)-2:])
	}
	// A retry answers the same blocked list and stores nothing.
	before := dataDump(t, b.f)
	dup := b.send(m)
	if !dup.Duplicate || !slices.Equal(dup.Blocked, wantBlocked) {
		t.Errorf("retry = %+v, want a duplicate with the same blocked list", dup)
	}
	if dataDump(t, b.f) != before {
		t.Errorf("a retry changed the state")
	}
}
