package fsm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// hubRules is seed 004's hub: workers may message only the orchestrator,
// and what the rules block goes to it.
func hubRules(b *mbox, reroute string) {
	b.t.Helper()
	b.register("hub", "orchestrator")
	b.register("w1", "engineer")
	b.register("w2", "engineer")
	b.register("w3", "engineer")
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Preset: rules.PresetHierarchical, RerouteBlockedTo: reroute}})
}

func TestRerouteBlockedCopies(t *testing.T) {
	b := newMbox(t)
	hubRules(b, "hub")

	// Every recipient blocked: not refused, the hub gets the message.
	m := b.msg("w1", "can you check my branch?", "w2", "w3")
	m.Metadata = json.RawMessage(`{"pr":7,"rerouted_from":["spoofed"]}`)
	r := b.send(m)
	if len(r.Blocked) != 2 || r.Blocked[0].ID != "w2" || r.Blocked[1].ID != "w3" {
		t.Errorf("blocked = %+v, want w2 and w3: rerouting does not change who is blocked", r.Blocked)
	}
	got, err := b.f.Message(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Recipients, []string{"hub"}) {
		t.Errorf("recipients = %q, want the hub alone", got.Recipients)
	}
	if string(got.Metadata) != `{"pr":7,"rerouted_from":["w2","w3"]}` {
		t.Errorf("metadata = %s, want the sender's keys and rerouted_from [w2 w3]", got.Metadata)
	}
	rc := b.receipts(r.ID)
	if rc["hub"].State != api.ReceiptDelivered || rc["w2"].State != api.ReceiptBlocked || rc["w3"].State != api.ReceiptBlocked {
		t.Errorf("receipts = %+v, want hub delivered, w2 and w3 blocked", rc)
	}
	if p := b.inbox("hub", api.InboxQuery{}); len(p.Messages) != 1 || p.Messages[0].ID != r.ID {
		t.Errorf("hub inbox = %+v, want the rerouted message", p.Messages)
	}
	if p := b.inbox("w2", api.InboxQuery{}); len(p.Messages) != 0 {
		t.Errorf("w2 inbox = %+v, want nothing", p.Messages)
	}
	lines := b.auditLines()
	tail := lines[len(lines)-4:]
	for i, want := range []string{"[w1→hub] CHAT: can you check my branch?", "[w1→w2] BLOCKED: w1 (role engineer) may send only to role:orchestrator",
		"[w1→w3] BLOCKED:", "[w1→hub] REROUTED: for w2, w3 (blocked by the rules)"} {
		if !strings.Contains(tail[i], want) {
			t.Errorf("audit line %d = %q, want %q", i, tail[i], want)
		}
	}

	// The hub was a recipient already: one copy, still marked.
	m = b.msg("w1", "status", "hub", "w2")
	m.Metadata = json.RawMessage(`["not","an","object"]`)
	r = b.send(m)
	got, _ = b.f.Message(r.ID)
	if !slices.Equal(got.Recipients, []string{"hub"}) || string(got.Metadata) != `{"metadata":["not","an","object"],"rerouted_from":["w2"]}` {
		t.Errorf("hub also named: recipients %q, metadata %s", got.Recipients, got.Metadata)
	}
	if c := b.counts("hub"); c.Total != 2 {
		t.Errorf("hub inbox total = %d, want 2 (one copy per message)", c.Total)
	}

	// A retry answers the stored place; the id is not stored twice.
	again := b.send(m)
	if again.Seq != r.Seq || len(again.Blocked) != 1 {
		t.Errorf("retry = %+v, want seq %d with w2 blocked", again, r.Seq)
	}

	// Allowed sends are untouched.
	r = b.send(b.msg("hub", "go ahead", "w1"))
	if got, _ := b.f.Message(r.ID); len(got.Metadata) != 0 || !slices.Equal(got.Recipients, []string{"w1"}) {
		t.Errorf("an allowed send was rerouted: %+v", got)
	}
}

func TestRerouteLeavesRefusalsItCannotHelp(t *testing.T) {
	// Without reroute_blocked_to, every recipient blocked is a refusal.
	b := newMbox(t)
	hubRules(b, "")
	if err := b.sendErr(b.msg("w1", "hi", "w2")); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("no reroute: %v, want ErrForbidden", err)
	}

	// The rerouting agent itself blocked: nowhere else to go.
	b = newMbox(t)
	b.register("hub", "orchestrator")
	b.register("w1", "engineer")
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden:        []rules.ForbiddenRule{{From: "w1", To: "hub", Reason: "w1 is muted"}},
		RerouteBlockedTo: "hub",
	}})
	before := dumpWithout(t, b.f, string(bucketAudit))
	if err := b.sendErr(b.msg("w1", "hi", "hub")); !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "w1 is muted") {
		t.Errorf("blocked for the hub itself: %v, want the rule's refusal", err)
	}
	if dumpWithout(t, b.f, string(bucketAudit)) != before {
		t.Error("a refused send stored something besides its BLOCKED line")
	}

	// The sender is the rerouting agent: its blocked copies go nowhere.
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden:        []rules.ForbiddenRule{{From: "hub", To: "w1", Reason: "hub may not page w1"}},
		RerouteBlockedTo: "hub",
	}})
	if err := b.sendErr(b.msg("hub", "hi", "w1")); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("hub's own blocked send: %v, want ErrForbidden", err)
	}
}

// A private message rerouted is readable by the agent it went to, and its
// REROUTED line carries the readers like its other lines.
func TestReroutePrivate(t *testing.T) {
	b := newMbox(t)
	hubRules(b, "hub")
	m := b.msg("w1", "between us", "w2")
	m.Visibility = api.VisibilityPrivate
	r := b.send(m)
	got, _ := b.f.Message(r.ID)
	if !(&api.Viewer{Agent: "hub"}).CanRead(got) || (&api.Viewer{Agent: "w3"}).CanRead(got) {
		t.Errorf("private rerouted message: hub must read it, w3 must not")
	}
	p, err := b.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	last := p.Events[len(p.Events)-1]
	if last.Kind != AuditRerouted || !last.Private || !slices.Contains(last.Readers, "hub") {
		t.Errorf("REROUTED event = %+v, want private with hub among its readers", last)
	}
	if red := RedactEvent(last); red.Line() != "["+last.Time.Format("2006-01-02T15:04:05Z")+"] REROUTED: "+PrivateText {
		t.Errorf("redacted = %q", red.Line())
	}
}

func TestWithMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `{"k":["a"]}`},
		{`null`, `{"k":["a"]}`},
		{`{"z":1,"a":{"b":2}}`, `{"a":{"b":2},"k":["a"],"z":1}`},
		{`{"k":"old"}`, `{"k":["a"]}`},
		{`"text"`, `{"k":["a"],"metadata":"text"}`},
	} {
		if got := string(withMeta(json.RawMessage(tc.in), "k", []string{"a"})); got != tc.want {
			t.Errorf("withMeta(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// maos is the system's own sender: no agent registers or sends as it.
func TestSystemSenderIsReserved(t *testing.T) {
	b := newMbox(t)
	before := dataDump(t, b.f)
	err := b.sendErr(b.msg(api.SystemSender, "I am the system", "alice"))
	var fe *api.FieldError
	if !errors.As(err, &fe) || fe.Field != "from" || !strings.Contains(fe.Reason, `"maos" is reserved`) {
		t.Errorf("send from maos: %v, want a field error on from", err)
	}
	if dataDump(t, b.f) != before {
		t.Error("a refused send from maos changed the state")
	}
	if _, err := b.f.Agent(api.SystemSender); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("maos registered: %v", err)
	}
}
