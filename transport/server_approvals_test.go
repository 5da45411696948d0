package transport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// deploy is the action of the approval tests, and its hash.
var deploy = json.RawMessage(`{"cmd":"deploy","version":"2.3"}`)

func (e *taskEnv) request(cmd fsm.ApprovalRequestCommand) fsm.ApprovalResult {
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

func (e *taskEnv) approval(id string) *fsm.Approval {
	e.t.Helper()
	a, err := e.c.Approval(context.Background(), id)
	if err != nil {
		e.t.Fatalf("approval %s: %v", id, err)
	}
	return a
}

func (e *taskEnv) decide(id, approver, decision, hash string) (*fsm.Approval, error) {
	return e.c.DecideApproval(context.Background(), fsm.ApprovalDecideCommand{ID: id, Approver: approver, Decision: decision, ActionHash: hash})
}

func hashOf(t *testing.T, action json.RawMessage) string {
	t.Helper()
	h, err := fsm.ActionHash(action)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Two of three: one approval leaves it pending, the same approver again
// and a stale hash are refused, a second distinct approver (by its role)
// approves it; an approver it does not list is refused; a decided
// approval takes no more decisions and cannot be cancelled.
func TestApprovalTwoOfThree(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	h := hashOf(t, deploy)
	req := fsm.ApprovalRequestCommand{ID: "appr-deploy", Approvers: []string{"rita", "rex", "role:lead"}, Quorum: 2,
		Action: json.RawMessage(`{ "version": "2.3", "cmd": "deploy" }`)}
	res := e.request(req)
	if res.ID != "appr-deploy" || res.State != fsm.ApprovalPending || res.ActionHash != h || res.Quorum != 2 || res.Approvals != 0 || res.Seq == 0 {
		t.Fatalf("request answered %+v, want pending on %s", res, h)
	}
	// The same request again answers the same; other content is a conflict.
	if again := e.request(req); again != res {
		t.Errorf("repeated request answered %+v, want %+v", again, res)
	}
	_, err := e.c.RequestApproval(ctx, fsm.ApprovalRequestCommand{ID: "appr-deploy", From: "tess", Approvers: []string{"rita"}, Title: "other", Action: deploy})
	wantRefused(t, "request with a taken id", err, http.StatusConflict, fsm.ErrConflict, "appr-deploy")

	a, err := e.decide("appr-deploy", "rita", fsm.DecisionApprove, h)
	if err != nil || a.State != fsm.ApprovalPending || a.Approvals != 1 || len(a.Decisions) != 1 || a.Decisions[0].Approver != "rita" {
		t.Fatalf("rita's approval: %+v, %v", a, err)
	}
	_, err = e.decide("appr-deploy", "rita", fsm.DecisionApprove, h)
	wantRefused(t, "rita again", err, http.StatusConflict, fsm.ErrConflict)
	stale := hashOf(t, json.RawMessage(`{"cmd":"deploy","version":"2.2"}`))
	_, err = e.decide("appr-deploy", "rex", fsm.DecisionApprove, stale)
	wantRefused(t, "a decision on a stale hash", err, http.StatusConflict, fsm.ErrConflict, "the action changed to "+h, "look at it again")
	_, err = e.decide("appr-deploy", "tess", fsm.DecisionApprove, h)
	wantRefused(t, "an approver it does not list", err, http.StatusForbidden, fsm.ErrForbidden, "rita", "rex", "role:lead")
	if a := e.approval("appr-deploy"); a.State != fsm.ApprovalPending || a.Approvals != 1 {
		t.Fatalf("after the refusals: %+v", a)
	}

	// lead decides by its role.
	a, err = e.decide("appr-deploy", "lead", fsm.DecisionApprove, h)
	if err != nil || a.State != fsm.ApprovalApproved || a.Approvals != 2 || len(a.Decisions) != 2 {
		t.Fatalf("the second approval: %+v, %v", a, err)
	}
	_, err = e.decide("appr-deploy", "rex", fsm.DecisionReject, h)
	wantRefused(t, "a decision on an approved approval", err, http.StatusConflict, fsm.ErrConflict, "approved")
	_, err = e.c.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-deploy", From: "tess"})
	wantRefused(t, "cancel of an approved approval", err, http.StatusConflict, fsm.ErrConflict, "approved")

	// Lists: by state, approver (by id and by role) and requester, without
	// decisions; 404 for an unknown approval.
	e.request(fsm.ApprovalRequestCommand{ID: "appr-other", From: "rita", Approvers: []string{"rex"}})
	for _, tc := range []struct {
		q    fsm.ApprovalQuery
		want []string
	}{
		{fsm.ApprovalQuery{}, []string{"appr-deploy", "appr-other"}},
		{fsm.ApprovalQuery{State: fsm.ApprovalApproved}, []string{"appr-deploy"}},
		{fsm.ApprovalQuery{State: fsm.ApprovalPending, Approver: "rex"}, []string{"appr-other"}},
		{fsm.ApprovalQuery{Approver: "lead"}, []string{"appr-deploy"}},
		{fsm.ApprovalQuery{From: "rita"}, []string{"appr-other"}},
		{fsm.ApprovalQuery{Limit: 1}, []string{"appr-deploy"}},
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
	wantRefused(t, "unknown approval", err, http.StatusNotFound, fsm.ErrNotFound, "appr-nope")
	_, err = e.decide("appr-nope", "rita", fsm.DecisionApprove, h)
	wantRefused(t, "decision on an unknown approval", err, http.StatusNotFound, fsm.ErrNotFound, "appr-nope")
}

// A modify replaces the action: the approvals so far are void (kept,
// marked), the old hash is stale, everyone decides again; one reject
// rejects.
func TestApprovalModifyAndReject(t *testing.T) {
	e := newTaskEnv(t)
	h := hashOf(t, deploy)
	e.request(fsm.ApprovalRequestCommand{ID: "appr-m", Approvers: []string{"rita", "rex"}, Quorum: 2})
	if _, err := e.decide("appr-m", "rita", fsm.DecisionApprove, h); err != nil {
		t.Fatal(err)
	}
	canary := json.RawMessage(`{"canary":true,"cmd":"deploy","version":"2.3"}`)
	h2 := hashOf(t, canary)
	a, err := e.c.DecideApproval(context.Background(), fsm.ApprovalDecideCommand{ID: "appr-m", Approver: "rex", Decision: fsm.DecisionModify,
		ActionHash: h, Comment: "canary first", Action: json.RawMessage(`{"version":"2.3","cmd":"deploy","canary":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != fsm.ApprovalPending || a.ActionHash != h2 || string(a.Action) != string(canary) || a.Approvals != 0 ||
		len(a.Decisions) != 2 || !a.Decisions[0].Voided || a.Decisions[1].Decision != fsm.DecisionModify || a.Decisions[1].Comment != "canary first" {
		t.Fatalf("after the modify: %+v", a)
	}
	_, err = e.decide("appr-m", "rita", fsm.DecisionApprove, h)
	wantRefused(t, "an approval of the old action", err, http.StatusConflict, fsm.ErrConflict, "the action changed to "+h2)
	if a, err = e.decide("appr-m", "rita", fsm.DecisionApprove, h2); err != nil || a.State != fsm.ApprovalPending || a.Approvals != 1 {
		t.Fatalf("rita approves the new action: %+v, %v", a, err)
	}
	if a, err = e.decide("appr-m", "rex", fsm.DecisionReject, h2); err != nil || a.State != fsm.ApprovalRejected {
		t.Fatalf("rex rejects: %+v, %v", a, err)
	}
}

// Only the requester cancels, a pending approval only; a retried cancel
// answers again.
func TestApprovalCancel(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	e.request(fsm.ApprovalRequestCommand{ID: "appr-c", Approvers: []string{"rita"}})
	_, err := e.c.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-c", From: "rita", Reason: "not mine"})
	wantRefused(t, "cancel by another", err, http.StatusForbidden, fsm.ErrForbidden)
	res, err := e.c.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-c", From: "tess", Reason: "rolled back"})
	if err != nil || res.State != fsm.ApprovalCancelled {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	if again, err := e.c.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-c", From: "tess", Reason: "rolled back"}); err != nil || again.State != fsm.ApprovalCancelled {
		t.Errorf("retried cancel: %+v, %v", again, err)
	}
	_, err = e.decide("appr-c", "rita", fsm.DecisionApprove, hashOf(t, deploy))
	wantRefused(t, "a decision on a cancelled approval", err, http.StatusConflict, fsm.ErrConflict, "cancelled")
}

// Bad input is 400 naming the field or parameter, and never reaches the
// log; an oversized body is 413 saying the cap.
func TestApprovalRoutesRefuseBadInput(t *testing.T) {
	e := newTaskEnv(t)
	e.request(fsm.ApprovalRequestCommand{ID: "appr-1", Approvers: []string{"rita"}})
	h := hashOf(t, deploy)
	before := len(e.svc.CallsTo("Apply"))
	for _, tc := range []struct {
		method, path, body string
		code, words        string
	}{
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"action":1}`, transport.CodeInvalid, "title: required"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":[],"title":"t","action":1}`, transport.CodeInvalid, "approvers: required"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"quorum":2,"title":"t","action":1}`, transport.CodeInvalid, "quorum"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t"}`, transport.CodeInvalid, "action: required"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"timeout":"soon"}`, transport.CodeBadRequest, "timeout"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"timeout":"1ms"}`, transport.CodeInvalid, "timeout"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"on_timeout":"approve"}`, transport.CodeInvalid, "on_timeout"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"options":["reject"]}`, transport.CodeInvalid, "options"},
		{"POST", "/v1/approvals", `{"from":"tess","approvers":["rita"],"title":"t","action":1,"titel":"x"}`, transport.CodeUnknownField, `"titel"`},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"approve","action_hash":"` + h + `","id":"appr-2"}`, transport.CodeInvalid, `id: "appr-2" differs from the approval in the path`},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"maybe","action_hash":"` + h + `"}`, transport.CodeInvalid, "decision"},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"approve","action_hash":"abc"}`, transport.CodeInvalid, "action_hash"},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"modify","action_hash":"` + h + `"}`, transport.CodeInvalid, "action: required"},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"rita","decision":"approve","action_hash":"` + h + `","action":{}}`, transport.CodeInvalid, "only a modify"},
		{"POST", "/v1/approvals/appr-1/cancel", `{"reason":"x"}`, transport.CodeInvalid, "from"},
		{"POST", "/v1/approvals/appr-1/cancel", `{"from":"tess"} {}`, transport.CodeBadRequest, "trailing data"},
		{"GET", "/v1/approvals?state=done", "", transport.CodeInvalid, "state"},
		{"GET", "/v1/approvals?approver=Rita", "", transport.CodeInvalid, "approver"},
		{"GET", "/v1/approvals?from=role:x", "", transport.CodeInvalid, "from"},
		{"GET", "/v1/approvals?limit=0", "", transport.CodeBadRequest, "limit"},
		{"GET", "/v1/approvals?after=x", "", transport.CodeBadRequest, "after"},
		{"GET", "/v1/approvals?approvers=rita", "", transport.CodeBadRequest, "approvers"},
	} {
		r := do(t, tc.method, e.url+tc.path, tc.body, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s %s %.80s: %d %s, want 400", tc.method, tc.path, tc.body, r.status, r.body)
			continue
		}
		if msg := wantError(t, r, http.StatusBadRequest, tc.code); !strings.Contains(msg, tc.words) {
			t.Errorf("%s %s %.80s: message %q lacks %q", tc.method, tc.path, tc.body, msg, tc.words)
		}
	}
	big := `{"from":"tess","approvers":["rita"],"title":"t","action":"` + strings.Repeat("a", 300<<10) + `"}`
	msg := wantError(t, do(t, "POST", e.url+"/v1/approvals", big, nil), http.StatusRequestEntityTooLarge, transport.CodeTooLarge)
	if !strings.Contains(msg, "262144 bytes for POST /v1/approvals") || !strings.Contains(msg, "64 KiB") {
		t.Errorf("413 message %q", msg)
	}
	if n := len(e.svc.CallsTo("Apply")); n != before {
		t.Errorf("%d refused requests reached Apply", n-before)
	}
	// An action over its limit is the state machine's field error.
	long := `{"from":"tess","approvers":["rita"],"title":"t","action":"` + strings.Repeat("a", fsm.MaxActionBytes) + `"}`
	if msg := wantError(t, do(t, "POST", e.url+"/v1/approvals", long, nil), http.StatusBadRequest, transport.CodeInvalid); !strings.Contains(msg, "action") {
		t.Errorf("long action: %q", msg)
	}
}

// With auth the acting agent (from, approver) must be the token's own;
// admins act as anyone; reads need a token. Refusals reach no log entry.
func TestApprovalAuthorization(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	h := hashOf(t, deploy)
	for _, tt := range []struct{ method, path, body, field string }{
		{"POST", "/v1/approvals", `{"from":"bob","approvers":["carol"],"title":"t","action":1}`, `from "bob"`},
		{"POST", "/v1/approvals/appr-1/decide", `{"approver":"bob","decision":"approve","action_hash":"` + h + `"}`, `approver "bob"`},
		{"POST", "/v1/approvals/appr-1/cancel", `{"from":"bob"}`, `from "bob"`},
		{"POST", "/v1/messages", `{"message_type":"hitl_approval_request","from_agent":"bob","to_agent":"carol","title":"t","proposed_action":1}`, `from "bob"`},
	} {
		msg := wantError(t, e.as(aliceSecret, tt.method, tt.path, tt.body), http.StatusForbidden, transport.CodeForbidden)
		if !strings.Contains(msg, tt.field) || !strings.Contains(msg, "tok-alice") {
			t.Errorf("%s %s: 403 message %q does not name %s and the token", tt.method, tt.path, msg, tt.field)
		}
	}
	if writes, sends := e.writes(); writes != 0 || sends != 0 {
		t.Errorf("refused requests reached the log: %d writes, %d sends", writes, sends)
	}
	wantUnauthorized(t, e.as("", "GET", "/v1/approvals", ""), false)
	wantUnauthorized(t, e.as("", "GET", "/v1/approvals/appr-1", ""), false)

	// alice asks bob and carol; bob decides as himself; an admin decides
	// as carol and cancels as the requester.
	alice, bob, admin := e.client(aliceSecret), e.client(bobSecret), e.client(adminSecret)
	for _, id := range []string{"appr-a", "appr-b"} {
		if _, err := alice.RequestApproval(ctx, fsm.ApprovalRequestCommand{ID: id, From: "alice", Approvers: []string{"bob", "carol"},
			Quorum: 2, Title: "t", Action: deploy}); err != nil {
			t.Fatal(err)
		}
	}
	if a, err := bob.DecideApproval(ctx, fsm.ApprovalDecideCommand{ID: "appr-a", Approver: "bob", Decision: fsm.DecisionApprove, ActionHash: h}); err != nil || a.Approvals != 1 {
		t.Errorf("bob approves: %+v, %v", a, err)
	}
	if a, err := admin.DecideApproval(ctx, fsm.ApprovalDecideCommand{ID: "appr-a", Approver: "carol", Decision: fsm.DecisionApprove, ActionHash: h}); err != nil || a.State != fsm.ApprovalApproved {
		t.Errorf("an admin approves as carol: %+v, %v", a, err)
	}
	_, err := bob.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-b", From: "bob"})
	wantRefused(t, "bob cancels alice's approval", err, http.StatusForbidden, fsm.ErrForbidden)
	if res, err := admin.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-b", From: "alice"}); err != nil || res.State != fsm.ApprovalCancelled {
		t.Errorf("an admin cancels as alice: %+v, %v", res, err)
	}
	if page, err := bob.Approvals(ctx, fsm.ApprovalQuery{Approver: "bob"}); err != nil || len(page.Approvals) != 2 {
		t.Errorf("bob lists %+v, %v", page, err)
	}
}

// The secret guard covers a request's title, approval_needed_for,
// rationale and action, a decision's comment and new action, a cancel's
// reason: refused (422 naming the field) or, with redact, stored redacted
// and hashed as stored.
func TestApprovalSecretGuard(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	withSecret := json.RawMessage(`{"cmd":"git push https://` + pat + `@github.com/o/r"}`)
	for _, tc := range []struct {
		field string
		cmd   fsm.ApprovalRequestCommand
	}{
		{"title", fsm.ApprovalRequestCommand{Title: "push with " + pat}},
		{"approval_needed_for", fsm.ApprovalRequestCommand{ApprovalNeededFor: "push with " + pat}},
		{"rationale", fsm.ApprovalRequestCommand{Rationale: "push with " + pat}},
		{"action", fsm.ApprovalRequestCommand{Action: withSecret}},
	} {
		cmd := tc.cmd
		cmd.From, cmd.Approvers = "tess", []string{"rita"}
		cmd.Title = cmp(cmd.Title, "t")
		if cmd.Action == nil {
			cmd.Action = deploy
		}
		_, err := e.c.RequestApproval(ctx, cmd)
		wantRefused(t, "request with a secret in "+tc.field, err, http.StatusUnprocessableEntity, transport.ErrSecretFound, tc.field+" holds a secret (gitleaks rule github-pat)")
		if err != nil && strings.Contains(err.Error(), pat) {
			t.Errorf("the refusal repeats the secret: %v", err)
		}
	}
	e.request(fsm.ApprovalRequestCommand{ID: "appr-s", Approvers: []string{"rita"}})
	h := hashOf(t, deploy)
	_, err := e.c.DecideApproval(ctx, fsm.ApprovalDecideCommand{ID: "appr-s", Approver: "rita", Decision: fsm.DecisionReject, ActionHash: h, Comment: "not with " + pat})
	wantRefused(t, "a comment with a secret", err, http.StatusUnprocessableEntity, transport.ErrSecretFound, "comment holds a secret")
	_, err = e.c.DecideApproval(ctx, fsm.ApprovalDecideCommand{ID: "appr-s", Approver: "rita", Decision: fsm.DecisionModify, ActionHash: h, Action: withSecret})
	wantRefused(t, "a modify with a secret", err, http.StatusUnprocessableEntity, transport.ErrSecretFound, "action holds a secret")
	_, err = e.c.CancelApproval(ctx, fsm.ApprovalCancelCommand{ID: "appr-s", From: "tess", Reason: "leaked " + pat})
	wantRefused(t, "a reason with a secret", err, http.StatusUnprocessableEntity, transport.ErrSecretFound, "reason holds a secret")

	if _, err := e.svc.ApplyCommand(fsm.OpSetConfig, fsm.SetConfigCommand{Key: "secret_guard", Value: json.RawMessage(`"redact"`)}); err != nil {
		t.Fatal(err)
	}
	res := e.request(fsm.ApprovalRequestCommand{ID: "appr-r", Approvers: []string{"rita"}, Action: withSecret})
	redacted := json.RawMessage(`{"cmd":"git push https://[REDACTED:github-pat]@github.com/o/r"}`)
	if a := e.approval("appr-r"); string(a.Action) != string(redacted) || res.ActionHash != hashOf(t, redacted) || a.ActionHash != res.ActionHash {
		t.Errorf("redacted action %s hash %s (answered %s), want %s hashed", a.Action, a.ActionHash, res.ActionHash, redacted)
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Seed 004's hitl_approval_request, posted as-is to POST /v1/messages,
// opens an approval: the tagged approvers that are registered decide on
// proposed_action, and its other fields are kept.
func TestSendSeedApproval(t *testing.T) {
	e := newTaskEnv(t)
	if _, err := e.svc.ApplyCommand(fsm.OpRegisterAgent, fsm.RegisterAgentCommand{ID: "maintainer1", Role: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	var res transport.ApprovalMessageResponse
	wantOK(t, do(t, "POST", e.url+"/v1/messages", seedBody(t, "seed004_approval.json"), nil), &res)
	if res.Action != transport.ApprovalActionRequested || res.ID != "unique_uuid" || res.State != fsm.ApprovalPending || res.Quorum != 1 || res.Seq == 0 {
		t.Fatalf("seed request answered %+v", res)
	}
	a := e.approval("unique_uuid")
	var ctxFields map[string]any
	if err := json.Unmarshal(a.Context, &ctxFields); err != nil {
		t.Fatal(err)
	}
	if a.From != "triage" || !slices.Equal(a.Approvers, []string{"maintainer1"}) || a.Title != "close_duplicate_issue" ||
		a.TimeoutSeconds != 72*3600 || !slices.Equal(a.Options, fsm.Decisions) || a.ActionHash != res.ActionHash ||
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
	// A field that cannot be mapped is 400 naming it.
	bad := strings.Replace(seedBody(t, "seed004_approval.json"), `"confidence": 0.96`, `"confidence": "high"`, 1)
	if msg := wantError(t, do(t, "POST", e.url+"/v1/messages", bad, nil), http.StatusBadRequest, transport.CodeInvalid); !strings.HasPrefix(msg, "confidence:") {
		t.Errorf("bad confidence: %q", msg)
	}
}

// The summary counts the pending approvals an agent may decide and has
// not decided: what the status line shows.
func TestSummaryCountsApprovals(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	e.request(fsm.ApprovalRequestCommand{ID: "appr-1", Approvers: []string{"rita", "rex"}, Quorum: 2})
	e.request(fsm.ApprovalRequestCommand{ID: "appr-2", Approvers: []string{"role:reviewer"}})
	count := func(agent string) int {
		t.Helper()
		sum, err := e.c.AgentSummary(ctx, agent, transport.Strong)
		if err != nil {
			t.Fatal(err)
		}
		return sum.PendingApprovals
	}
	if r, x, l := count("rita"), count("rex"), count("lead"); r != 2 || x != 2 || l != 0 {
		t.Errorf("pending approvals rita %d rex %d lead %d, want 2 2 0", r, x, l)
	}
	if _, err := e.decide("appr-1", "rita", fsm.DecisionApprove, hashOf(t, deploy)); err != nil {
		t.Fatal(err)
	}
	if r, x := count("rita"), count("rex"); r != 1 || x != 2 {
		t.Errorf("after rita's approval: rita %d rex %d, want 1 2", r, x)
	}
}
