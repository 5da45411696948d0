package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// apprBox is a taskBox (boss, rita, rex, eve registered) with approvers:
// alice, bob and carol (role lead), and lee (role lead too).
type apprBox struct {
	*taskBox
	n int
}

func newApprBox(t *testing.T) *apprBox {
	t.Helper()
	b := &apprBox{taskBox: newTaskBox(t)}
	b.register("alice", "reviewer")
	b.register("bob", "engineer")
	b.register("carol", "lead")
	b.register("lee", "lead")
	b.register("triage", "agent")
	return b
}

// request is a valid request from triage, 2 of alice, bob, role:lead,
// for a 10-minute decision; id from the counter.
func (b *apprBox) request() api.ApprovalRequestCommand {
	b.n++
	c := api.ApprovalRequestCommand{ID: fmt.Sprintf("appr-%d", b.n), From: "triage", Approvers: []string{"alice", "bob", "role:lead"}, Quorum: 2,
		Title: fmt.Sprintf("Close #%d", b.n), Action: json.RawMessage(fmt.Sprintf(`{"close_issue": %d}`, b.n)), Rationale: "a duplicate",
		Timeout: api.ApprovalTimeout(10 * time.Minute)}
	c.Normalize(b.now())
	return c
}

func (b *apprBox) open(c api.ApprovalRequestCommand) *api.ApprovalResult {
	b.t.Helper()
	r, ok := b.ok(api.OpApprovalRequest, c).(*api.ApprovalResult)
	if !ok {
		b.t.Fatal("request result is not an *ApprovalResult")
	}
	return r
}

func (b *apprBox) decide(id, approver, decision, hash string) *api.Approval {
	b.t.Helper()
	return b.decideCmd(api.ApprovalDecideCommand{ID: id, Approver: approver, Decision: decision, ActionHash: hash})
}

func (b *apprBox) decideCmd(c api.ApprovalDecideCommand) *api.Approval {
	b.t.Helper()
	c.Normalize()
	ap, ok := b.ok(api.OpApprovalDecide, c).(*api.Approval)
	if !ok {
		b.t.Fatal("decide result is not an *Approval")
	}
	return ap
}

func (b *apprBox) approval(id string) *api.Approval {
	b.t.Helper()
	ap, err := b.f.Approval(id)
	if err != nil {
		b.t.Fatalf("Approval(%s): %v", id, err)
	}
	return ap
}

func (b *apprBox) pending(agent string) int {
	b.t.Helper()
	n, err := b.f.PendingApprovalsFor(agent)
	if err != nil {
		b.t.Fatalf("PendingApprovalsFor(%s): %v", agent, err)
	}
	return n
}

// messagesFrom lists the stored messages from from, oldest first.
func (b *apprBox) messagesFrom(from string) []*api.Message {
	b.t.Helper()
	p, err := b.f.MessagesAfter(0, api.MaxPageLimit)
	if err != nil {
		b.t.Fatal(err)
	}
	var out []*api.Message
	for _, m := range p.Messages {
		if m.From == from {
			out = append(out, m)
		}
	}
	return out
}

func hashOf(tb testing.TB, action string) string {
	tb.Helper()
	h, err := api.ActionHash(json.RawMessage(action))
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// decisionsOfApproval lists an approval's decisions as "approver decision
// [voided]".
func decisionList(ap *api.Approval) []string {
	var out []string
	for _, d := range ap.Decisions {
		s := d.Approver + " " + d.Decision
		if d.Voided {
			s += " voided"
		}
		out = append(out, s)
	}
	return out
}

// The 2-of-3: one approval leaves it pending, the same approver
// again is refused, a decision on a stale hash is refused, a second
// distinct approver (here through its role) approves it; the requester
// hears of it in reply to the request.
func TestApproval2of3(t *testing.T) {
	b := newApprBox(t)
	c := b.request()
	res := b.open(c)
	h := hashOf(t, string(c.Action))
	if res.ID != c.ID || res.State != api.ApprovalPending || res.ActionHash != h || res.Quorum != 2 || res.Approvals != 0 || res.Seq != b.idx {
		t.Fatalf("request = %+v", res)
	}
	ap := b.approval(c.ID)
	if !ap.Deadline.Equal(b.now().Add(10*time.Minute)) || ap.TimeoutSeconds != 600 || ap.Created != b.now() || len(ap.Decisions) != 0 {
		t.Errorf("stored approval = %+v", ap)
	}
	// The request message, from the requester to the approvers.
	m := b.lastMessage()
	if m.ID != ap.MessageID || m.Type != api.TypeHITLRequest || m.From != "triage" || m.CorrelationID != c.ID || m.Title != c.Title ||
		!strings.Contains(m.Content.Text, "a duplicate") || !strings.Contains(m.Content.Text, h) ||
		!slices.Equal(m.Recipients, []string{"alice", "bob", "carol", "lee"}) {
		t.Errorf("request message = %+v", m)
	}
	var meta map[string]any
	if err := json.Unmarshal(m.Metadata, &meta); err != nil || meta["approval_id"] != c.ID || meta["action_hash"] != h || meta["quorum"] != 2.0 {
		t.Errorf("request metadata %s", m.Metadata)
	}
	lines := b.auditLines()
	if want := "[triage→alice,bob,role:lead] HITL_REQUEST: " + c.Title + " (2 of 3)"; !strings.HasSuffix(lines[len(lines)-1], want) {
		t.Errorf("audit %q, want %q", lines[len(lines)-1], want)
	}
	for agent, want := range map[string]int{"alice": 1, "bob": 1, "carol": 1, "rex": 0, "triage": 0} {
		if got := b.pending(agent); got != want {
			t.Errorf("PendingApprovalsFor(%s) = %d, want %d", agent, got, want)
		}
	}

	got := b.decide(c.ID, "alice", api.DecisionApprove, h)
	if got.State != api.ApprovalPending || got.Approvals != 1 || !slices.Equal(decisionList(got), []string{"alice approve"}) {
		t.Fatalf("after alice: %+v", got)
	}
	if lines := b.auditLines(); !strings.HasSuffix(lines[len(lines)-1], "[alice→triage] HITL_DECISION: approve by alice") {
		t.Errorf("audit %q", lines[len(lines)-1])
	}
	if b.pending("alice") != 0 || b.pending("bob") != 1 {
		t.Errorf("pending after alice: alice %d, bob %d; want 0, 1", b.pending("alice"), b.pending("bob"))
	}
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "alice", Decision: api.DecisionApprove, ActionHash: h},
		api.ErrConflict, "alice already decided approve on "+h)
	stale := hashOf(t, `{"close_issue": 0}`)
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "bob", Decision: api.DecisionApprove, ActionHash: stale},
		api.ErrConflict, "the action changed to "+h+": look at it again")

	got = b.decideCmd(api.ApprovalDecideCommand{ID: c.ID, Approver: "carol", Decision: api.DecisionApprove, ActionHash: h, Comment: "ok"})
	if got.State != api.ApprovalApproved || got.Approvals != 2 || !slices.Equal(decisionList(got), []string{"alice approve", "carol approve"}) {
		t.Fatalf("after carol: %+v", got)
	}
	reply := b.lastMessage()
	if reply.Type != api.TypeHITLDecision || reply.From != "carol" || !slices.Equal(reply.Recipients, []string{"triage"}) ||
		reply.InReplyTo != ap.MessageID || reply.Content.Text != "approved by alice, carol\n\nok" || reply.Title != "approved: "+c.Title {
		t.Errorf("decision message = %+v", reply)
	}
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "bob", Decision: api.DecisionApprove, ActionHash: h},
		api.ErrConflict, "approval "+c.ID+" is approved: no decision changes it any more")
	if b.pending("bob") != 0 {
		t.Error("a decided approval still counts as pending")
	}
}

// Only a listed approver decides: by id, or by its registered role.
func TestApprovalNotListedIsForbidden(t *testing.T) {
	b := newApprBox(t)
	c := b.request()
	b.open(c)
	h := hashOf(t, string(c.Action))
	for _, who := range []string{"rex", "triage", "nobody"} {
		b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: who, Decision: api.DecisionApprove, ActionHash: h},
			api.ErrForbidden, "approval "+c.ID+" is decided by alice, bob, role:lead: "+who+" (")
	}
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: "appr-none", Approver: "alice", Decision: api.DecisionApprove, ActionHash: h},
		api.ErrNotFound, "approval appr-none: not found")
	// lee is of role lead: it decides.
	if got := b.decide(c.ID, "lee", api.DecisionApprove, h); got.Approvals != 1 {
		t.Errorf("lee's approval = %+v", got)
	}
	// Two agents of one role count as two approvers.
	if got := b.decide(c.ID, "carol", api.DecisionApprove, h); got.State != api.ApprovalApproved {
		t.Errorf("carol after lee = %+v, want approved", got)
	}
}

// A modify replaces the action and its hash, voids the approvals so far
// (kept, voided) and leaves the approval pending with its deadline; the
// approvers decide again on the new hash. A reject ends it.
func TestApprovalModifyVoidsThenReject(t *testing.T) {
	b := newApprBox(t)
	c := b.request()
	b.open(c)
	deadline := b.approval(c.ID).Deadline
	h := hashOf(t, string(c.Action))
	b.decide(c.ID, "alice", api.DecisionApprove, h)
	newAction := `{"close_issue": 1, "comment": "dup of #7"}`
	got := b.decideCmd(api.ApprovalDecideCommand{ID: c.ID, Approver: "bob", Decision: api.DecisionModify, ActionHash: h, Action: json.RawMessage(newAction)})
	h2 := hashOf(t, newAction)
	if got.State != api.ApprovalPending || got.ActionHash != h2 || got.Approvals != 0 || !got.Deadline.Equal(deadline) ||
		string(got.Action) != `{"close_issue":1,"comment":"dup of #7"}` ||
		!slices.Equal(decisionList(got), []string{"alice approve voided", "bob modify"}) {
		t.Fatalf("after the modify: %+v %v", got, decisionList(got))
	}
	if d := got.Decisions[1]; d.ActionHash != h || string(d.Action) != string(got.Action) {
		t.Errorf("the modify's decision = %+v", d)
	}
	if lines := b.auditLines(); !strings.HasSuffix(lines[len(lines)-1], "HITL_DECISION: modify by bob → "+h2) {
		t.Errorf("audit %q", lines[len(lines)-1])
	}
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "alice", Decision: api.DecisionApprove, ActionHash: h},
		api.ErrConflict, "the action changed to "+h2)
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "carol", Decision: api.DecisionModify, ActionHash: h2, Action: json.RawMessage(newAction)},
		api.ErrConflict, "is the current one")
	// alice may decide again on the new action; one approval is not two.
	if got := b.decide(c.ID, "alice", api.DecisionApprove, h2); got.State != api.ApprovalPending || got.Approvals != 1 {
		t.Fatalf("alice on the new hash = %+v", got)
	}
	got = b.decideCmd(api.ApprovalDecideCommand{ID: c.ID, Approver: "carol", Decision: api.DecisionReject, ActionHash: h2, Comment: "not a dup"})
	if got.State != api.ApprovalRejected || !slices.Equal(decisionList(got), []string{"alice approve voided", "bob modify", "alice approve", "carol reject"}) {
		t.Fatalf("after the reject: %+v", decisionList(got))
	}
	if m := b.lastMessage(); m.Type != api.TypeHITLDecision || m.From != "carol" || m.Content.Text != "rejected by carol\n\nnot a dup" {
		t.Errorf("reject message = %+v", m)
	}
}

// Decisions outside the approval's options are refused.
func TestApprovalOptionsRefuse(t *testing.T) {
	b := newApprBox(t)
	c := b.request()
	c.Options = []string{api.DecisionApprove, api.DecisionReject}
	b.open(c)
	h := hashOf(t, string(c.Action))
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "alice", Decision: api.DecisionModify, ActionHash: h, Action: json.RawMessage(`1`)},
		api.ErrConflict, "approval "+c.ID+" takes approve, reject, not modify")
	if got := b.decide(c.ID, "alice", api.DecisionReject, h); got.State != api.ApprovalRejected {
		t.Errorf("a listed option = %+v", got)
	}
}

// A request is idempotent by id: the same request answers the original
// result, another under the same id is a conflict.
func TestApprovalRequestIdempotent(t *testing.T) {
	b := newApprBox(t)
	c := b.request()
	first := b.open(c)
	b.decide(c.ID, "alice", api.DecisionApprove, first.ActionHash)
	before := dataDump(t, b.f)
	again := b.open(c)
	if *again != *first {
		t.Errorf("retried request = %+v, want %+v", again, first)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried request changed the state")
	}
	other := c
	other.Title = "something else"
	b.refused(api.OpApprovalRequest, other, api.ErrConflict, "approval id "+c.ID+" is taken by another approval (requested at seq "+itoa(first.Seq)+")")
	// The rules refuse its message, and with it the request.
	b.ok(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Forbidden: []rules.ForbiddenRule{{From: "triage", To: "*", Reason: "triage is muted"}}}})
	b.refused(api.OpApprovalRequest, b.request(), api.ErrForbidden, "triage is muted")
}

// Only the requester cancels, only a pending approval; a retried cancel
// answers again.
func TestApprovalCancel(t *testing.T) {
	b := newApprBox(t)
	c := b.request()
	b.open(c)
	b.refused(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: c.ID, From: "alice"}, api.ErrForbidden,
		"approval "+c.ID+" was requested by triage: only its requester cancels it, not alice")
	r, ok := b.ok(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: c.ID, From: "triage", Reason: "fixed upstream"}).(*api.ApprovalResult)
	if !ok || r.State != api.ApprovalCancelled || r.Seq != b.idx {
		t.Fatalf("cancel = %+v", r)
	}
	seq := r.Seq
	if lines := b.auditLines(); !strings.HasSuffix(lines[len(lines)-1], "HITL_CANCELLED: "+c.Title+" by triage: fixed upstream") {
		t.Errorf("audit %q", lines[len(lines)-1])
	}
	before := dataDump(t, b.f)
	if r := b.ok(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: c.ID, From: "triage"}).(*api.ApprovalResult); r.Seq != seq || r.State != api.ApprovalCancelled {
		t.Errorf("retried cancel = %+v, want seq %d", r, seq)
	}
	if dataDump(t, b.f) != before {
		t.Error("a retried cancel changed the state")
	}
	b.refused(api.OpApprovalDecide, api.ApprovalDecideCommand{ID: c.ID, Approver: "alice", Decision: api.DecisionApprove, ActionHash: r.ActionHash},
		api.ErrConflict, "is cancelled")
	d := b.request()
	b.open(d)
	b.decide(d.ID, "alice", api.DecisionReject, hashOf(t, string(d.Action)))
	b.refused(api.OpApprovalCancel, api.ApprovalCancelCommand{ID: d.ID, From: "triage"}, api.ErrConflict, "approval "+d.ID+" is rejected: nothing to cancel")
}

// The tick expires a pending approval at its deadline (reject), or first
// escalates it: an alert to the escalation target (the requester when
// unset), one more timeout, then expiry. maos tells the requester.
func TestApprovalTickExpiresAndEscalates(t *testing.T) {
	b := newApprBox(t)
	b.register("sam", "supervisor")
	plain := b.request()
	b.open(plain)
	esc := b.request()
	esc.OnTimeout, esc.Timeout = api.OnTimeoutEscalate, api.ApprovalTimeout(15*time.Minute)
	b.open(esc)
	escToRequester := b.request()
	escToRequester.OnTimeout = api.OnTimeoutEscalate
	b.open(escToRequester)
	p, e, r := b.approval(plain.ID), b.approval(esc.ID), b.approval(escToRequester.ID)
	if due, ok := b.f.NextDeadline(); !ok || !due.Equal(p.Deadline) {
		t.Fatalf("NextDeadline = %s %t, want the first deadline %s", due, ok, p.Deadline)
	}
	b.jump(p.Deadline.Add(-time.Nanosecond))
	if res := b.tick(); res.Did() {
		t.Fatalf("tick before the deadline = %+v", res)
	}
	b.jump(r.Deadline)
	res := b.tick()
	if !slices.Equal(res.ApprovalsExpired, []string{plain.ID}) || !slices.Equal(res.ApprovalsEscalated, []string{escToRequester.ID}) {
		t.Fatalf("tick at the deadlines = %+v", res)
	}
	if got := b.approval(plain.ID); got.State != api.ApprovalExpired {
		t.Errorf("plain = %s, want expired", got.State)
	}
	got := b.approval(escToRequester.ID)
	if got.State != api.ApprovalPending || !got.Escalated || !got.Deadline.Equal(r.Deadline.Add(10*time.Minute)) {
		t.Errorf("escalated = %+v", got)
	}
	// The messages are queued: this tick and the next deliver them, in
	// order, one each.
	if res.Delivered == "" || b.tick().Delivered == "" || b.tick().Delivered != "" {
		t.Fatal("the ticks did not deliver the two queued messages one each")
	}
	msgs := b.messagesFrom(api.SystemSender)
	if len(msgs) != 2 {
		t.Fatalf("%d queued messages delivered, want 2", len(msgs))
	}
	if m := msgs[0]; m.Type != api.TypeHITLDecision || m.From != api.SystemSender || !slices.Equal(m.Recipients, []string{"triage"}) ||
		m.InReplyTo != p.MessageID || !strings.HasPrefix(m.Content.Text, "expired: no decision by "+stamp(p.Deadline)) {
		t.Errorf("expiry message = %+v", m)
	}
	if m := msgs[1]; m.Type != "alert" || m.Priority != api.PriorityHigh || m.From != api.SystemSender || !slices.Equal(m.Recipients, []string{"triage"}) ||
		!strings.Contains(m.Content.Text, escToRequester.ID) {
		t.Errorf("escalation to the requester = %+v", m)
	}

	// With an escalation target, the alert goes there.
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: "escalation_target", Value: json.RawMessage(`"role:supervisor"`)})
	b.jump(e.Deadline)
	if res := b.tick(); !slices.Equal(res.ApprovalsEscalated, []string{esc.ID}) {
		t.Fatalf("tick at esc's deadline = %+v", res)
	}
	b.tick()
	if m := b.lastMessage(); m.Type != "alert" || !slices.Equal(m.Recipients, []string{"sam"}) || m.CorrelationID != esc.ID {
		t.Errorf("escalation to the target = %+v", m)
	}
	if lines := b.auditLines(); !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "[maos→role:supervisor] HITL_ESCALATED: "+esc.Title) }) {
		t.Error("no HITL_ESCALATED line for esc")
	}
	// Escalated and due again: expired, earliest deadline first.
	if d, ok := b.f.NextDeadline(); !ok || !d.Equal(b.approval(escToRequester.ID).Deadline) {
		t.Errorf("NextDeadline = %s %t, want the escalated deadline of %s", d, ok, escToRequester.ID)
	}
	b.jump(b.approval(esc.ID).Deadline)
	if res := b.tick(); !slices.Equal(res.ApprovalsExpired, []string{escToRequester.ID, esc.ID}) {
		t.Fatalf("tick at the escalated deadlines = %+v", res)
	}
	for _, id := range []string{esc.ID, escToRequester.ID} {
		if got := b.approval(id); got.State != api.ApprovalExpired || !got.Escalated {
			t.Errorf("%s = %s, want expired after its escalation", id, got.State)
		}
	}
	for b.tick().Delivered != "" {
	}
	if _, ok := b.f.NextDeadline(); ok {
		t.Error("nothing is pending or queued, yet a deadline is due")
	}
}

// Approvals lists in creation order with filters; approver matches by id
// and by role; ApprovalEvents interleaves by entry.
func TestApprovalQueries(t *testing.T) {
	b := newApprBox(t)
	one := b.request()
	b.open(one)
	two := b.request()
	two.Approvers, two.Quorum = []string{"bob"}, 1
	b.open(two)
	three := b.request()
	three.From, three.Approvers, three.Quorum = "rex", []string{"role:lead", "carol"}, 1
	b.open(three)
	b.decide(two.ID, "bob", api.DecisionApprove, hashOf(t, string(two.Action)))
	ids := func(q api.ApprovalQuery) []string {
		p, err := b.f.Approvals(q)
		if err != nil {
			t.Fatalf("Approvals(%+v): %v", q, err)
		}
		var out []string
		for _, ap := range p.Approvals {
			if ap.Decisions != nil {
				t.Errorf("a list carries decisions")
			}
			out = append(out, ap.ID)
		}
		if p.HasMore {
			out = append(out, "…")
		}
		return out
	}
	for _, tc := range []struct {
		q    api.ApprovalQuery
		want []string
	}{
		{api.ApprovalQuery{}, []string{one.ID, two.ID, three.ID}},
		{api.ApprovalQuery{Limit: 2}, []string{one.ID, two.ID, "…"}},
		{api.ApprovalQuery{After: b.approval(one.ID).Seq}, []string{two.ID, three.ID}},
		{api.ApprovalQuery{State: api.ApprovalPending}, []string{one.ID, three.ID}},
		{api.ApprovalQuery{State: api.ApprovalApproved}, []string{two.ID}},
		{api.ApprovalQuery{From: "rex"}, []string{three.ID}},
		{api.ApprovalQuery{Approver: "bob"}, []string{one.ID, two.ID}},
		{api.ApprovalQuery{Approver: "carol"}, []string{one.ID, three.ID}}, // three lists carol by id and by role: once
		{api.ApprovalQuery{Approver: "lee", State: api.ApprovalPending}, []string{one.ID, three.ID}},
		{api.ApprovalQuery{Approver: "rex"}, nil},
	} {
		if got := ids(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("Approvals(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if _, err := b.f.Approvals(api.ApprovalQuery{State: "maybe"}); err == nil || !strings.Contains(err.Error(), "state: \"maybe\": want one of pending, approved") {
		t.Errorf("bad state: %v", err)
	}
	if b.pending("carol") != 2 || b.pending("bob") != 1 {
		t.Errorf("pending carol %d, bob %d; want 2, 1", b.pending("carol"), b.pending("bob"))
	}
	if _, err := b.f.Approval("appr-none"); err == nil || !strings.Contains(err.Error(), "approval appr-none: not found") {
		t.Errorf("Approval(appr-none) = %v", err)
	}

	page, err := b.f.ApprovalEvents(0, 2)
	if err != nil || len(page.Updates) != 2 || !page.HasMore || page.Updates[0].Approval.ID != one.ID || page.Updates[0].Event.Event != "requested" ||
		string(page.Updates[0].Approval.Context) != string(b.approval(one.ID).Context) {
		t.Fatalf("ApprovalEvents(0, 2) = %+v, %v", page, err)
	}
	rest, _ := b.f.ApprovalEvents(page.Updates[1].Event.Seq, 0)
	var got []string
	for _, u := range rest.Updates {
		got = append(got, u.Approval.ID+" "+u.Event.Event+" "+string(u.Approval.State)+" "+string(u.Event.State))
	}
	if want := []string{three.ID + " requested pending pending", two.ID + " approve approved approved"}; !slices.Equal(got, want) || rest.HasMore {
		t.Errorf("the rest = %v, want %v", got, want)
	}
}
