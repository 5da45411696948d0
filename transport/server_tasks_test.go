package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// taskEnv is the API over a real state machine with the agents of the
// task tests: lead (role lead), rita and rex (reviewers, rita with
// capability go), tess (tester).
type taskEnv struct {
	t   *testing.T
	svc *transporttest.Service
	url string
	c   *client.Client
}

func newTaskEnv(t *testing.T, opts ...transporttest.Option) *taskEnv {
	t.Helper()
	svc := transporttest.New(t, opts...)
	for _, a := range []api.RegisterAgentCommand{
		{ID: "lead", Role: "lead"}, {ID: "rita", Role: "reviewer", Capabilities: []string{"go"}},
		{ID: "rex", Role: "reviewer"}, {ID: "tess", Role: "tester"},
	} {
		if _, err := svc.ApplyCommand(api.OpRegisterAgent, a); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, svc, transport.ServerOptions{})
	return &taskEnv{t: t, svc: svc, url: srv.URL, c: client.NewClient(srv.URL, nil)}
}

func (e *taskEnv) create(cmd api.TaskCreateCommand) api.TaskResult {
	e.t.Helper()
	if cmd.From == "" {
		cmd.From = "lead"
	}
	if cmd.Title == "" {
		cmd.Title = "review PR 12"
	}
	res, err := e.c.CreateTask(context.Background(), cmd)
	if err != nil {
		e.t.Fatalf("create %+v: %v", cmd, err)
	}
	return res
}

func (e *taskEnv) claim(id, agent string) api.TaskResult {
	e.t.Helper()
	res, err := e.c.ClaimTask(context.Background(), id, agent)
	if err != nil {
		e.t.Fatalf("claim %s as %s: %v", id, agent, err)
	}
	return res
}

func (e *taskEnv) task(id string) *api.Task {
	e.t.Helper()
	t, err := e.c.Task(context.Background(), id)
	if err != nil {
		e.t.Fatalf("task %s: %v", id, err)
	}
	return t
}

// wantRefused checks err is an *APIError of status that errors.Is
// matches sentinel, its message containing each of words.
func wantRefused(t *testing.T, what string, err error, status int, sentinel error, words ...string) {
	t.Helper()
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != status || !errors.Is(err, sentinel) {
		t.Errorf("%s: %v, want %d matching %v", what, err, status, sentinel)
		return
	}
	for _, w := range words {
		if !strings.Contains(apiErr.Message, w) {
			t.Errorf("%s: message %q lacks %q", what, apiErr.Message, w)
		}
	}
	if strings.Contains(apiErr.Message, "fsm: apply") {
		t.Errorf("%s: message %q carries the apply's context", what, apiErr.Message)
	}
}

func events(t *api.Task) []string {
	var out []string
	for _, e := range t.History {
		out = append(out, e.Event)
	}
	return out
}

// A task's life through the client: create, list, claim (one winner, a
// retried claim answers the same), progress, complete under the fence;
// every refusal maps to the sentinel the client's callers match.
func TestTaskLifecycle(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	res := e.create(api.TaskCreateCommand{ID: "t-review", To: "role:reviewer", Description: "the diff is in #review"})
	if res.ID != "t-review" || res.State != api.TaskReady || res.Seq == 0 {
		t.Fatalf("create answered %+v", res)
	}
	// The same create again answers the same; other content is a conflict.
	if again := e.create(api.TaskCreateCommand{ID: "t-review", To: "role:reviewer", Description: "the diff is in #review"}); again != res {
		t.Errorf("repeated create answered %+v, want %+v", again, res)
	}
	_, err := e.c.CreateTask(ctx, api.TaskCreateCommand{ID: "t-review", From: "lead", To: "role:tester", Title: "other"})
	wantRefused(t, "create with a taken id", err, http.StatusConflict, api.ErrConflict, "t-review")

	page, err := e.c.Tasks(ctx, api.TaskQuery{State: api.TaskReady, To: "role:reviewer"})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != "t-review" || page.HasMore || page.Tasks[0].History != nil {
		t.Fatalf("ready reviewer tasks = %+v, %v", page, err)
	}
	if page, err := e.c.Tasks(ctx, api.TaskQuery{State: api.TaskRunning}); err != nil || len(page.Tasks) != 0 {
		t.Errorf("running tasks = %+v, %v; want none", page, err)
	}

	_, err = e.c.ClaimTask(ctx, "t-review", "tess")
	wantRefused(t, "claim by a tester", err, http.StatusForbidden, api.ErrForbidden, "tess")
	claim := e.claim("t-review", "rita")
	if claim.State != api.TaskRunning || claim.Attempt != 1 || claim.Fence == 0 || claim.LeaseExpires == nil {
		t.Fatalf("claim answered %+v", claim)
	}
	if again := e.claim("t-review", "rita"); again.Fence != claim.Fence || again.Attempt != 1 {
		t.Errorf("retried claim answered %+v, want the claim %+v", again, claim)
	}
	_, err = e.c.ClaimTask(ctx, "t-review", "rex")
	wantRefused(t, "claim of a running task", err, http.StatusConflict, api.ErrConflict, "claimed by rita")

	p := 0.5
	_, err = e.c.TaskProgress(ctx, api.TaskProgressCommand{ID: "t-review", Agent: "rita", Fence: claim.Fence + 100, Message: "half"})
	wantRefused(t, "progress under another fence", err, http.StatusConflict, api.ErrConflict)
	prog, err := e.c.TaskProgress(ctx, api.TaskProgressCommand{ID: "t-review", Agent: "rita", Fence: claim.Fence, Message: "half way", Progress: &p})
	if err != nil || prog.State != api.TaskRunning || prog.LeaseExpires == nil || prog.LeaseExpires.Before(*claim.LeaseExpires) {
		t.Fatalf("progress = %+v, %v", prog, err)
	}

	conf := 0.97
	done := api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "LGTM", ConfidenceScore: &conf}
	_, err = e.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-review", Agent: "rex", Fence: claim.Fence, Completion: done})
	wantRefused(t, "complete by another", err, http.StatusConflict, api.ErrConflict)
	end, err := e.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-review", Agent: "rita", Fence: claim.Fence, Completion: done})
	if err != nil || end.State != api.TaskSucceeded {
		t.Fatalf("complete = %+v, %v", end, err)
	}
	got := e.task("t-review")
	if got.State != api.TaskSucceeded || got.Completion == nil || got.Completion.Result != "LGTM" || *got.Completion.ConfidenceScore != 0.97 ||
		!slices.Equal(events(got), []string{"created", "claimed", "progress", "completed"}) || got.ClaimedBy != "rita" {
		t.Errorf("task after completion: %+v events %v", got, events(got))
	}
	_, err = e.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-review", Agent: "rita", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusFailure, Error: &api.TaskError{ErrorType: "late"}}})
	wantRefused(t, "a second, different completion", err, http.StatusConflict, api.ErrConflict)
	_, err = e.c.CancelTask(ctx, api.TaskCancelCommand{ID: "t-review", From: "lead"})
	wantRefused(t, "cancel of an ended task", err, http.StatusConflict, api.ErrConflict)

	// Unknown tasks and dependencies are 404 naming them.
	_, err = e.c.Task(ctx, "t-nope")
	wantRefused(t, "unknown task", err, http.StatusNotFound, api.ErrNotFound, "t-nope")
	_, err = e.c.ClaimTask(ctx, "t-nope", "rita")
	wantRefused(t, "claim of an unknown task", err, http.StatusNotFound, api.ErrNotFound, "t-nope")
	_, err = e.c.CreateTask(ctx, api.TaskCreateCommand{From: "lead", To: "rita", Title: "x", DependsOn: []string{"t-review", "t-ghost"}})
	wantRefused(t, "create depending on an unknown task", err, http.StatusNotFound, api.ErrNotFound, "t-ghost")
}

// Dependencies, cancel (creator only) and handoff through the API.
func TestTaskDependenciesCancelHandoff(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	e.create(api.TaskCreateCommand{ID: "t-design", To: "rita"})
	dep := e.create(api.TaskCreateCommand{ID: "t-build", To: "capability:go", DependsOn: []string{"t-design"}})
	if dep.State != api.TaskWaiting {
		t.Fatalf("dependent created %s, want waiting", dep.State)
	}
	_, err := e.c.ClaimTask(ctx, "t-build", "rita")
	wantRefused(t, "claim of a waiting task", err, http.StatusConflict, api.ErrConflict, "waiting")
	_, err = e.c.CancelTask(ctx, api.TaskCancelCommand{ID: "t-design", From: "rita", Reason: "not mine"})
	wantRefused(t, "cancel by another than the creator", err, http.StatusForbidden, api.ErrForbidden)
	c, err := e.c.CancelTask(ctx, api.TaskCancelCommand{ID: "t-design", From: "lead", Reason: "superseded"})
	if err != nil || c.State != api.TaskCancelled {
		t.Fatalf("cancel = %+v, %v", c, err)
	}
	if b := e.task("t-build"); b.State != api.TaskFailed || b.Completion == nil || b.Completion.Error == nil ||
		b.Completion.Error.ErrorType != api.TaskErrorDependencyFailed || !strings.Contains(b.Completion.Error.ErrorMessage, "t-design") {
		t.Errorf("dependent of a cancelled task: %+v", b)
	}

	e.create(api.TaskCreateCommand{ID: "t-hand", To: "rita"})
	claim := e.claim("t-hand", "rita")
	_, err = e.c.HandoffTask(ctx, api.TaskHandoffCommand{ID: "t-hand", Agent: "rita", Fence: claim.Fence + 1, To: "role:tester"})
	wantRefused(t, "handoff under a stale fence", err, http.StatusConflict, api.ErrConflict)
	h, err := e.c.HandoffTask(ctx, api.TaskHandoffCommand{ID: "t-hand", Agent: "rita", Fence: claim.Fence, To: "role:tester", Reason: "needs a test plan"})
	if err != nil || h.State != api.TaskReady {
		t.Fatalf("handoff = %+v, %v", h, err)
	}
	if got := e.task("t-hand"); got.To != "role:tester" || got.ClaimedBy != "" {
		t.Errorf("after handoff: %+v", got)
	}
	_, err = e.c.ClaimTask(ctx, "t-hand", "rita")
	wantRefused(t, "claim by the old assignee", err, http.StatusForbidden, api.ErrForbidden)
	if c := e.claim("t-hand", "tess"); c.Attempt != 2 {
		t.Errorf("the tester's claim: %+v, want attempt 2", c)
	}
}

// Bad input is 400 naming the field (or the parameter) and the limit,
// and never reaches the log; an oversized body is 413 saying the cap.
func TestTaskRoutesRefuseBadInput(t *testing.T) {
	e := newTaskEnv(t)
	e.create(api.TaskCreateCommand{ID: "t-1", To: "rita"})
	before := len(e.svc.CallsTo("Apply"))
	wantBadRequests(t, e.url, []badRequest{
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita"}`, api.CodeInvalid, "title: required"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita","title":"t","priority":"asap"}`, api.CodeInvalid, "priority"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita","title":"t","timeout_seconds":-1}`, api.CodeInvalid, "timeout_seconds"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita","title":"t","max_attempts":1000}`, api.CodeInvalid, "max_attempts: 1000: want 1..100"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"role:Bad","title":"t"}`, api.CodeInvalid, "to"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita","title":"t","depends_on":["t-1","t-1"]}`, api.CodeInvalid, "depends_on[1]"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita","title":"t","context":{]}`, api.CodeBadRequest, "malformed JSON"},
		{"POST", "/v1/tasks", `{"from":"lead","to":"rita","title":"t","tittle":"x"}`, api.CodeUnknownField, `"tittle"`},
		{"POST", "/v1/tasks/t-1/claim", `{"agent":"rita","id":"t-2"}`, api.CodeInvalid, `id: "t-2" differs from the task in the path`},
		{"POST", "/v1/tasks/t-1/claim", `{"agent":"Rita"}`, api.CodeInvalid, "agent"},
		{"POST", "/v1/tasks/t-1/progress", `{"agent":"rita"}`, api.CodeInvalid, "fence: required"},
		{"POST", "/v1/tasks/t-1/progress", `{"agent":"rita","fence":3,"progress":2}`, api.CodeInvalid, "progress: 2: want 0..1"},
		{"POST", "/v1/tasks/t-1/complete", `{"agent":"rita","fence":3,"completion":{"status":"done"}}`, api.CodeInvalid, "status"},
		{"POST", "/v1/tasks/t-1/complete", `{"agent":"rita","fence":3,"completion":{"status":"success","confidence_score":1.5}}`, api.CodeInvalid, "confidence_score"},
		{"POST", "/v1/tasks/t-1/complete", `{"agent":"rita","fence":3,"completion":{"status":"success","rationale":"` + strings.Repeat("r", 1001) + `"}}`,
			api.CodeInvalid, "rationale: 1001 characters, at most 1000"},
		{"POST", "/v1/tasks/t-1/handoff", `{"agent":"rita","fence":3,"to":""}`, api.CodeInvalid, "to"},
		{"POST", "/v1/tasks/t-1/cancel", `{"reason":"x"}`, api.CodeInvalid, "from"},
		{"POST", "/v1/tasks/t-1/cancel", `{"from":"lead"} {}`, api.CodeBadRequest, "trailing data"},
		{"GET", "/v1/tasks?state=done", "", api.CodeInvalid, "state"},
		{"GET", "/v1/tasks?to=role:", "", api.CodeInvalid, "to"},
		{"GET", "/v1/tasks?claimed_by=Rita", "", api.CodeInvalid, "claimed_by"},
		{"GET", "/v1/tasks?limit=0", "", api.CodeBadRequest, "limit"},
		{"GET", "/v1/tasks?after=x", "", api.CodeBadRequest, "after"},
	})
	// A body over the task cap: 413, declared or not.
	big := `{"from":"lead","to":"rita","title":"t","description":"` + strings.Repeat("d", 300<<10) + `"}`
	msg := wantError(t, do(t, "POST", e.url+"/v1/tasks", big, nil), http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	if !strings.Contains(msg, "262144 bytes") || !strings.Contains(msg, "64 KiB") {
		t.Errorf("413 message %q", msg)
	}
	if n := len(e.svc.CallsTo("Apply")); n != before {
		t.Errorf("%d refused requests reached Apply", n-before)
	}
	// A description over its limit is the state machine's field error.
	long := `{"from":"lead","to":"rita","title":"t","description":"` + strings.Repeat("d", api.MaxTaskTextBytes+1) + `"}`
	if msg := wantError(t, do(t, "POST", e.url+"/v1/tasks", long, nil), http.StatusBadRequest, api.CodeInvalid); !strings.Contains(msg, "description") {
		t.Errorf("long description: %q", msg)
	}
}

// With auth the acting agent (from, agent) must be the token's own;
// admins act as anyone; reads need a token. Refusals reach no log entry.
func TestTaskAuthorization(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	e.wantForbidden(t, []forbidden{
		{"POST", "/v1/tasks", `{"from":"bob","to":"carol","title":"t"}`, `from "bob"`},
		{"POST", "/v1/tasks/t-1/claim", `{"agent":"bob"}`, `agent "bob"`},
		{"POST", "/v1/tasks/t-1/progress", `{"agent":"bob","fence":1}`, `agent "bob"`},
		{"POST", "/v1/tasks/t-1/complete", `{"agent":"bob","fence":1,"completion":{"status":"success"}}`, `agent "bob"`},
		{"POST", "/v1/tasks/t-1/handoff", `{"agent":"bob","fence":1,"to":"carol"}`, `agent "bob"`},
		{"POST", "/v1/tasks/t-1/cancel", `{"from":"bob"}`, `from "bob"`},
		{"POST", "/v1/messages", `{"message_type":"task_delegation","from_agent":"bob","to_agent":"carol","title":"t"}`, `from "bob"`},
		{"POST", "/v1/messages", `{"message_type":"task_completion","from_agent":"bob","task_id":"t-1","status":"success"}`, `from_agent "bob"`},
	})
	wantUnauthorized(t, e.as("", "GET", "/v1/tasks", ""), false)
	wantUnauthorized(t, e.as("", "GET", "/v1/tasks/t-1", ""), false)

	// As herself alice creates; an admin creates for bob and cancels as
	// the creator; bob claims and completes with his own token.
	alice, bob, admin := e.client(aliceSecret), e.client(bobSecret), e.client(adminSecret)
	if _, err := alice.CreateTask(ctx, api.TaskCreateCommand{ID: "t-a", From: "alice", To: "bob", Title: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTask(ctx, api.TaskCreateCommand{ID: "t-b", From: "bob", To: "carol", Title: "t"}); err != nil {
		t.Fatal(err)
	}
	if res, err := admin.CancelTask(ctx, api.TaskCancelCommand{ID: "t-b", From: "bob"}); err != nil || res.State != api.TaskCancelled {
		t.Errorf("admin cancel as the creator: %+v, %v", res, err)
	}
	claim, err := bob.ClaimTask(ctx, "t-a", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := bob.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-a", Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}}); err != nil || res.State != api.TaskSucceeded {
		t.Errorf("bob completes: %+v, %v", res, err)
	}
	if page, err := alice.Tasks(ctx, api.TaskQuery{}); err != nil || len(page.Tasks) != 2 {
		t.Errorf("alice lists %+v, %v", page, err)
	}
}

// The secret guard covers a task's title and description and a
// completion's result and rationale: refused (422 naming the field) or,
// with redact, stored redacted.
func TestTaskSecretGuard(t *testing.T) {
	e := newTaskEnv(t)
	ctx := context.Background()
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	_, err := e.c.CreateTask(ctx, api.TaskCreateCommand{From: "lead", To: "rita", Title: "t", Description: "push with " + pat})
	wantRefused(t, "create with a secret", err, http.StatusUnprocessableEntity, api.ErrSecretFound, "description holds a secret (gitleaks rule github-pat)")
	if err != nil && strings.Contains(err.Error(), pat) {
		t.Errorf("the refusal repeats the secret: %v", err)
	}
	e.create(api.TaskCreateCommand{ID: "t-s", To: "rita"})
	claim := e.claim("t-s", "rita")
	_, err = e.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-s", Agent: "rita", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Rationale: "used " + pat}})
	wantRefused(t, "completion with a secret", err, http.StatusUnprocessableEntity, api.ErrSecretFound, "completion.rationale holds a secret")

	if _, err := e.svc.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "secret_guard", Value: json.RawMessage(`"redact"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-s", Agent: "rita", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "token " + pat}}); err != nil {
		t.Fatal(err)
	}
	if got := e.task("t-s").Completion.Result; got != "token [REDACTED:github-pat]" {
		t.Errorf("redacted result %q", got)
	}
}

// Seed 004's task_delegation and task_completion, posted as-is to POST
// /v1/messages, create and complete tasks; the answer says which.
func TestSendSeedTasks(t *testing.T) {
	e := newTaskEnv(t)
	// The seed's to_agent, "concierge|triage|lifecycle|scribe|community",
	// names one agent.
	e.svc.Register(t, "concierge-triage-lifecycle-scribe-community", "lifecycle")
	post := func(body string) transport.TaskMessageResponse {
		t.Helper()
		var res transport.TaskMessageResponse
		wantOK(t, do(t, "POST", e.url+"/v1/messages", body, nil), &res)
		return res
	}
	res := post(seedBody(t, "seed004_delegation.json"))
	if res.Action != transport.TaskActionCreated || res.ID != "unique_uuid" || res.State != api.TaskReady || res.Seq == 0 {
		t.Fatalf("delegation answered %+v", res)
	}
	task := e.task("unique_uuid")
	var ctxFields map[string]any
	if err := json.Unmarshal(task.Context, &ctxFields); err != nil {
		t.Fatal(err)
	}
	if task.From != "orchestrator" || task.To != "concierge-triage-lifecycle-scribe-community" || task.TimeoutSeconds != 300 ||
		task.Description != "Human-readable task description" || ctxFields["event_context"] == nil || task.Channel != api.DefaultChannel {
		t.Errorf("seed task %+v context %s", task, task.Context)
	}
	if m, err := e.svc.State().Message(task.MessageID); err != nil || m.Type != api.TypeTaskDelegation || m.To[0] != task.To {
		t.Errorf("its delegation message: %+v, %v", m, err)
	}

	failure := seedBody(t, "seed004_completion_failure.json")
	msg := wantError(t, do(t, "POST", e.url+"/v1/messages", failure, nil), http.StatusNotFound, api.CodeNotFound)
	if msg != "task original_task_id: not found" {
		t.Errorf("completion of an unknown task: %q", msg)
	}
	e.create(api.TaskCreateCommand{ID: "original_task_id", From: "orchestrator", To: "lifecycle", Title: "run CI"})
	msg = wantError(t, do(t, "POST", e.url+"/v1/messages", failure, nil), http.StatusConflict, api.CodeConflict)
	if !strings.Contains(msg, "task original_task_id is ready") || !strings.Contains(msg, "current claimant only") {
		t.Errorf("completion of an unclaimed task: %q", msg)
	}
	claim := e.claim("original_task_id", "lifecycle")
	res = post(failure)
	if res.Action != transport.TaskActionCompleted || res.ID != "original_task_id" || res.State != api.TaskFailed {
		t.Fatalf("completion answered %+v", res)
	}
	done := e.task("original_task_id")
	if tc := done.Completion; tc == nil || tc.Error == nil || tc.Error.ErrorCode != "ERR_001" || tc.ExecutionTimeMS != 5000 ||
		done.Fence != claim.Fence || !strings.HasPrefix(tc.Rationale, "Explanation") {
		t.Errorf("completed task %+v completion %+v", done, done.Completion)
	}
	// The task ended: a second completion is refused, saying its state.
	msg = wantError(t, do(t, "POST", e.url+"/v1/messages", failure, nil), http.StatusConflict, api.CodeConflict)
	if !strings.Contains(msg, "is failed, claimed by lifecycle") {
		t.Errorf("second completion: %q", msg)
	}
	// The success example lists its status choices: 400 naming the field.
	msg = wantError(t, do(t, "POST", e.url+"/v1/messages", seedBody(t, "seed004_completion_success.json"), nil), http.StatusBadRequest, api.CodeInvalid)
	if !strings.HasPrefix(msg, "status:") {
		t.Errorf("status placeholder: %q", msg)
	}
}

// Task events come on the stream in entry order with the messages (an
// entry's message first), ids N and N:task; a resume after N sends N's
// task events, after N:task the next entry's; ?agent, ?channel and
// ?tasks= filter them; a client that asks for no tasks gets none.
func TestStreamTaskEvents(t *testing.T) {
	e := newTaskEnv(t)
	type got struct {
		kind string
		seq  uint64
		id   string
		what string // message type, or task id and event
	}
	collect := func(q api.StreamQuery) []got {
		t.Helper()
		var out []got
		streamUntilReady(t, e.c, q, func(ev api.StreamEvent) {
			switch {
			case ev.Message != nil:
				out = append(out, got{"message", ev.Seq, ev.ID, ev.Message.Type})
			case ev.Task != nil:
				if ev.Task.Event.Seq != ev.Seq || ev.Task.Task == nil {
					t.Errorf("task event %+v", ev)
				}
				out = append(out, got{"task", ev.Seq, ev.ID, ev.Task.Task.ID + " " + ev.Task.Event.Event})
			}
		})
		return out
	}
	a := e.create(api.TaskCreateCommand{ID: "t-a", To: "rita", Channel: "ops"})                    // delegation message + created
	b := e.create(api.TaskCreateCommand{ID: "t-b", To: "role:tester", DependsOn: []string{"t-a"}}) // waiting
	claim := e.claim("t-a", "rita")                                                                // task event only
	cancel, err := e.c.CancelTask(context.Background(), api.TaskCancelCommand{ID: "t-a", From: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	// The cancel's entry changed both tasks: t-a cancelled, t-b failed.
	all := collect(api.StreamQuery{Tasks: api.StreamTasksAll})
	want := []got{
		{"message", a.Seq, strconvU(a.Seq), api.TypeTaskDelegation}, {"task", a.Seq, strconvU(a.Seq) + ":task", "t-a created"},
		{"message", b.Seq, strconvU(b.Seq), api.TypeTaskDelegation}, {"task", b.Seq, strconvU(b.Seq) + ":task", "t-b created"},
		{"task", claim.Fence, strconvU(claim.Fence) + ":task", "t-a claimed"},
		{"task", cancel.Seq, "", "t-a cancelled"}, {"task", cancel.Seq, strconvU(cancel.Seq) + ":task", "t-b failed"},
	}
	// Entries after the cancel (the ticks' queued replies) are not asked
	// for here: only the prefix is checked.
	if len(all) < len(want) || !slices.Equal(all[:len(want)], want) {
		t.Fatalf("stream\n got %v\nwant %v", all, want)
	}
	// Resume after N sends N's task event; after N:task, the next entry.
	if r := collect(api.StreamQuery{Tasks: api.StreamTasksAll, Resume: strconvU(a.Seq)}); len(r) < 2 || r[0] != want[1] || r[1] != want[2] {
		t.Errorf("resume after %d: %v", a.Seq, r)
	}
	if r := collect(api.StreamQuery{Tasks: api.StreamTasksAll, Resume: strconvU(a.Seq) + ":task"}); len(r) < 1 || r[0] != want[2] {
		t.Errorf("resume after %d:task: %v", a.Seq, r)
	}
	// Task events alone.
	only := collect(api.StreamQuery{Tasks: api.StreamTasksOnly})
	for _, g := range only {
		if g.kind != "task" {
			t.Errorf("tasks=only carried %+v", g)
		}
	}
	if len(only) != 5 {
		t.Errorf("tasks=only: %v, want the 5 task events", only)
	}
	// The default client stream carries no task events.
	for _, g := range collect(api.StreamQuery{}) {
		if g.kind != "message" {
			t.Errorf("a stream without Tasks carried %+v", g)
		}
	}
	// ?channel: only ops's task (t-a); its delegation message too.
	for _, g := range collect(api.StreamQuery{Channel: "ops", Tasks: api.StreamTasksAll}) {
		if g.kind == "task" && !strings.HasPrefix(g.what, "t-a ") {
			t.Errorf("channel ops carried %+v", g)
		}
	}
	// ?agent=tess: t-b is for role:tester, her role; t-a is not hers.
	// The failing t-b's event is the last of its entry and carries the id.
	tess := collect(api.StreamQuery{Agent: "tess", Tasks: api.StreamTasksOnly})
	if len(tess) != 2 || tess[0].what != "t-b created" || tess[1].what != "t-b failed" || tess[1].id != strconvU(cancel.Seq)+":task" {
		t.Errorf("tess's task events: %v", tess)
	}
	// ?agent=rita: t-a (hers); lead: both (the creator).
	if r := collect(api.StreamQuery{Agent: "rita", Tasks: api.StreamTasksOnly}); len(r) != 3 {
		t.Errorf("rita's task events: %v", r)
	}
	if r := collect(api.StreamQuery{Agent: "lead", Tasks: api.StreamTasksOnly}); len(r) != 5 {
		t.Errorf("lead's task events: %v", r)
	}
	// A bad ?tasks= or Last-Event-ID is 400.
	wantError(t, do(t, "GET", e.url+"/v1/stream?tasks=some", "", nil), http.StatusBadRequest, api.CodeBadRequest)
	wantError(t, do(t, "GET", e.url+"/v1/stream", "", http.Header{"Last-Event-ID": {"7:tasks"}}), http.StatusBadRequest, api.CodeBadRequest)
}

func strconvU(v uint64) string { return strconv.FormatUint(v, 10) }

// Across pages (more entries than one read takes) the order holds: each
// entry's message, then its task event; and an event applied after the
// stream caught up is pushed to it.
func TestStreamTaskEventsAcrossPagesAndLive(t *testing.T) {
	e := newTaskEnv(t)
	const n = 300 // over the stream's page of 256
	createTasks(t, e.svc, n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids []string
	live := false
	var creating sync.WaitGroup
	defer creating.Wait()
	errDone := errors.New("done")
	err := e.c.Stream(ctx, api.StreamQuery{Tasks: api.StreamTasksAll}, func(ev api.StreamEvent) error {
		if ev.Ready {
			live = true
			creating.Add(1)
			go func() {
				defer creating.Done()
				if _, err := e.c.CreateTask(context.Background(), api.TaskCreateCommand{ID: "t-live", From: "lead", To: "rita", Title: "t"}); err != nil {
					t.Errorf("create t-live: %v", err)
				}
			}()
			return nil
		}
		ids = append(ids, ev.ID)
		if live && ev.Task != nil && ev.Task.Task.ID == "t-live" {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream: %v after %d events", err, len(ids))
	}
	if len(ids) != 2*(n+1) {
		t.Fatalf("%d events, want %d", len(ids), 2*(n+1))
	}
	var last uint64
	for i := 0; i < len(ids); i += 2 {
		seq, err := strconv.ParseUint(ids[i], 10, 64)
		if err != nil || seq <= last || ids[i+1] != ids[i]+":task" {
			t.Fatalf("events %d, %d: %q, %q after seq %d", i, i+1, ids[i], ids[i+1], last)
		}
		last = seq
	}
}

// racingState applies an entry (a task's create: its delegation message
// and its task event) right after the stream's first message read, as a
// batch applied between the stream's two reads would.
type racingState struct {
	transport.Reader
	once  sync.Once
	apply func()
}

func (r *racingState) MessagesAfter(after uint64, limit int) (api.Page, error) {
	p, err := r.Reader.MessagesAfter(after, limit)
	r.once.Do(r.apply)
	return p, err
}

type racingNode struct {
	*transporttest.Service
	state *racingState
}

func (n racingNode) State() transport.Reader { return n.state }

// An entry applied between the stream's message read and its task read
// is not half sent: its message still goes first, then its task event.
func TestStreamTaskEventsReadsAgree(t *testing.T) {
	e := newTaskEnv(t)
	state := &racingState{Reader: e.svc.State(), apply: func() {
		if _, err := e.svc.ApplyCommand(api.OpTaskCreate, api.TaskCreateCommand{ID: "t-race", From: "lead", To: "rita", Title: "t",
			Priority: api.DefaultPriority, TimeoutSeconds: 60, MaxAttempts: 1, Channel: api.DefaultChannel}); err != nil {
			t.Error(err)
		}
	}}
	srv := serve(t, racingNode{Service: e.svc, state: state}, transport.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids []string
	errDone := errors.New("done")
	err := client.NewClient(srv.URL, nil).Stream(ctx, api.StreamQuery{Tasks: api.StreamTasksAll}, func(ev api.StreamEvent) error {
		if ev.Ready {
			return nil
		}
		ids = append(ids, ev.ID)
		if ev.Task != nil {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream: %v after %v", err, ids)
	}
	if len(ids) != 2 || ids[1] != ids[0]+":task" {
		t.Errorf("events %v, want the entry's message, then its task event", ids)
	}
}

// A report after the lease lapsed is refused even before any tick expired
// it: the entry's time decides, not whether the leader ticked yet.
func TestTaskLapsedLeaseRefused(t *testing.T) {
	var mu sync.Mutex
	now := transporttest.Epoch
	e := newTaskEnv(t, transporttest.Clock(func(uint64) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}))
	ctx := context.Background()
	e.create(api.TaskCreateCommand{ID: "t-lease", To: "rita", TimeoutSeconds: 10})
	claim := e.claim("t-lease", "rita")
	// (Entry times are made to increase by a nanosecond at least.)
	if d := claim.LeaseExpires.Sub(transporttest.Epoch.Add(10 * time.Second)); d < 0 || d > time.Millisecond {
		t.Fatalf("lease until %v", claim.LeaseExpires)
	}
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	_, err := e.c.TaskProgress(ctx, api.TaskProgressCommand{ID: "t-lease", Agent: "rita", Fence: claim.Fence, Message: "still here"})
	wantRefused(t, "progress after the lease", err, http.StatusConflict, api.ErrConflict, "lease")
	_, err = e.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-lease", Agent: "rita", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}})
	wantRefused(t, "complete after the lease", err, http.StatusConflict, api.ErrConflict, "lease")
	if got := e.task("t-lease"); got.State != api.TaskRunning || got.Completion != nil {
		t.Errorf("the refused reports changed the task: %+v", got)
	}
}
