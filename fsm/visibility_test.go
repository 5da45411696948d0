package fsm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestViewerCanRead(t *testing.T) {
	private := api.Message{From: "codex", To: api.Recipients{"claude", "role:reviewer", "rex", "all"},
		Recipients: []string{"claude", "ray"}, Visibility: api.VisibilityPrivate}
	public := private
	public.Visibility = api.VisibilityPublic
	legacy := private
	legacy.Visibility = "" // stored before visibility was normalized: public
	mods := private
	mods.Visibility = api.VisibilityModerators
	for _, c := range []struct {
		name string
		v    *api.Viewer
		m    *api.Message
		want bool
	}{
		{"nil viewer reads private", nil, &private, true},
		{"moderator", &api.Viewer{Agent: "boss", Moderator: true}, &private, true},
		{"moderator without agent", &api.Viewer{Moderator: true}, &private, true},
		{"sender", &api.Viewer{Agent: "codex"}, &private, true},
		{"recipient named by id", &api.Viewer{Agent: "claude"}, &private, true},
		{"recipient through a role", &api.Viewer{Agent: "ray"}, &private, true},
		{"named by id but not delivered (blocked)", &api.Viewer{Agent: "rex"}, &private, true},
		{"third agent", &api.Viewer{Agent: "gemini"}, &private, false},
		{"no agent, not moderator", &api.Viewer{}, &private, false},
		{`an agent called "all" is not named by "all"`, &api.Viewer{Agent: "all"}, &private, false},
		{"third agent, public", &api.Viewer{Agent: "gemini"}, &public, true},
		// For moderators: the sender and the agents "to" names by id; not
		// the agents reached through "all", a role or a mention.
		{"moderators: moderator", &api.Viewer{Agent: "boss", Moderator: true}, &mods, true},
		{"moderators: sender", &api.Viewer{Agent: "codex"}, &mods, true},
		{"moderators: named by id", &api.Viewer{Agent: "claude"}, &mods, true},
		{"moderators: named by id, blocked", &api.Viewer{Agent: "rex"}, &mods, true},
		{"moderators: a recipient through a role", &api.Viewer{Agent: "ray"}, &mods, false},
		{"moderators: third agent", &api.Viewer{Agent: "gemini"}, &mods, false},
		{"moderators: no agent", &api.Viewer{}, &mods, false},
		{"moderators: nil viewer", nil, &mods, true},
		{"third agent, no visibility", &api.Viewer{Agent: "gemini"}, &legacy, true},
	} {
		if got := c.v.CanRead(c.m); got != c.want {
			t.Errorf("%s: CanRead = %t, want %t", c.name, got, c.want)
		}
	}
}

func TestViewerCanReadEvent(t *testing.T) {
	ev := api.AuditEvent{Kind: AuditMessage, From: "codex", To: []string{"claude"}, Readers: []string{"claude", "rex"}, Private: true}
	old := api.AuditEvent{Kind: AuditMessage, From: "codex", To: []string{"claude"}, Private: true} // before Readers
	pub := api.AuditEvent{Kind: AuditMessage, From: "codex", To: []string{"claude"}}
	for _, c := range []struct {
		name string
		v    *api.Viewer
		e    *api.AuditEvent
		want bool
	}{
		{"nil viewer", nil, &ev, true},
		{"moderator", &api.Viewer{Moderator: true}, &ev, true},
		{"sender", &api.Viewer{Agent: "codex"}, &ev, true},
		{"recipient", &api.Viewer{Agent: "claude"}, &ev, true},
		{"reader not in to", &api.Viewer{Agent: "rex"}, &ev, true},
		{"third agent", &api.Viewer{Agent: "gemini"}, &ev, false},
		{"no agent", &api.Viewer{}, &ev, false},
		{"old event, recipient", &api.Viewer{Agent: "claude"}, &old, true},
		{"old event, third agent", &api.Viewer{Agent: "rex"}, &old, false},
		{"public event, third agent", &api.Viewer{Agent: "gemini"}, &pub, true},
	} {
		if got := c.v.CanReadEvent(c.e); got != c.want {
			t.Errorf("%s: CanReadEvent = %t, want %t", c.name, got, c.want)
		}
	}
}

func TestRedactEvent(t *testing.T) {
	at := time.Date(2025, 10, 20, 14, 30, 45, 0, time.UTC)
	ev := api.AuditEvent{Seq: 7, Index: 42, Time: at, Kind: AuditMessage, From: "triage", To: []string{"orchestrator"},
		Label: "CHAT", Text: "secret plans", MessageID: "msg-20251020-143045-triage-0badf00d", Private: true, Readers: []string{"orchestrator"}}
	r := RedactEvent(ev)
	if r.Seq != 7 || r.Index != 42 || !r.Time.Equal(at) || r.Kind != AuditMessage || !r.Private {
		t.Errorf("redacted event lost its place: %+v", r)
	}
	if got, want := r.Line(), "[2025-10-20T14:30:45Z] MESSAGE: (private)"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	data, _ := json.Marshal(r)
	for _, leak := range []string{"triage", "orchestrator", "secret", "CHAT", "msg-"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("redacted event %s leaks %q", data, leak)
		}
	}
	pub := ev
	pub.Private = false
	if got := RedactEvent(pub); got.Text != "secret plans" || got.From != "triage" {
		t.Errorf("a public event was redacted: %+v", got)
	}
}

// The audit events of a private send record it: Private and the readers,
// on the message line and on the lines of recipients the rules blocked;
// the sender's registration by that send does not name the message.
func TestPrivateSendAudit(t *testing.T) {
	b := newMbox(t)
	b.register("tina", "tester")
	b.register("rex", "reviewer")
	b.register("dev", "developer")
	b.register("dan", "developer")
	b.ok(api.OpSetRules, rulesTesterReviewer)
	auditBefore := len(b.auditLines())

	m := b.msg("tina", "results attached", "rex", "role:developer")
	m.Visibility = api.VisibilityPrivate
	b.send(m)
	pub := b.msg("tina", "public note", "dev")
	b.send(pub)
	first := b.msg("newbie", "hello in private", "dev")
	first.Visibility = api.VisibilityPrivate
	b.send(first) // registers newbie

	p, err := b.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	evs := p.Events[auditBefore:]
	if len(evs) != 5 {
		t.Fatalf("events = %+v, want message, blocked, message, register, message", evs)
	}
	msgEv, blockedEv, pubEv, regEv, firstEv := evs[0], evs[1], evs[2], evs[3], evs[4]
	if msgEv.Kind != AuditMessage || !msgEv.Private || !slices.Equal(msgEv.To, []string{"dan", "dev"}) ||
		!slices.Equal(msgEv.Readers, []string{"dan", "dev", "rex"}) {
		t.Errorf("private message event = %+v, want private with readers dan, dev, rex", msgEv)
	}
	if blockedEv.Kind != AuditBlocked || !blockedEv.Private || !slices.Equal(blockedEv.Readers, msgEv.Readers) {
		t.Errorf("blocked event = %+v, want private with the message's readers", blockedEv)
	}
	if pubEv.Private || pubEv.Readers != nil || pubEv.Text != "public note" {
		t.Errorf("public message event = %+v, want it unmarked", pubEv)
	}
	if regEv.Label != "REGISTER" || regEv.From != "newbie" || regEv.MessageID != "" || regEv.Private {
		t.Errorf("registration by a private send = %+v, want no message id", regEv)
	}
	if !firstEv.Private || !slices.Equal(firstEv.Readers, []string{"dev"}) {
		t.Errorf("first send event = %+v", firstEv)
	}
	// Every one of them is hidden from a third agent and readable by a party.
	dan, gina := &api.Viewer{Agent: "dan"}, &api.Viewer{Agent: "gina"}
	for _, e := range []api.AuditEvent{msgEv, blockedEv, firstEv} {
		if gina.CanReadEvent(&e) {
			t.Errorf("gina reads %+v", e)
		}
	}
	if !dan.CanReadEvent(&msgEv) || !dan.CanReadEvent(&blockedEv) || dan.CanReadEvent(&firstEv) {
		t.Errorf("dan reads the wrong events")
	}
	// The stored message and its audit line agree on who reads them.
	stored, err := b.f.Message(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"tina", "rex", "dev", "dan"} {
		v := &api.Viewer{Agent: a}
		if !v.CanRead(stored) || !v.CanReadEvent(&msgEv) {
			t.Errorf("%s cannot read the message or its line", a)
		}
	}
}

// A strict_senders refusal of a private send is a private BLOCKED line.
func TestPrivateStrictSendersAudit(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "strict_senders", Value: []byte("true")})
	m := b.msg("mallory", "let me in", "alice")
	m.Visibility = api.VisibilityPrivate
	b.sendErr(m)
	p, err := b.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	last := p.Events[len(p.Events)-1]
	if last.Kind != AuditBlocked || !last.Private || !slices.Equal(last.Readers, []string{"alice"}) {
		t.Errorf("blocked event = %+v, want private with reader alice", last)
	}
}

func TestOverviewFor(t *testing.T) {
	f := overviewLog(t) // #4 private codex → claude, on channel a
	codex, claude, gemini, mod := &api.Viewer{Agent: "codex"}, &api.Viewer{Agent: "claude"}, &api.Viewer{Agent: "gemini"}, &api.Viewer{Moderator: true}
	for _, c := range []struct {
		name    string
		v       *api.Viewer
		channel string
		after   uint64
		limit   int
		want    []uint64
		more    bool
	}{
		{"third agent, all", gemini, "", 0, 10, []uint64{1, 2, 3, 5, 6, 7}, false},
		// The page reads on past #4 to hold three entries.
		{"third agent, page over the private one", gemini, "", 2, 3, []uint64{3, 5, 6}, true},
		{"third agent, channel a", gemini, "a", 0, 3, []uint64{1, 3, 6}, false},
		{"third agent, only the private one left", gemini, "a", 3, 1, []uint64{6}, false},
		{"sender", codex, "a", 0, 10, []uint64{1, 3, 4, 6}, false},
		{"recipient", claude, "", 3, 1, []uint64{4}, true},
		{"moderator", mod, "", 3, 2, []uint64{4, 5}, true},
		{"no viewer", nil, "a", 0, 10, []uint64{1, 3, 4, 6}, false},
	} {
		p, err := f.OverviewFor(c.v, c.channel, c.after, c.limit)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := overviewSeqs(p); !slices.Equal(got, c.want) || p.HasMore != c.more {
			t.Errorf("%s: seqs %v more %t, want %v %t", c.name, got, p.HasMore, c.want, c.more)
		}
		for _, e := range p.Messages {
			if e.Seq != 4 {
				continue
			}
			wantTitle := "private plans"
			if c.v == nil {
				wantTitle = PrivateText
			}
			if !e.Private || e.Title != wantTitle {
				t.Errorf("%s: private entry %+v, want title %q", c.name, e, wantTitle)
			}
		}
	}
	// Paging a third agent's view by the last seq reaches every public entry once.
	var got []uint64
	after := uint64(0)
	for range 10 {
		p, err := f.OverviewFor(gemini, "", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, overviewSeqs(p)...)
		if !p.HasMore {
			break
		}
		after = p.Messages[len(p.Messages)-1].Seq
	}
	if !slices.Equal(got, []uint64{1, 2, 3, 5, 6, 7}) {
		t.Errorf("paged = %v", got)
	}
}

// A reply to a private message is stored private whatever the client set:
// its parties read it, an agent who is neither its party nor a moderator
// does not (message, overview, audit), and a retry of the send as the
// client sent it is the same send, not a conflict.
func TestReplyToPrivateIsPrivate(t *testing.T) {
	b := newMbox(t)
	for _, a := range []string{"alice", "bob", "carol"} {
		b.register(a, "agent")
	}
	secret := b.msg("alice", "the plan, between us", "bob")
	secret.Visibility, secret.Title = api.VisibilityPrivate, "plan"
	b.send(secret)
	auditBefore := len(b.auditLines())

	// bob's client leaks: a public answer quoting the plan. A non-party
	// who learnt the id answers it too.
	reply := b.msg("bob", "agreed: the plan is fine", "alice")
	reply.InReplyTo, reply.Title, reply.Visibility = secret.ID, "Re: plan", api.VisibilityPublic
	res := b.send(reply)
	nosy := b.msg("carol", "what plan?", "alice")
	nosy.InReplyTo = secret.ID
	b.send(nosy)

	stored, err := b.f.Message(reply.ID)
	if err != nil || stored.Visibility != api.VisibilityPrivate {
		t.Fatalf("reply stored %+v, %v; want visibility private", stored, err)
	}
	for agent, want := range map[string]bool{"alice": true, "bob": true, "carol": false} {
		if got := (&api.Viewer{Agent: agent}).CanRead(stored); got != want {
			t.Errorf("%s reads the reply: %t, want %t", agent, got, want)
		}
	}
	if !(&api.Viewer{Agent: "dave", Moderator: true}).CanRead(stored) {
		t.Errorf("a moderator cannot read the reply")
	}
	// carol cannot read what she answers: her reply is stored as one to an
	// unknown id, so it tells her nothing of it (neither that it is
	// private nor its thread).
	if n, err := b.f.Message(nosy.ID); err != nil || n.Visibility != api.VisibilityPublic || n.ThreadID != secret.ID {
		t.Errorf("carol's reply stored %+v, %v; want as to an unknown id: public as sent, thread its in_reply_to", n, err)
	}
	ov, err := b.f.OverviewFor(&api.Viewer{Agent: "carol"}, "", 0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ov.Messages {
		if e.ID == reply.ID {
			t.Errorf("carol's overview lists the reply: %+v", e)
		}
	}

	// The audit line of the reply is private, readable by its parties,
	// redacted for carol.
	p, err := b.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	var line *api.AuditEvent
	for i := range p.Events[auditBefore:] {
		if e := &p.Events[auditBefore+i]; e.MessageID == reply.ID {
			line = e
		}
	}
	if line == nil || !line.Private || !slices.Equal(line.Readers, []string{"alice"}) {
		t.Fatalf("audit line of the reply = %+v; want private with readers [alice]", line)
	}
	if (&api.Viewer{Agent: "carol"}).CanReadEvent(line) || !(&api.Viewer{Agent: "alice"}).CanReadEvent(line) {
		t.Errorf("audit line visibility: carol %t, alice %t; want false, true",
			(&api.Viewer{Agent: "carol"}).CanReadEvent(line), (&api.Viewer{Agent: "alice"}).CanReadEvent(line))
	}
	if red := RedactEvent(*line); strings.Contains(red.Line(), "plan") || red.MessageID != "" {
		t.Errorf("redacted line %q (id %q) leaks the reply", red.Line(), red.MessageID)
	}

	// A retry of bob's send, public as his client sent it, is the same
	// send.
	again := b.send(reply)
	if !again.Duplicate || again.Seq != res.Seq {
		t.Errorf("retry = %+v, want a duplicate of seq %d", again, res.Seq)
	}

	// A reply to a public message keeps the visibility it was sent with.
	open := b.msg("alice", "lunch?", "bob")
	b.send(open)
	answer := b.msg("bob", "yes", "alice")
	answer.InReplyTo = open.ID
	b.send(answer)
	if a, err := b.f.Message(answer.ID); err != nil || a.Visibility != api.VisibilityPublic {
		t.Errorf("reply to a public message stored %+v, %v; want public", a, err)
	}
}

// Seed 004's code-of-conduct flag is stored for moderators only whatever
// its sender set: by its type, by metadata.privacy_level in any case, or
// asked for. It reaches the inboxes of the agents "to" names by id and no
// one else ("all", a role, a mention); its audit lines are private with
// those readers; an answer to it is for moderators too; a retry is the
// same send.
func TestModeratorsOnlyAtApply(t *testing.T) {
	b := newMbox(t)
	for _, a := range []string{"community", "orchestrator", "triage", "scribe"} {
		b.register(a, "agent")
	}
	b.register("lead", "orchestrator")
	auditBefore := len(b.auditLines())

	flag := b.msg("community", "harassment in issue #123, see @scribe", "orchestrator", "all", "role:orchestrator")
	flag.Type, flag.Visibility = TypeCoCViolationFlag, api.VisibilityPublic
	res := b.send(flag)
	byLevel := b.msg("community", "flag by privacy level", "orchestrator")
	byLevel.Type, byLevel.Metadata = "report", []byte(`{"privacy_level":"private_to_moderators","severity":"high"}`)
	b.send(byLevel)
	asked := b.msg("community", "asked for", "triage")
	asked.Visibility = api.VisibilityModerators
	b.send(asked)
	plain := b.msg("community", "a plain report", "orchestrator")
	plain.Metadata = []byte(`{"privacy_level":"PUBLIC"}`)
	b.send(plain)

	for _, id := range []string{flag.ID, byLevel.ID, asked.ID} {
		m, err := b.f.Message(id)
		if err != nil || m.Visibility != api.VisibilityModerators {
			t.Errorf("%s stored %+v, %v; want visibility moderators", id, m, err)
		}
	}
	if m, _ := b.f.Message(plain.ID); m.Visibility != api.VisibilityPublic {
		t.Errorf("a plain report stored %s", m.Visibility)
	}
	stored, _ := b.f.Message(flag.ID)
	if !slices.Equal(stored.Recipients, []string{"orchestrator"}) {
		t.Errorf("flag delivered to %v, want only orchestrator (named by id)", stored.Recipients)
	}
	for agent, want := range map[string]uint64{"orchestrator": 3, "triage": 1, "scribe": 0, "lead": 0} {
		if c := b.counts(agent); c.Total != want {
			t.Errorf("%s's inbox holds %d, want %d", agent, c.Total, want)
		}
	}
	for agent, want := range map[string]bool{"community": true, "orchestrator": true, "lead": false, "scribe": false, "triage": false} {
		if got := (&api.Viewer{Agent: agent}).CanRead(stored); got != want {
			t.Errorf("%s reads the flag: %t, want %t", agent, got, want)
		}
	}
	p, err := b.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	ev := p.Events[auditBefore]
	if ev.MessageID != flag.ID || !ev.Private || !slices.Equal(ev.Readers, []string{"orchestrator"}) {
		t.Errorf("flag's audit line = %+v, want private with reader orchestrator", ev)
	}
	if (&api.Viewer{Agent: "lead"}).CanReadEvent(&ev) {
		t.Errorf("lead reads the flag's audit line")
	}

	// An answer to the flag, public as its client sent it, is for
	// moderators too; the retry of the flag is the same send.
	answer := b.msg("orchestrator", "escalated", "community")
	answer.InReplyTo, answer.Visibility = flag.ID, api.VisibilityPublic
	b.send(answer)
	if a, _ := b.f.Message(answer.ID); a.Visibility != api.VisibilityModerators || (&api.Viewer{Agent: "lead"}).CanRead(a) {
		t.Errorf("answer stored %+v; want for moderators, unreadable by lead", a)
	}
	if again := b.send(flag); !again.Duplicate || again.Seq != res.Seq {
		t.Errorf("retry of the flag = %+v, want a duplicate of seq %d", again, res.Seq)
	}
	// The overview of a third agent leaves them out; a moderator's shows them.
	ov, err := b.f.OverviewFor(&api.Viewer{Agent: "lead"}, "", 0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ov.Messages {
		if e.ID == flag.ID || e.ID == answer.ID || e.ID == byLevel.ID {
			t.Errorf("lead's overview lists %s", e.ID)
		}
	}
	ov, _ = b.f.OverviewFor(&api.Viewer{Moderator: true}, "", 0, api.MaxPageLimit)
	if len(ov.Messages) != 5 {
		t.Errorf("a moderator's overview lists %d messages, want 5", len(ov.Messages))
	}
}

// A fork answers its parent's private mail as its parent's token reads it:
// the answer is threaded and private like any party's (the sender's
// principal is who apply asks whether it may see the parent).
func TestForkRepliesToItsParentsPrivateMail(t *testing.T) {
	b := newMbox(t)
	secret := b.msg("alice", "the plan", "bob")
	secret.Visibility = api.VisibilityPrivate
	b.send(secret)
	answer := b.msg("bob-fork-1", "done", "alice")
	answer.InReplyTo = secret.ID
	b.send(answer)
	stored, err := b.f.Message(answer.ID)
	if err != nil || stored.ThreadID != secret.ID || stored.Visibility != api.VisibilityPrivate {
		t.Fatalf("bob-fork-1's answer %+v (%v): want private in alice's thread", stored, err)
	}
	stranger := b.msg("carol-fork-1", "?", "alice")
	stranger.InReplyTo = secret.ID
	b.send(stranger)
	if n, _ := b.f.Message(stranger.ID); n == nil || n.Visibility == api.VisibilityPrivate {
		t.Errorf("carol-fork-1's reply to a message carol cannot read took its visibility: %+v", n)
	}
}
