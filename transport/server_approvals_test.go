package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// The transport's half of the approvals: routing, admission, field
// errors, the secret guard, how the state machine's answers and refusals
// reach the wire, and the stream's approval events. What apply decides
// (quorum, stale hashes, who may decide) is fsm's and tested there; here
// Apply answers what a test sets (transporttest's AnswerApprovals) and the
// approval reads answer from transporttest.ApprovalReads. The end-to-end
// flows at the end of the file run against the real state machine.

// deploy is the action of the approval tests.
var deploy = json.RawMessage(`{"cmd":"deploy","version":"2.3"}`)

func hashOf(t *testing.T, action json.RawMessage) string {
	t.Helper()
	h, err := api.ActionHash(action)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// approvalEnv is the API over the task tests' agents (lead, rita and rex
// reviewers, tess) with transporttest's approval reads; Apply answers
// approval ops as a pending approval's result unless a test says else.
type approvalEnv struct {
	*taskEnv
	reads *transporttest.ApprovalReads
}

func newApprovalEnv(t *testing.T) *approvalEnv {
	t.Helper()
	base := newTaskEnv(t)
	node := transporttest.WithApprovalReads(base.svc)
	srv := serve(t, node, transport.ServerOptions{})
	base.url, base.c = srv.URL, client.NewClient(srv.URL, nil)
	base.svc.AnswerApprovals(transporttest.PendingResult)
	return &approvalEnv{taskEnv: base, reads: node.Reads}
}

// proposed is the last command of op that reached Apply, decoded into v.
func proposed[T any](t *testing.T, svc *transporttest.Service, op api.Op) (T, int) {
	t.Helper()
	var v T
	n := 0
	for _, c := range svc.Applied() {
		if c.Op == op {
			n++
			if err := json.Unmarshal(c.Body, &v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return v, n
}

// A request is normalized (an id fixed, the defaults, the action in
// canonical form) before it is proposed, and answered with the state
// machine's result; a decision and a cancel act on the path's approval,
// the decision answered with the approval read after it, strongly.
func TestApprovalRoutesPropose(t *testing.T) {
	e := newApprovalEnv(t)
	ctx := context.Background()
	h := hashOf(t, deploy)
	res, err := e.c.RequestApproval(ctx, api.ApprovalRequestCommand{From: "tess", Approvers: []string{"rita", "role:lead"},
		Title: "deploy v2.3", Action: json.RawMessage(`{ "version": "2.3", "cmd": "deploy" }`), TimeoutHours: 2})
	if err != nil || res.State != api.ApprovalPending || res.ActionHash != h || res.Seq != 7 {
		t.Fatalf("request: %+v, %v", res, err)
	}
	cmd, n := proposed[api.ApprovalRequestCommand](t, e.svc, api.OpApprovalRequest)
	if n != 1 || !regexp.MustCompile(`^appr-\d{8}-\d{6}-tess-[0-9a-f]{8}$`).MatchString(cmd.ID) || cmd.ID != res.ID ||
		string(cmd.Action) != string(deploy) || cmd.Quorum != 1 || cmd.Priority != api.DefaultPriority ||
		cmd.OnTimeout != api.OnTimeoutReject || cmd.Channel != api.DefaultChannel || time.Duration(cmd.Timeout) != 2*time.Hour || cmd.TimeoutHours != 0 {
		t.Errorf("proposed %+v", cmd)
	}

	// The decision's answer is the approval as read after it.
	decided := &api.Approval{ID: "appr-1", From: "tess", State: api.ApprovalApproved, ActionHash: h, Approvals: 1, Quorum: 1,
		Decisions: []api.ApprovalDecision{{Seq: 9, Approver: "rita", Decision: api.DecisionApprove, ActionHash: h}}}
	e.reads.Put(decided)
	linearized := len(e.svc.CallsTo("Linearize"))
	a, err := e.c.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-1", Approver: "rita", Decision: api.DecisionApprove, ActionHash: h, Comment: "ok"})
	if err != nil || a.State != api.ApprovalApproved || len(a.Decisions) != 1 || a.Decisions[0].Approver != "rita" {
		t.Fatalf("decide: %+v, %v", a, err)
	}
	if dec, _ := proposed[api.ApprovalDecideCommand](t, e.svc, api.OpApprovalDecide); dec.ID != "appr-1" || dec.Comment != "ok" || dec.ActionHash != h {
		t.Errorf("proposed decision %+v", dec)
	}
	calls := e.svc.CallsTo("Linearize")
	if len(calls) <= linearized || calls[len(calls)-1].Cons != api.Strong {
		t.Errorf("the decision's answer was not read strongly: %+v", calls[linearized:])
	}
	// A modify's action is proposed in canonical form.
	if _, err := e.c.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-1", Approver: "rita", Decision: api.DecisionModify, ActionHash: h,
		Action: json.RawMessage(`{ "version": "2.3", "canary": true, "cmd": "deploy" }`)}); err != nil {
		t.Fatal(err)
	}
	if dec, _ := proposed[api.ApprovalDecideCommand](t, e.svc, api.OpApprovalDecide); string(dec.Action) != `{"canary":true,"cmd":"deploy","version":"2.3"}` {
		t.Errorf("proposed modify's action %s", dec.Action)
	}
	if res, err := e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-1", From: "tess", Reason: "rolled back"}); err != nil || res.ID != "appr-1" {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	if c, n := proposed[api.ApprovalCancelCommand](t, e.svc, api.OpApprovalCancel); n != 1 || c.ID != "appr-1" || c.From != "tess" || c.Reason != "rolled back" {
		t.Errorf("proposed cancel %+v", c)
	}
}

// The state machine's refusals reach the client in its words, with their
// status: 409 conflict, 403 forbidden, 404 not found; a decision refused
// is not read back.
func TestApprovalRefusalsReachTheClient(t *testing.T) {
	e := newApprovalEnv(t)
	ctx := context.Background()
	h := hashOf(t, deploy)
	for _, tc := range []struct {
		err    error
		status int
		is     error
	}{
		{&api.ConflictError{Reason: "approval appr-1: the action changed to sha256:abc: look at it again"}, http.StatusConflict, api.ErrConflict},
		{&api.ForbiddenError{Reason: "approval appr-1: tess is not one of its approvers (rita, role:lead)"}, http.StatusForbidden, api.ErrForbidden},
		{&api.NotFoundError{What: "approval appr-1"}, http.StatusNotFound, api.ErrNotFound},
	} {
		e.svc.AnswerApprovals(func(api.Op, json.RawMessage) (any, error) { return nil, tc.err })
		reads := len(e.svc.CallsTo("Linearize"))
		_, err := e.c.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-1", Approver: "tess", Decision: api.DecisionApprove, ActionHash: h})
		wantRefused(t, "decide", err, tc.status, tc.is, tc.err.Error())
		if n := len(e.svc.CallsTo("Linearize")); n != reads {
			t.Errorf("a refused decision was read back (%d reads)", n-reads)
		}
		_, err = e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-1", From: "tess"})
		wantRefused(t, "cancel", err, tc.status, tc.is, tc.err.Error())
		_, err = e.c.RequestApproval(ctx, api.ApprovalRequestCommand{ID: "appr-1", From: "tess", Approvers: []string{"rita"}, Title: "t", Action: deploy})
		wantRefused(t, "request", err, tc.status, tc.is, tc.err.Error())
	}
	// A result that is not an approval's is a 500, not a success.
	e.svc.AnswerApprovals(func(api.Op, json.RawMessage) (any, error) { return map[string]string{"nope": "x"}, nil })
	_, err := e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-1", From: "tess"})
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || !strings.Contains(apiErr.Message, "unexpected approval_cancel result") {
		t.Errorf("an odd result: %v, want a 500 saying so", err)
	}
}

// Reads: one approval with its decisions (404 unknown); a list's
// parameters reach the query, and an empty list is [] not null; the
// summary counts the approvals the agent may decide.
func TestApprovalReads(t *testing.T) {
	e := newApprovalEnv(t)
	ctx := context.Background()
	_, err := e.c.Approval(ctx, "appr-nope")
	wantRefused(t, "unknown approval", err, http.StatusNotFound, api.ErrNotFound, "approval appr-nope")

	var empty map[string]json.RawMessage
	wantOK(t, do(t, "GET", e.url+"/v1/approvals", "", nil), &empty)
	if string(empty["approvals"]) != "[]" || string(empty["has_more"]) != "false" {
		t.Errorf("empty list %s", empty)
	}
	e.reads.Put(&api.Approval{ID: "appr-1", From: "tess", Approvers: []string{"rita"}, State: api.ApprovalPending,
		Decisions: []api.ApprovalDecision{{Seq: 9, Approver: "rita", Decision: api.DecisionModify}}})
	if a, err := e.c.Approval(ctx, "appr-1"); err != nil || a.From != "tess" || len(a.Decisions) != 1 {
		t.Errorf("approval: %+v, %v", a, err)
	}
	q := api.ApprovalQuery{State: api.ApprovalPending, Approver: "rita", From: "tess", After: 4, Limit: 2}
	if page, err := e.c.Approvals(ctx, q); err != nil || len(page.Approvals) != 1 {
		t.Errorf("list: %+v, %v", page, err)
	}
	if qs := e.reads.Queries(); qs[len(qs)-1] != q {
		t.Errorf("the list asked %+v, want %+v", qs[len(qs)-1], q)
	}
	e.reads.SetPending("rita", 2)
	if sum, err := e.c.AgentSummary(ctx, "rita", api.Strong); err != nil || sum.PendingApprovals != 2 {
		t.Errorf("rita's summary %+v, %v", sum, err)
	}
}

// Bad input is 400 naming the field or parameter, and never reaches the
// log; an oversized body is 413 saying the cap.
func TestApprovalRoutesRefuseBadInput(t *testing.T) {
	e := newApprovalEnv(t)
	h := hashOf(t, deploy)
	wantBadRequests(t, e.url, []badRequest{
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"action":1}`, api.CodeInvalid, "title: required"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":[],"title":"t","action":1}`, api.CodeInvalid, "approvers: required"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"quorum":2,"title":"t","action":1}`, api.CodeInvalid, "quorum"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t"}`, api.CodeInvalid, "action: required"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"timeout":"soon"}`, api.CodeBadRequest, "timeout"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"timeout":"1ms"}`, api.CodeInvalid, "timeout"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"on_timeout":"approve"}`, api.CodeInvalid, "on_timeout"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"options":["reject"]}`, api.CodeInvalid, "options"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"titel":"x"}`, api.CodeUnknownField, `"titel"`},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"approve","action_hash":"` + h + `","id":"appr-2"}`, api.CodeInvalid, `id: "appr-2" differs from the approval in the path`},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"maybe","action_hash":"` + h + `"}`, api.CodeInvalid, "decision"},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"approve","action_hash":"abc"}`, api.CodeInvalid, "action_hash"},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"modify","action_hash":"` + h + `"}`, api.CodeInvalid, "action: required"},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"approve","action_hash":"` + h + `","action":{}}`, api.CodeInvalid, "only a modify"},
		{"POST", "/v1/approvals/appr-1/cancel", `{"reason":"x"}`, api.CodeInvalid, "from"},
		{"POST", "/v1/approvals/appr-1/cancel", `{"from":"tess"} {}`, api.CodeBadRequest, "trailing data"},
		{"GET", "/v1/approvals?state=done", "", api.CodeInvalid, "state"},
		{"GET", "/v1/approvals?approver=Rita", "", api.CodeInvalid, "approver"},
		{"GET", "/v1/approvals?from=role:x", "", api.CodeInvalid, "from"},
		{"GET", "/v1/approvals?limit=0", "", api.CodeBadRequest, "limit"},
		{"GET", "/v1/approvals?after=x", "", api.CodeBadRequest, "after"},
		{"GET", "/v1/approvals?approvers=rita", "", api.CodeBadRequest, "approvers"},
	})
	big := `{"from":"tess","approvers":["rita"],"title":"t","action":"` + strings.Repeat("a", 300<<10) + `"}`
	msg := wantError(t, do(t, "POST", e.url+"/v1/approvals", big, nil), http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	if !strings.Contains(msg, "262144 bytes for POST /v1/approvals") || !strings.Contains(msg, "64 KiB") {
		t.Errorf("413 message %q", msg)
	}
	// An action over its limit is the state machine's field error.
	long := `{"from":"tess","approvers":["rita"],"title":"t","action":"` + strings.Repeat("a", api.MaxActionBytes) + `"}`
	if msg := wantError(t, do(t, "POST", e.url+"/v1/approvals", long, nil), http.StatusBadRequest, api.CodeInvalid); !strings.Contains(msg, "action") {
		t.Errorf("long action: %q", msg)
	}
	if n := len(e.svc.CallsTo("Apply")); n != 0 {
		t.Errorf("%d refused requests reached Apply", n)
	}
}

// With auth the acting agent (from, approver) must be the token's own;
// admins act as anyone; reads need a token. Refusals reach no log entry.
func TestApprovalAuthorization(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	node := transporttest.WithApprovalReads(e.svc)
	reads := node.Reads
	e.url = serve(t, node, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}}).URL
	e.svc.AnswerApprovals(transporttest.PendingResult)
	ctx := context.Background()
	h := hashOf(t, deploy)
	e.wantForbidden(t, []forbidden{
		{"POST", "/v1/approvals", `{"from":"bob","approvers":["carol"],"title":"t","action":1}`, `from "bob"`},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"bob","decision":"approve","action_hash":"` + h + `"}`, `approver "bob"`},
		{"POST", "/v1/approvals/appr-1/cancel", `{"from":"bob"}`, `from "bob"`},
		{"POST", "/v1/messages", `{"message_type":"hitl_approval_request","from_agent":"bob","to_agent":"carol","title":"t","proposed_action":1}`, `from "bob"`},
	})
	wantUnauthorized(t, e.as("", "GET", "/v1/approvals", ""), false)
	wantUnauthorized(t, e.as("", "GET", "/v1/approvals/appr-1", ""), false)

	// Each acts as itself, an admin as anyone: all of these are proposed.
	reads.Put(&api.Approval{ID: "appr-a", From: "alice", State: api.ApprovalPending})
	alice, bob, admin := e.client(aliceSecret), e.client(bobSecret), e.client(adminSecret)
	if _, err := alice.RequestApproval(ctx, api.ApprovalRequestCommand{ID: "appr-a", From: "alice", Approvers: []string{"bob", "carol"},
		Quorum: 2, Title: "t", Action: deploy}); err != nil {
		t.Error(err)
	}
	if _, err := bob.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-a", Approver: "bob", Decision: api.DecisionApprove, ActionHash: h}); err != nil {
		t.Errorf("bob approves: %v", err)
	}
	if _, err := admin.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-a", Approver: "carol", Decision: api.DecisionApprove, ActionHash: h}); err != nil {
		t.Errorf("an admin approves as carol: %v", err)
	}
	if _, err := admin.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-a", From: "alice"}); err != nil {
		t.Errorf("an admin cancels as alice: %v", err)
	}
	if _, err := bob.Approvals(ctx, api.ApprovalQuery{Approver: "bob"}); err != nil {
		t.Errorf("bob lists: %v", err)
	}
	if writes, _ := e.writes(); writes != 4 {
		t.Errorf("%d approval commands proposed, want 4", writes)
	}
}

// The secret guard covers a request's title, approval_needed_for,
// rationale and action, a decision's comment and new action, a cancel's
// reason: refused (422 naming the field, never the secret) or, with
// redact, proposed redacted, the action still canonical JSON.
func TestApprovalSecretGuard(t *testing.T) {
	e := newApprovalEnv(t)
	ctx := context.Background()
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	withSecret := json.RawMessage(`{"cmd":"git push https://` + pat + `@github.com/o/r"}`)
	request := func(c api.ApprovalRequestCommand) error {
		c.From, c.Approvers = "tess", []string{"rita"}
		if c.Title == "" {
			c.Title = "t"
		}
		if c.Action == nil {
			c.Action = deploy
		}
		_, err := e.c.RequestApproval(ctx, c)
		return err
	}
	h := hashOf(t, deploy)
	for _, tc := range []struct {
		field string
		send  func() error
	}{
		{"title", func() error { return request(api.ApprovalRequestCommand{Title: "push with " + pat}) }},
		{"approval_needed_for", func() error { return request(api.ApprovalRequestCommand{ApprovalNeededFor: "push with " + pat}) }},
		{"rationale", func() error { return request(api.ApprovalRequestCommand{Rationale: "push with " + pat}) }},
		{"action", func() error { return request(api.ApprovalRequestCommand{Action: withSecret}) }},
		{"comment", func() error {
			_, err := e.c.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-s", Approver: "rita", Decision: api.DecisionReject, ActionHash: h, Comment: "not with " + pat})
			return err
		}},
		{"action", func() error {
			_, err := e.c.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-s", Approver: "rita", Decision: api.DecisionModify, ActionHash: h, Action: withSecret})
			return err
		}},
		{"reason", func() error {
			_, err := e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-s", From: "tess", Reason: "leaked " + pat})
			return err
		}},
	} {
		err := tc.send()
		wantRefused(t, "a secret in "+tc.field, err, http.StatusUnprocessableEntity, api.ErrSecretFound, tc.field+" holds a secret (gitleaks rule github-pat)")
		if err != nil && strings.Contains(err.Error(), pat) {
			t.Errorf("the refusal repeats the secret: %v", err)
		}
	}
	for _, c := range e.svc.Applied() {
		if c.Op != api.OpAuditDenial {
			t.Fatalf("a refused request was proposed: %s %s", c.Op, c.Body)
		}
	}

	if _, err := e.svc.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "secret_guard", Value: json.RawMessage(`"redact"`)}); err != nil {
		t.Fatal(err)
	}
	redacted := `{"cmd":"git push https://[REDACTED:github-pat]@github.com/o/r"}`
	if err := request(api.ApprovalRequestCommand{Action: json.RawMessage(`{ "cmd": "git push https://` + pat + `@github.com/o/r" }`), Rationale: "with " + pat}); err != nil {
		t.Fatal(err)
	}
	if cmd, _ := proposed[api.ApprovalRequestCommand](t, e.svc, api.OpApprovalRequest); string(cmd.Action) != redacted || strings.Contains(cmd.Rationale, pat) {
		t.Errorf("proposed action %s rationale %q, want them redacted", cmd.Action, cmd.Rationale)
	}
	e.reads.Put(&api.Approval{ID: "appr-s"})
	if _, err := e.c.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-s", Approver: "rita", Decision: api.DecisionModify, ActionHash: h, Action: withSecret}); err != nil {
		t.Fatal(err)
	}
	if dec, _ := proposed[api.ApprovalDecideCommand](t, e.svc, api.OpApprovalDecide); string(dec.Action) != redacted {
		t.Errorf("proposed modify's action %s, want %s", dec.Action, redacted)
	}
}

// Seed 004's hitl_approval_request, posted as-is to POST /v1/messages,
// is proposed as an approval request: the tagged approvers that are
// registered decide on proposed_action, its other fields kept; the
// answer says it was requested.
func TestSendSeedApproval(t *testing.T) {
	e := newApprovalEnv(t)
	if _, err := e.svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "maintainer1", Role: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	var res transport.ApprovalMessageResponse
	wantOK(t, do(t, "POST", e.url+"/v1/messages", seedBody(t, "seed004_approval.json"), nil), &res)
	cmd, n := proposed[api.ApprovalRequestCommand](t, e.svc, api.OpApprovalRequest)
	if res.Action != transport.ApprovalActionRequested || res.ID != "unique_uuid" || res.State != api.ApprovalPending || res.ActionHash != hashOf(t, cmd.Action) {
		t.Fatalf("seed request answered %+v", res)
	}
	var ctxFields map[string]any
	if err := json.Unmarshal(cmd.Context, &ctxFields); err != nil {
		t.Fatal(err)
	}
	if n != 1 || cmd.ID != "unique_uuid" || cmd.From != "triage" || !slices.Equal(cmd.Approvers, []string{"maintainer1"}) ||
		cmd.Title != "close_duplicate_issue" || time.Duration(cmd.Timeout) != 72*time.Hour || ctxFields["github_comment_url"] == nil ||
		cmd.Confidence == nil || *cmd.Confidence != 0.96 {
		t.Errorf("proposed %+v context %s", cmd, cmd.Context)
	}
	// A field that cannot be mapped is 400 naming it.
	bad := strings.Replace(seedBody(t, "seed004_approval.json"), `"confidence": 0.96`, `"confidence": "high"`, 1)
	if msg := wantError(t, do(t, "POST", e.url+"/v1/messages", bad, nil), http.StatusBadRequest, api.CodeInvalid); !strings.HasPrefix(msg, "confidence:") {
		t.Errorf("bad confidence: %q", msg)
	}
}

// The stream carries approval updates as "approval" events, interleaved
// with messages and task updates in entry order (an entry's message, its
// task updates, its approval updates; the last of them carrying the id
// N:approval); ?agent= keeps the approvals the agent requested or may
// decide (by id or role); ?events= picks the kinds, and the older
// ?tasks= (and a client that asks for neither) gets no approval events.
func TestStreamApprovalEvents(t *testing.T) {
	e := newApprovalEnv(t)
	s := newStreamState(t, e.svc)
	m1 := s.send("tess", "general", "rita")
	m2 := s.send("rex", "general", "rex")
	task := e.create(api.TaskCreateCommand{ID: "t-a", To: "rita"})
	a1 := api.Approval{ID: "appr-1", From: "tess", Approvers: []string{"rita", "role:lead"}, Channel: "general", State: api.ApprovalPending}
	a2 := api.Approval{ID: "appr-2", From: "rex", Approvers: []string{"rex"}, Channel: "general", State: api.ApprovalPending}
	a1done := a1
	a1done.State = api.ApprovalApproved
	e.reads.Event(m1, a1)
	e.reads.Event(m2, a2)
	e.reads.Event(task.Seq, a1done)

	type got struct{ kind, id, what string }
	collect := func(q api.StreamQuery) []got {
		t.Helper()
		var out []got
		streamUntilReady(t, e.c, q, func(ev api.StreamEvent) {
			switch {
			case ev.Message != nil:
				out = append(out, got{"message", ev.ID, ev.Message.From})
			case ev.Task != nil:
				out = append(out, got{"task", ev.ID, ev.Task.Task.ID})
			case ev.Approval != nil:
				if ev.Seq != ev.Approval.Event.Seq {
					t.Errorf("approval event %+v: seq %d", ev.Approval, ev.Seq)
				}
				out = append(out, got{"approval", ev.ID, ev.Approval.Approval.ID + " " + string(ev.Approval.Approval.State)})
			}
		})
		return out
	}
	n := strconvU
	all := []string{api.EventMessage, api.EventTask, api.EventApproval}
	want := []got{
		{"message", n(m1), "tess"}, {"approval", n(m1) + ":approval", "appr-1 pending"},
		{"message", n(m2), "rex"}, {"approval", n(m2) + ":approval", "appr-2 pending"},
		{"message", n(task.Seq), "lead"}, {"task", "", "t-a"}, {"approval", n(task.Seq) + ":approval", "appr-1 approved"},
	}
	if g := collect(api.StreamQuery{Events: all}); !slices.Equal(g, want) {
		t.Fatalf("stream\n got %v\nwant %v", g, want)
	}
	// Resume after N sends N's object events; after N:approval (or
	// N:task), the next entry.
	for resume, from := range map[string]int{n(m1): 1, n(m1) + ":approval": 2, n(m1) + ":task": 2} {
		if g := collect(api.StreamQuery{Events: all, Resume: resume}); !slices.Equal(g, want[from:]) {
			t.Errorf("resume after %s: %v, want %v", resume, g, want[from:])
		}
	}
	// Approval events alone, for an agent: rita and lead (by role) see
	// appr-1; rex sees appr-2, his own; tess appr-1, which she requested.
	for agent, want := range map[string][]got{
		"rita": {{"approval", n(m1) + ":approval", "appr-1 pending"}, {"approval", n(task.Seq) + ":approval", "appr-1 approved"}},
		"lead": {{"approval", n(m1) + ":approval", "appr-1 pending"}, {"approval", n(task.Seq) + ":approval", "appr-1 approved"}},
		"tess": {{"approval", n(m1) + ":approval", "appr-1 pending"}, {"approval", n(task.Seq) + ":approval", "appr-1 approved"}},
		"rex":  {{"approval", n(m2) + ":approval", "appr-2 pending"}},
	} {
		if g := collect(api.StreamQuery{Agent: agent, Events: []string{api.EventApproval}}); !slices.Equal(g, want) {
			t.Errorf("%s's approval events %v, want %v", agent, g, want)
		}
	}
	if g := collect(api.StreamQuery{Channel: "ops", Events: []string{api.EventApproval}}); len(g) != 0 {
		t.Errorf("channel ops carried %v", g)
	}
	// Older clients: ?tasks= and no choice at all carry no approval
	// events; the task event then carries its entry's id.
	for _, q := range []api.StreamQuery{{}, {Tasks: api.StreamTasksAll}, {Tasks: api.StreamTasksOnly}} {
		for _, g := range collect(q) {
			if g.kind == "approval" || (g.kind == "task" && g.id != n(task.Seq)+":task") {
				t.Errorf("stream %+v carried %+v", q, g)
			}
		}
	}
	for _, path := range []string{"/v1/stream?events=messages", "/v1/stream?events=task&tasks=all", "/v1/stream?after=3:tasks"} {
		wantError(t, do(t, "GET", e.url+path, "", nil), http.StatusBadRequest, api.CodeBadRequest)
	}
}

// Across pages of both kinds, which end at different entries (two
// approval updates an entry: their page holds half the entries the task
// page does), the order holds: each entry's message, its task update, its
// approval updates, the last carrying the entry's id.
func TestStreamApprovalEventsAcrossPages(t *testing.T) {
	e := newApprovalEnv(t)
	const n = 300 // over the stream's page of 256
	createTasks(t, e.svc, n, func(i int, res *api.TaskResult) {
		for _, k := range []string{"a", "b"} {
			e.reads.Event(res.Seq, api.Approval{ID: "appr-" + k + strconv.Itoa(i), From: "lead", Approvers: []string{"rita"}})
		}
	})
	var ids, kinds []string
	streamUntilReady(t, e.c, api.StreamQuery{Events: transport.StreamKinds}, func(ev api.StreamEvent) {
		switch {
		case ev.Message != nil:
			kinds = append(kinds, api.EventMessage)
		case ev.Task != nil:
			kinds = append(kinds, api.EventTask)
		case ev.Approval != nil:
			kinds = append(kinds, api.EventApproval)
		}
		ids = append(ids, ev.ID)
	})
	if len(ids) != 4*n {
		t.Fatalf("stream: %d events, want %d", len(ids), 4*n)
	}
	var last uint64
	for i := 0; i < len(ids); i += 4 {
		seq, err := strconv.ParseUint(ids[i], 10, 64)
		if err != nil || seq <= last || ids[i+1] != "" || ids[i+2] != "" || ids[i+3] != ids[i]+":approval" ||
			!slices.Equal(kinds[i:i+4], []string{api.EventMessage, api.EventTask, api.EventApproval, api.EventApproval}) {
			t.Fatalf("events %d..%d: %q %v after seq %d", i, i+3, ids[i:i+4], kinds[i:i+4], last)
		}
		last = seq
	}
}

// End to end: the flows above against the real state machine, as a
// cluster applies them (no AnswerApprovals, no ApprovalReads): what the
// client sends, what apply decides and what reaches the wire together.

func (e *taskEnv) request(cmd api.ApprovalRequestCommand) api.ApprovalResult {
	e.t.Helper()
	if cmd.From == "" {
		cmd.From = "tess"
	}
	if cmd.Title == "" {
		cmd.Title = "deploy v2.3"
	}
	if cmd.Action == nil {
		cmd.Action = deploy
	}
	res, err := e.c.RequestApproval(context.Background(), cmd)
	if err != nil {
		e.t.Fatalf("request %+v: %v", cmd, err)
	}
	return res
}

func (e *taskEnv) approval(id string) *api.Approval {
	e.t.Helper()
	a, err := e.c.Approval(context.Background(), id)
	if err != nil {
		e.t.Fatalf("approval %s: %v", id, err)
	}
	return a
}

func (e *taskEnv) decide(id, approver, decision, hash string) (*api.Approval, error) {
	return e.c.DecideApproval(context.Background(), api.ApprovalDecideCommand{ID: id, Approver: approver, Decision: decision, ActionHash: hash})
}

// Two of three: one approval leaves it pending, the same approver again
// and a stale hash are refused, a second distinct approver (by its role)
// approves it; an approver it does not list is refused; a decided
// approval takes no more decisions and cannot be cancelled.
func TestApprovalTwoOfThree(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	h := hashOf(t, deploy)
	req := api.ApprovalRequestCommand{ID: "appr-deploy", Approvers: []string{"rita", "rex", "role:lead"}, Quorum: 2,
		Action: json.RawMessage(`{ "version": "2.3", "cmd": "deploy" }`)}
	res := e.request(req)
	if res.ID != "appr-deploy" || res.State != api.ApprovalPending || res.ActionHash != h || res.Quorum != 2 || res.Approvals != 0 || res.Seq == 0 {
		t.Fatalf("request answered %+v, want pending on %s", res, h)
	}
	// The same request again answers the same; other content is a conflict.
	if again := e.request(req); again != res {
		t.Errorf("repeated request answered %+v, want %+v", again, res)
	}
	_, err := e.c.RequestApproval(ctx, api.ApprovalRequestCommand{ID: "appr-deploy", From: "tess", Approvers: []string{"rita"}, Title: "other", Action: deploy})
	wantRefused(t, "request with a taken id", err, http.StatusConflict, api.ErrConflict, "appr-deploy")

	a, err := e.decide("appr-deploy", "rita", api.DecisionApprove, h)
	if err != nil || a.State != api.ApprovalPending || a.Approvals != 1 || len(a.Decisions) != 1 || a.Decisions[0].Approver != "rita" {
		t.Fatalf("rita's approval: %+v, %v", a, err)
	}
	_, err = e.decide("appr-deploy", "rita", api.DecisionApprove, h)
	wantRefused(t, "rita again", err, http.StatusConflict, api.ErrConflict)
	stale := hashOf(t, json.RawMessage(`{"cmd":"deploy","version":"2.2"}`))
	_, err = e.decide("appr-deploy", "rex", api.DecisionApprove, stale)
	wantRefused(t, "a decision on a stale hash", err, http.StatusConflict, api.ErrConflict, "the action changed to "+h, "look at it again")
	_, err = e.decide("appr-deploy", "tess", api.DecisionApprove, h)
	wantRefused(t, "an approver it does not list", err, http.StatusForbidden, api.ErrForbidden, "rita", "rex", "role:lead")
	if a := e.approval("appr-deploy"); a.State != api.ApprovalPending || a.Approvals != 1 {
		t.Fatalf("after the refusals: %+v", a)
	}

	// lead decides by its role.
	a, err = e.decide("appr-deploy", "lead", api.DecisionApprove, h)
	if err != nil || a.State != api.ApprovalApproved || a.Approvals != 2 || len(a.Decisions) != 2 {
		t.Fatalf("the second approval: %+v, %v", a, err)
	}
	_, err = e.decide("appr-deploy", "rex", api.DecisionReject, h)
	wantRefused(t, "a decision on an approved approval", err, http.StatusConflict, api.ErrConflict, "approved")
	_, err = e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-deploy", From: "tess"})
	wantRefused(t, "cancel of an approved approval", err, http.StatusConflict, api.ErrConflict, "approved")

	// Lists: by state, approver (by id and by role) and requester, without
	// decisions; 404 for an unknown approval.
	e.request(api.ApprovalRequestCommand{ID: "appr-other", From: "rita", Approvers: []string{"rex"}})
	for _, tc := range []struct {
		q    api.ApprovalQuery
		want []string
	}{
		{api.ApprovalQuery{}, []string{"appr-deploy", "appr-other"}},
		{api.ApprovalQuery{State: api.ApprovalApproved}, []string{"appr-deploy"}},
		{api.ApprovalQuery{State: api.ApprovalPending, Approver: "rex"}, []string{"appr-other"}},
		{api.ApprovalQuery{Approver: "lead"}, []string{"appr-deploy"}},
		{api.ApprovalQuery{From: "rita"}, []string{"appr-other"}},
		{api.ApprovalQuery{Limit: 1}, []string{"appr-deploy"}},
	} {
		page, err := e.c.Approvals(ctx, tc.q)
		var ids []string
		for _, a := range page.Approvals {
			ids = append(ids, a.ID)
			if a.Decisions != nil {
				t.Errorf("list %+v carries decisions: %+v", tc.q, a)
			}
		}
		if err != nil || !slices.Equal(ids, tc.want) || page.HasMore != (tc.q.Limit == 1) {
			t.Errorf("list %+v = %v (has_more %v), %v; want %v", tc.q, ids, page.HasMore, err, tc.want)
		}
	}
	_, err = e.c.Approval(ctx, "appr-nope")
	wantRefused(t, "unknown approval", err, http.StatusNotFound, api.ErrNotFound, "appr-nope")
	_, err = e.decide("appr-nope", "rita", api.DecisionApprove, h)
	wantRefused(t, "decision on an unknown approval", err, http.StatusNotFound, api.ErrNotFound, "appr-nope")
}

// A modify replaces the action: the approvals so far are void (kept,
// marked), the old hash is stale, everyone decides again; one reject
// rejects.
func TestApprovalModifyAndReject(t *testing.T) {
	e := newTaskEnv(t)
	h := hashOf(t, deploy)
	e.request(api.ApprovalRequestCommand{ID: "appr-m", Approvers: []string{"rita", "rex"}, Quorum: 2})
	if _, err := e.decide("appr-m", "rita", api.DecisionApprove, h); err != nil {
		t.Fatal(err)
	}
	canary := json.RawMessage(`{"canary":true,"cmd":"deploy","version":"2.3"}`)
	h2 := hashOf(t, canary)
	a, err := e.c.DecideApproval(context.Background(), api.ApprovalDecideCommand{ID: "appr-m", Approver: "rex", Decision: api.DecisionModify,
		ActionHash: h, Comment: "canary first", Action: json.RawMessage(`{"version":"2.3","cmd":"deploy","canary":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != api.ApprovalPending || a.ActionHash != h2 || string(a.Action) != string(canary) || a.Approvals != 0 ||
		len(a.Decisions) != 2 || !a.Decisions[0].Voided || a.Decisions[1].Decision != api.DecisionModify || a.Decisions[1].Comment != "canary first" {
		t.Fatalf("after the modify: %+v", a)
	}
	_, err = e.decide("appr-m", "rita", api.DecisionApprove, h)
	wantRefused(t, "an approval of the old action", err, http.StatusConflict, api.ErrConflict, "the action changed to "+h2)
	if a, err = e.decide("appr-m", "rita", api.DecisionApprove, h2); err != nil || a.State != api.ApprovalPending || a.Approvals != 1 {
		t.Fatalf("rita approves the new action: %+v, %v", a, err)
	}
	if a, err = e.decide("appr-m", "rex", api.DecisionReject, h2); err != nil || a.State != api.ApprovalRejected {
		t.Fatalf("rex rejects: %+v, %v", a, err)
	}
}

// Only the requester cancels, a pending approval only; a retried cancel
// answers again.
func TestApprovalCancel(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	e.request(api.ApprovalRequestCommand{ID: "appr-c", Approvers: []string{"rita"}})
	_, err := e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-c", From: "rita", Reason: "not mine"})
	wantRefused(t, "cancel by another", err, http.StatusForbidden, api.ErrForbidden)
	res, err := e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-c", From: "tess", Reason: "rolled back"})
	if err != nil || res.State != api.ApprovalCancelled {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	if again, err := e.c.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-c", From: "tess", Reason: "rolled back"}); err != nil || again.State != api.ApprovalCancelled {
		t.Errorf("retried cancel: %+v, %v", again, err)
	}
	_, err = e.decide("appr-c", "rita", api.DecisionApprove, hashOf(t, deploy))
	wantRefused(t, "a decision on a cancelled approval", err, http.StatusConflict, api.ErrConflict, "cancelled")
}

// With auth, against the state machine: alice asks bob and carol; bob
// decides as himself; an admin decides as carol and cancels as the
// requester; bob may not cancel alice's approval.
func TestApprovalAuthorizationEndToEnd(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	h := hashOf(t, deploy)
	// alice asks bob and carol; bob decides as himself; an admin decides
	// as carol and cancels as the requester.
	alice, bob, admin := e.client(aliceSecret), e.client(bobSecret), e.client(adminSecret)
	for _, id := range []string{"appr-a", "appr-b"} {
		if _, err := alice.RequestApproval(ctx, api.ApprovalRequestCommand{ID: id, From: "alice", Approvers: []string{"bob", "carol"},
			Quorum: 2, Title: "t", Action: deploy}); err != nil {
			t.Fatal(err)
		}
	}
	if a, err := bob.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-a", Approver: "bob", Decision: api.DecisionApprove, ActionHash: h}); err != nil || a.Approvals != 1 {
		t.Errorf("bob approves: %+v, %v", a, err)
	}
	if a, err := admin.DecideApproval(ctx, api.ApprovalDecideCommand{ID: "appr-a", Approver: "carol", Decision: api.DecisionApprove, ActionHash: h}); err != nil || a.State != api.ApprovalApproved {
		t.Errorf("an admin approves as carol: %+v, %v", a, err)
	}
	_, err := bob.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-b", From: "bob"})
	wantRefused(t, "bob cancels alice's approval", err, http.StatusForbidden, api.ErrForbidden)
	if res, err := admin.CancelApproval(ctx, api.ApprovalCancelCommand{ID: "appr-b", From: "alice"}); err != nil || res.State != api.ApprovalCancelled {
		t.Errorf("an admin cancels as alice: %+v, %v", res, err)
	}
	if page, err := bob.Approvals(ctx, api.ApprovalQuery{Approver: "bob"}); err != nil || len(page.Approvals) != 2 {
		t.Errorf("bob lists %+v, %v", page, err)
	}
}

// With redact, the stored action is the redacted one and its hash is
// taken over what is stored.
func TestApprovalRedactedActionIsHashedAsStored(t *testing.T) {
	e := newTaskEnv(t)
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	withSecret := json.RawMessage(`{"cmd":"git push https://` + pat + `@github.com/o/r"}`)
	if _, err := e.svc.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "secret_guard", Value: json.RawMessage(`"redact"`)}); err != nil {
		t.Fatal(err)
	}
	res := e.request(api.ApprovalRequestCommand{ID: "appr-r", Approvers: []string{"rita"}, Action: withSecret})
	redacted := json.RawMessage(`{"cmd":"git push https://[REDACTED:github-pat]@github.com/o/r"}`)
	if a := e.approval("appr-r"); string(a.Action) != string(redacted) || res.ActionHash != hashOf(t, redacted) || a.ActionHash != res.ActionHash {
		t.Errorf("redacted action %s hash %s (answered %s), want %s hashed", a.Action, a.ActionHash, res.ActionHash, redacted)
	}
}

// Seed 004's hitl_approval_request opens an approval in the state
// machine, with its request message to the registered tagged approver;
// the same body again is the same approval.
func TestSendSeedApprovalEndToEnd(t *testing.T) {
	e := newTaskEnv(t)
	if _, err := e.svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "maintainer1", Role: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	var res transport.ApprovalMessageResponse
	wantOK(t, do(t, "POST", e.url+"/v1/messages", seedBody(t, "seed004_approval.json"), nil), &res)
	if res.Action != transport.ApprovalActionRequested || res.ID != "unique_uuid" || res.State != api.ApprovalPending || res.Quorum != 1 || res.Seq == 0 {
		t.Fatalf("seed request answered %+v", res)
	}
	a := e.approval("unique_uuid")
	var ctxFields map[string]any
	if err := json.Unmarshal(a.Context, &ctxFields); err != nil {
		t.Fatal(err)
	}
	if a.From != "triage" || !slices.Equal(a.Approvers, []string{"maintainer1"}) || a.Title != "close_duplicate_issue" ||
		a.TimeoutSeconds != 72*3600 || !slices.Equal(a.Options, api.Decisions) || a.ActionHash != res.ActionHash ||
		ctxFields["github_comment_url"] == nil || a.Confidence == nil || *a.Confidence != 0.96 {
		t.Errorf("seed approval %+v context %s", a, a.Context)
	}
	if m, err := e.svc.State().Message(a.MessageID); err != nil || m.Type != "hitl_approval_request" || !slices.Equal(m.To, []string{"maintainer1"}) {
		t.Errorf("its request message: %+v, %v", m, err)
	}
	// The same body again is the same approval.
	var again transport.ApprovalMessageResponse
	wantOK(t, do(t, "POST", e.url+"/v1/messages", seedBody(t, "seed004_approval.json"), nil), &again)
	if again != res {
		t.Errorf("repeated seed request answered %+v, want %+v", again, res)
	}
}

// The summary counts the pending approvals an agent may decide and has
// not decided: what the status line shows.
func TestSummaryCountsApprovals(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	e.request(api.ApprovalRequestCommand{ID: "appr-1", Approvers: []string{"rita", "rex"}, Quorum: 2})
	e.request(api.ApprovalRequestCommand{ID: "appr-2", Approvers: []string{"role:reviewer"}})
	count := func(agent string) int {
		t.Helper()
		sum, err := e.c.AgentSummary(ctx, agent, api.Strong)
		if err != nil {
			t.Fatal(err)
		}
		return sum.PendingApprovals
	}
	if r, x, l := count("rita"), count("rex"), count("lead"); r != 2 || x != 2 || l != 0 {
		t.Errorf("pending approvals rita %d rex %d lead %d, want 2 2 0", r, x, l)
	}
	if _, err := e.decide("appr-1", "rita", api.DecisionApprove, hashOf(t, deploy)); err != nil {
		t.Fatal(err)
	}
	if r, x := count("rita"), count("rex"); r != 1 || x != 2 {
		t.Errorf("after rita's approval: rita %d rex %d, want 1 2", r, x)
	}
}
