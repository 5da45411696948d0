package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// interruptMsg is from's interrupt alert to agent, id from the counter.
func (b *mbox) interruptMsg(from, agent string) api.Message {
	m := *NewInterrupt(from, agent, "ops", "stop: the spec changed")
	m.ID = b.msg(from, "x").ID
	m.Normalize(time.Unix(0, b.ts))
	return m
}

func (b *mbox) interrupt(m api.Message, moderator bool) any {
	b.t.Helper()
	return b.apply(api.OpSend, api.SendCommand{Message: m, Interrupt: &api.Interrupt{Moderator: moderator}})
}

// refused checks that applying the interrupt m was refused in the words
// of want, stored nothing and left exactly one BLOCKED audit line.
func (b *mbox) refused(m api.Message, moderator bool, want string) {
	b.t.Helper()
	before := dumpWithout(b.t, b.f, string(bucketAudit))
	auditBefore := len(b.auditLines())
	err := mustError(b.t, b.interrupt(m, moderator))
	var fe *api.ForbiddenError
	if !errors.Is(err, api.ErrForbidden) || !errors.As(err, &fe) || fe.Error() != want {
		b.t.Fatalf("interrupt from %s = %v, want a ForbiddenError saying %q", m.From, err, want)
	}
	if after := dumpWithout(b.t, b.f, string(bucketAudit)); after != before {
		b.t.Errorf("a refused interrupt from %s stored more than an audit line", m.From)
	}
	if _, err := b.f.Message(m.ID); !errors.Is(err, api.ErrNotFound) {
		b.t.Errorf("the refused alert %s is stored: %v", m.ID, err)
	}
	lines := b.auditLines()[auditBefore:]
	if wantLine := "[" + m.From + "→" + m.To[0] + "] BLOCKED: " + want; len(lines) != 1 || !strings.HasSuffix(lines[0], wantLine) {
		b.t.Errorf("audit after the refusal = %q, want one line ending %q", lines, wantLine)
	}
}

// allowed checks that the interrupt m was stored and delivered.
func (b *mbox) allowed(m api.Message, moderator bool) *SendResult {
	b.t.Helper()
	r := b.interrupt(m, moderator)
	res, ok := r.(*SendResult)
	if !ok {
		b.t.Fatalf("interrupt from %s refused: %v", m.From, r)
	}
	stored, err := b.f.Message(m.ID)
	if err != nil || stored.Type != InterruptType || stored.Priority != api.PriorityUrgent || len(stored.Recipients) != 1 || stored.Recipients[0] != m.To[0] {
		b.t.Fatalf("stored alert %+v, %v", stored, err)
	}
	return res
}

// Without a document only the roles master, orchestrator and supervisor
// may interrupt; a refusal stores nothing but its BLOCKED line.
// (mbox applies the encoded entry, the bytes a follower forwards to the
// leader, so the mark travels with it.)
func TestInterruptAuthorityDefault(t *testing.T) {
	b := newMbox(t)
	for id, role := range map[string]string{"boss": "master", "orch": "orchestrator", "sup": "supervisor", "dev": "developer", "claude": "developer"} {
		b.register(id, role)
	}
	for _, from := range []string{"dev", "stranger"} {
		b.refused(b.interruptMsg(from, "claude"), false, rules.DefaultInterruptReason)
	}
	if _, err := b.f.Agent("stranger"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a refused interrupt registered its sender: %v", err)
	}
	for _, from := range []string{"boss", "orch", "sup"} {
		b.allowed(b.interruptMsg(from, "claude"), false)
	}
	// A moderator's token may, whatever its agent's role.
	b.allowed(b.interruptMsg("dev", "claude"), true)
	if c := b.counts("claude"); c.Unread != 4 || c.UnreadByPriority[api.PriorityUrgent] != 4 {
		t.Errorf("claude's counts = %+v, want the 4 allowed alerts, urgent", c)
	}
}

// A document that only forbids one pair hands out no ESC power; its
// interrupt list, when it has one, decides alone.
func TestInterruptAuthorityByDocument(t *testing.T) {
	b := newMbox(t)
	for id, role := range map[string]string{"boss": "master", "dev": "developer", "ops": "operator", "claude": "developer"} {
		b.register(id, role)
	}
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden: []rules.ForbiddenRule{{From: "role:tester", To: "role:reviewer", Reason: "testers go through the developer"}},
	}})
	if chk, err := b.f.CheckRules("dev", "", "claude", ""); err != nil || !chk.Allowed {
		t.Fatal("the document should let dev message claude")
	}
	b.refused(b.interruptMsg("dev", "claude"), false, rules.DefaultInterruptReason)
	b.allowed(b.interruptMsg("boss", "claude"), false)

	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{"role:operator"}}})
	b.allowed(b.interruptMsg("ops", "claude"), false)
	b.refused(b.interruptMsg("boss", "claude"), false, "interrupt: only role:operator may interrupt")

	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{}}})
	b.refused(b.interruptMsg("ops", "claude"), false, "interrupt: the list is empty, nobody may interrupt")
	b.allowed(b.interruptMsg("ops", "claude"), true)

	// Authority to interrupt is not a pass through the lists: the alert is
	// a message, refused like one when the rules keep it from the agent.
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{"boss"},
		Forbidden: []rules.ForbiddenRule{{From: "boss", To: "claude", Reason: "boss leaves claude alone"}}}})
	err := mustError(t, b.interrupt(b.interruptMsg("boss", "claude"), false))
	if !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "boss leaves claude alone") {
		t.Errorf("an interrupt the lists forbid = %v", err)
	}

	// CheckInterrupt answers the same, with the role it used.
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{"role:operator", "boss"}}})
	for _, c := range []struct {
		from, role string
		want       bool
		usedRole   string
	}{{"ops", "", true, "operator"}, {"boss", "", true, "master"}, {"dev", "", false, "developer"}, {"dev", "operator", true, "operator"}, {"nobody", "", false, ""}} {
		got, err := b.f.CheckInterrupt(c.from, c.role)
		if err != nil || got.Allowed != c.want || got.FromRole != c.usedRole || !got.Interrupt || got.To != "" ||
			(!c.want && got.Reason != "interrupt: only role:operator, boss may interrupt") {
			t.Errorf("CheckInterrupt(%s, %q) = %+v, %v", c.from, c.role, got, err)
		}
	}
}

// The alert's id is fixed before the first attempt: a retry answers the
// first seq and stores nothing; an ordinary message cannot pass for an
// interrupt of the same id, nor the other way round.
func TestInterruptIdempotentAndMarked(t *testing.T) {
	b := newMbox(t)
	b.register("boss", "master")
	b.register("claude", "developer")
	m := b.interruptMsg("boss", "claude")
	first := b.allowed(m, false)
	again, ok := b.interrupt(m, false).(*SendResult)
	if !ok || again.Seq != first.Seq || !again.Duplicate {
		t.Fatalf("retried interrupt = %+v, want the first seq %d as a duplicate", again, first.Seq)
	}
	if c := b.counts("claude"); c.Total != 1 {
		t.Errorf("claude holds %d messages after a retry, want 1", c.Total)
	}
	if err := b.sendErr(m); !errors.Is(err, api.ErrConflict) {
		t.Errorf("an ordinary send of the interrupt's id and content = %v, want a conflict", err)
	}

	// A plain message shaped like an alert, then an interrupt with its id.
	plain := b.interruptMsg("boss", "claude")
	b.send(plain)
	if err := mustError(t, b.interrupt(plain, false)); !errors.Is(err, api.ErrConflict) {
		t.Errorf("an interrupt reusing an ordinary message's id = %v, want a conflict", err)
	}

	// An interrupt names one agent.
	wide := b.interruptMsg("boss", "claude")
	wide.To = api.Recipients{"role:developer"}
	var fe *api.FieldError
	if err := mustError(t, b.interrupt(wide, false)); !errors.As(err, &fe) || fe.Field != "to" {
		t.Errorf("an interrupt to a role = %v, want a FieldError on to", err)
	}
}

func TestNewInterrupt(t *testing.T) {
	m := NewInterrupt("boss", "claude", "ops", "stop:\nthe spec  changed")
	if m.From != "boss" || len(m.To) != 1 || m.To[0] != "claude" || m.Channel != "ops" || m.Type != "alert" ||
		m.Priority != api.PriorityUrgent || m.Content.Text != "[INTERRUPT] stop:\nthe spec  changed" ||
		m.Title != "[INTERRUPT] stop: the spec changed" || m.ID != "" {
		t.Errorf("NewInterrupt = %+v", m)
	}
	long := NewInterrupt("boss", "claude", "ops", strings.Repeat("é", api.MaxTitleLen))
	if len(long.Title) > api.MaxTitleLen || !strings.HasPrefix(long.Title, InterruptPrefix+"é") || !strings.HasSuffix(long.Title, "é") {
		t.Errorf("a long reason's title is %d bytes: %q…", len(long.Title), long.Title[:40])
	}
}

// Every stored message carries whether its sender may interrupt, decided
// at apply by the one interrupt rule (the sender's role, the rules
// document's list, a moderator's token), never by the client: watchers go
// by it alone before they press a pane's interrupt key.
func TestMessageCarriesInterruptAuthority(t *testing.T) {
	b := newMbox(t)
	b.register("orch", "orchestrator")
	b.register("dev", "developer")
	b.register("claude", "developer")
	carries := func(m api.Message, cmd api.SendCommand) bool {
		t.Helper()
		cmd.Message = m
		mustSendResult(t, b.ok(api.OpSend, cmd))
		stored, err := b.f.Message(m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return stored.MayInterrupt
	}
	urgent := func(from string) api.Message {
		m := b.msg(from, "stop", "claude")
		m.Priority = api.PriorityUrgent
		return m
	}
	if !carries(urgent("orch"), api.SendCommand{}) {
		t.Errorf("an orchestrator's urgent message does not carry interrupt authority")
	}
	if !carries(b.msg("orch", "fyi", "claude"), api.SendCommand{}) {
		t.Errorf("an orchestrator's normal message does not carry its authority (an override may make it interrupt)")
	}
	forged := urgent("dev")
	forged.MayInterrupt = true
	if carries(forged, api.SendCommand{}) {
		t.Errorf("a developer's urgent message claiming may_interrupt kept it")
	}
	if carries(urgent("stranger"), api.SendCommand{}) {
		t.Errorf("an unregistered sender's urgent message carries interrupt authority")
	}
	if !carries(urgent("dev"), api.SendCommand{Moderator: true}) {
		t.Errorf("a moderator's urgent message does not carry interrupt authority")
	}
	alert := b.interruptMsg("orch", "claude")
	b.allowed(alert, false)
	if stored, err := b.f.Message(alert.ID); err != nil || !stored.MayInterrupt {
		t.Errorf("an allowed interrupt's alert %+v (%v) does not carry its authority", stored, err)
	}
	// The rules document's interrupt list is the rule, for sends as for
	// the interrupt endpoint.
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{"dev"}}})
	if !carries(urgent("dev"), api.SendCommand{}) || carries(urgent("orch"), api.SendCommand{}) {
		t.Errorf("with interrupt: [dev], dev's message lacks or orch's keeps interrupt authority")
	}
	// A message stored before the field existed reads as no authority.
	var old api.Message
	if err := json.Unmarshal([]byte(`{"id":"msg-old","from":"orch","to":["claude"],"channel":"c","priority":"urgent","content":{"text":"x"}}`), &old); err != nil || old.MayInterrupt {
		t.Errorf("an old record reads may_interrupt %t (%v)", old.MayInterrupt, err)
	}
}
