package fsm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// knownBox is a taskBox (boss orchestrator; rita reviewer, go; rex
// reviewer; eve engineer, go and rust) with worker1 (worker) and alice
// (lead) registered.
func knownBox(t *testing.T) *taskBox {
	t.Helper()
	b := newTaskBox(t)
	b.register("worker1", "worker")
	b.register("alice", "lead")
	return b
}

// flagged is m as the node that accepted a client's send proposes it.
func flagged(m api.Message) api.SendCommand { return api.SendCommand{Message: m, KnownNames: true} }

func (b *taskBox) setUnknownRecipients(v api.UnknownRecipients) {
	b.t.Helper()
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "unknown_recipients", Value: json.RawMessage(`"` + string(v) + `"`)})
}

func (b *taskBox) approvalRequest(id string, approvers ...string) api.ApprovalRequestCommand {
	c := api.ApprovalRequestCommand{ID: id, From: "boss", Approvers: approvers, Title: "deploy", Action: json.RawMessage(`{"deploy":1}`)}
	c.Normalize(b.now())
	return c
}

// A flagged send, create, handoff or approval request naming an agent
// that is neither registered nor has sent, or a role or capability no
// agent has, is refused with a *NotFoundError naming each name and the
// closest known ones, and stores nothing.
func TestUnknownNamesRefused(t *testing.T) {
	b := knownBox(t)
	remedy := "; register the agent, or one with the role or capability (maosctl agents register ID --role ROLE --capability CAP), or let the agent send first; to address agents before they exist: maosctl cluster config set unknown_recipients accept"

	err := b.refused(api.OpSend, flagged(b.msg("boss", "hi", "wroker1", "role:wrker", "rita", "capability:rusty")), api.ErrNotFound, "")
	want := `to: agent "wroker1" (not registered, never sent; did you mean worker1?), role "wrker" (no agent has it; did you mean role:worker?) and capability "rusty" (no agent has it; did you mean capability:rust?): not found` + remedy
	var nf *api.NotFoundError
	if !errors.As(err, &nf) || nf.Error() != want {
		t.Errorf("send refused with\n %v\nwant a *NotFoundError saying\n %s", err, want)
	}

	// A name far from every known one gets no suggestion; a role's hint
	// does not tell to let it send.
	b.refused(api.OpSend, flagged(b.msg("boss", "hi", "zzzzzzzz")), api.ErrNotFound, `to: agent "zzzzzzzz" (not registered, never sent): not found; register`)
	b.refused(api.OpSend, flagged(b.msg("boss", "hi", "role:laed")), api.ErrNotFound,
		`to: role "laed" (no agent has it; did you mean role:lead?): not found; register the agent, or one with the role or capability (maosctl agents register ID --role ROLE --capability CAP); to address`)
	// An agent's name close to a role suggests it too.
	b.refused(api.OpSend, flagged(b.msg("boss", "hi", "workr")), api.ErrNotFound, `(not registered, never sent; did you mean role:worker or worker1?)`)
	// An interrupt's alert is a send.
	alert := *NewInterrupt("boss", "wroker1", "general", "stop")
	alert.ID = "msg-20261121-103000-boss-000000aa"
	alert.Normalize(b.now())
	b.refused(api.OpSend, api.SendCommand{Message: alert, Interrupt: &api.Interrupt{Moderator: true}, KnownNames: true}, api.ErrNotFound, "did you mean worker1?")

	create := b.newTask("role:wrker")
	create.KnownNames = true
	b.refused(api.OpTaskCreate, create, api.ErrNotFound, `to: role "wrker" (no agent has it; did you mean role:worker?): not found`)
	create = b.newTask("capability:gp")
	create.KnownNames = true
	b.refused(api.OpTaskCreate, create, api.ErrNotFound, `to: capability "gp" (no agent has it; did you mean capability:go?)`)

	c := b.create(b.newTask("rita"))
	cl := b.claim(c.ID, "rita")
	b.refused(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "wroker1", KnownNames: true}, api.ErrNotFound,
		`to: agent "wroker1" (not registered, never sent; did you mean worker1?): not found`)

	req := b.approvalRequest("appr-1", "alcie", "role:lead", "rex")
	req.KnownNames = true
	b.refused(api.OpApprovalRequest, req, api.ErrNotFound, `approvers: agent "alcie" (not registered, never sent; did you mean alice?): not found`)
}

// The entries an older build committed carry no flag: they apply as they
// always did (the phantom inbox, the queue no one serves), so a node that
// replays them computes the state a node that applied them before the
// upgrade holds.
func TestUnflaggedEntriesApplyAsBefore(t *testing.T) {
	b := knownBox(t)
	r := b.send(b.msg("boss", "hi", "wroker1"))
	if rc := b.receipts(r.ID); rc["wroker1"].State != api.ReceiptNoSuchAgent {
		t.Errorf("receipt of wroker1 = %+v, want %s", rc["wroker1"], api.ReceiptNoSuchAgent)
	}
	if res := b.create(b.newTask("role:wrker")); res.State != api.TaskReady {
		t.Errorf("create for role:wrker: %+v, want ready", res)
	}
	c := b.create(b.newTask("rita"))
	cl := b.claim(c.ID, "rita")
	if res := mustTaskResult(t, b.ok(api.OpTaskHandoff, api.TaskHandoffCommand{ID: c.ID, Agent: "rita", Fence: cl.Fence, To: "wroker1"})); res.State != api.TaskReady {
		t.Errorf("handoff to wroker1: %+v, want ready", res)
	}
	b.ok(api.OpApprovalRequest, b.approvalRequest("appr-1", "alcie"))
	// An unflagged send records no sender: a node replaying it holds no
	// record a node that applied it before did not.
	b.send(b.msg("newbie", "hi", "boss"))
	if d := dataDump(t, b.f); strings.Contains(d, "senders ") {
		t.Errorf("unflagged sends recorded senders:\n%s", d)
	}
}

// Under unknown_recipients accept, flagged commands store what they
// stored before names were checked; refuse (the default) checks again.
func TestUnknownRecipientsAccept(t *testing.T) {
	b := knownBox(t)
	b.setUnknownRecipients(api.UnknownRecipientsAccept)
	r := mustSendResult(t, b.ok(api.OpSend, flagged(b.msg("boss", "hi", "wroker1"))))
	rc := b.receipts(r.ID)
	if got := rc["wroker1"]; got.State != api.ReceiptNoSuchAgent || got.Reached(api.ReceiptDelivered) {
		t.Errorf("receipt of wroker1 = %+v (reached delivered: %v), want %s, not reached", got, got.Reached(api.ReceiptDelivered), api.ReceiptNoSuchAgent)
	}
	create := b.newTask("role:wrker")
	create.KnownNames = true
	if res := b.create(create); res.State != api.TaskReady {
		t.Errorf("create for role:wrker under accept: %+v, want ready", res)
	}
	req := b.approvalRequest("appr-1", "alcie")
	req.KnownNames = true
	b.ok(api.OpApprovalRequest, req)

	// Once an agent of that name exists, its receipt reads delivered.
	b.register("wroker1", "worker")
	if got := b.receipts(r.ID)["wroker1"]; got.State != api.ReceiptDelivered || !got.Reached(api.ReceiptDelivered) {
		t.Errorf("receipt of wroker1 once registered = %+v, want delivered", got)
	}

	b.setUnknownRecipients(api.UnknownRecipientsRefuse)
	b.refused(api.OpSend, flagged(b.msg("boss", "hi", "ghost")), api.ErrNotFound, `agent "ghost"`)
}

// An agent that sent (a flagged send) stays known after it is
// unregistered; the agent of a live token is known before it ever runs,
// and no longer once the token is revoked. A sender may address itself
// in its first send, and all, globs and @mentions are not names to check.
func TestKnownAgents(t *testing.T) {
	b := knownBox(t)
	b.ok(api.OpSend, flagged(b.msg("newbie", "first words", "boss")))
	b.ok(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "newbie"})
	b.ok(api.OpSend, flagged(b.msg("boss", "welcome back", "newbie")))

	// A sender of an unflagged send is not recorded: once unregistered,
	// no one answers to its name.
	b.send(b.msg("oldie", "sent by an older build", "boss"))
	b.ok(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "oldie"})
	b.refused(api.OpSend, flagged(b.msg("boss", "hi", "oldie")), api.ErrNotFound, `agent "oldie"`)

	b.ok(api.OpCreateToken, api.CreateTokenCommand{ID: "t1", Agent: "ghost", Role: api.TokenRoleAgent, Hash: HashToken("s1")})
	b.ok(api.OpSend, flagged(b.msg("boss", "your first task", "ghost")))
	create := b.newTask("ghost")
	create.KnownNames = true
	b.create(create)
	b.ok(api.OpRevokeToken, api.RevokeTokenCommand{ID: "t1"})
	b.refused(api.OpSend, flagged(b.msg("boss", "hi", "ghost")), api.ErrNotFound, `agent "ghost"`)

	b.ok(api.OpSend, flagged(b.msg("fresh", "note to self", "fresh")))
	b.ok(api.OpSend, flagged(b.msg("boss", "hi @nobody", "all", "r*")))
}

func TestClosest(t *testing.T) {
	pool := []candidate{{"worker1", "worker1"}, {"worker2", "worker2"}, {"role:worker", "worker"}, {"alice", "alice"}, {"bo", "bo"}}
	tests := []struct {
		name string
		want []string
	}{
		{"wroker1", []string{"worker1"}},
		{"worker", []string{"role:worker", "worker1", "worker2"}},
		{"alcie", []string{"alice"}},
		{"ab", []string{}},
		{"bx", []string{"bo"}},
		{"zzzzzz", []string{}},
	}
	for _, tt := range tests {
		if got := closest(tt.name, pool); !slices.Equal(got, tt.want) {
			t.Errorf("closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Two state machines fed the same flagged log, one in a single batch and
// one entry by entry, hold the same senders.
func TestKnownNamesDeterministic(t *testing.T) {
	f1, _ := openTemp(t)
	f2, _ := openTemp(t)
	l := &entryLog{tb: t, ts: baseTS}
	ms := time.Millisecond
	for i, from := range []string{"a", "b", "a", "c"} {
		m := testMessage(msgID(i), "general", "x")
		m.From, m.To = from, []string{"a"}
		l.add(ms, api.OpSend, api.SendCommand{Message: m, KnownNames: true})
	}
	f1.ApplyBatch(l.logs)
	for _, e := range l.logs {
		applyOne(f2, e)
	}
	if d1, d2 := dump(t, f1), dump(t, f2); d1 != d2 {
		t.Errorf("states differ:\n%s\n%s", d1, d2)
	}
}

// A refusal names at most maxNamed names, then counts the rest.
func TestUnknownNamesBounded(t *testing.T) {
	b := knownBox(t)
	var to []string
	for i := range 20 {
		to = append(to, "r"+itoa(uint64(i)))
	}
	err := b.refused(api.OpSend, flagged(b.msg("boss", "hi", to...)), api.ErrNotFound, `agent "r7" (not registered, never sent) and 12 more: not found`)
	if strings.Contains(err.Error(), `"r8"`) {
		t.Errorf("refusal names more than %d names: %v", maxNamed, err)
	}
}
