package a2ahost_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

const adminSecret = "admin-bootstrap-0123456789abcdef"

// node is a one-node API with auth, the A2A agents mounted in front, and
// tokens for alice (who sends) and bob (the A2A agent, who works).
type node struct {
	url        string
	handler    http.Handler // what url serves
	alice, bob string       // their token secrets
	admin      *client.Client
}

func start(t *testing.T) *node { t.Helper(); return startWith(t, nil) }

// startWith is start with pushAllow as the node's --a2a-push-allow.
func startWith(t *testing.T, pushAllow []string) *node {
	t.Helper()
	svc := transporttest.New(t)
	apiServer := transport.NewServer(svc, transport.ServerOptions{Logger: slog.New(slog.DiscardHandler), Blobs: svc,
		Auth: &transport.AuthConfig{AdminToken: adminSecret}, PushAllow: pushAllow})
	h := a2ahost.Mount(apiServer, apiServer, a2ahost.Options{Version: "test", PushAllow: pushAllow})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	n := &node{url: hs.URL, handler: h, admin: client.NewClient(hs.URL, nil).WithToken(adminSecret)}
	ctx := t.Context()
	for _, r := range []api.RegisterAgentCommand{
		{ID: "alice", Role: "lead"},
		{ID: "bob", Role: "coder", Capabilities: []string{"go", "review"}, Description: "writes Go"},
	} {
		if _, err := n.admin.RegisterAgent(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, who := range []string{"alice", "bob"} {
		tok, err := n.admin.CreateToken(ctx, who, "")
		if err != nil {
			t.Fatal(err)
		}
		if who == "alice" {
			n.alice = tok.Token
		} else {
			n.bob = tok.Token
		}
	}
	return n
}

// bearer is an http.Client that sends secret as its bearer token.
func bearer(secret string) *http.Client {
	return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+secret)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// a2aFor resolves bob's card as secret and builds the SDK's client on it.
func (n *node) a2aFor(t *testing.T, secret string) (*a2a.AgentCard, *a2aclient.Client) {
	t.Helper()
	ctx := t.Context()
	card, err := agentcard.NewResolver(bearer(secret)).Resolve(ctx, n.url+a2ahost.AgentPath("bob"),
		agentcard.WithRequestHeader("Authorization", "Bearer "+secret))
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(bearer(secret)))
	if err != nil {
		t.Fatal(err)
	}
	return card, c
}

func sendText(t *testing.T, c *a2aclient.Client, parts ...*a2a.Part) *a2a.Task {
	t.Helper()
	return sendMessage(t, c, a2a.NewMessage(a2a.MessageRoleUser, parts...))
}

// sendMessage sends m (returnImmediately: nobody works bob's tasks
// unless the test does) and answers the task it made.
func sendMessage(t *testing.T, c *a2aclient.Client, m *a2a.Message) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want *a2a.Task", res)
	}
	return task
}

// The card is served per agent, from the registry, behind the API's auth.
func TestCardFromRegistryBehindAuth(t *testing.T) {
	n := start(t)
	card, _ := n.a2aFor(t, n.alice)
	if card.Name != "bob" || card.Description != "writes Go" {
		t.Errorf("card name %q description %q", card.Name, card.Description)
	}
	if got, want := card.SupportedInterfaces[0].URL, n.url+"/a2a/agents/bob"; got != want {
		t.Errorf("interface url %q, want %q", got, want)
	}
	var ids []string
	for _, s := range card.Skills {
		ids = append(ids, s.ID)
	}
	if len(ids) != 3 || ids[0] != "role:coder" || ids[1] != "capability:go" || ids[2] != "capability:review" {
		t.Errorf("skills %v", ids)
	}
	if _, ok := card.SecuritySchemes[a2ahost.BearerScheme]; !ok {
		t.Errorf("no bearer scheme in %v", card.SecuritySchemes)
	}
	_, err := agentcard.NewResolver(nil).Resolve(t.Context(), n.url+a2ahost.AgentPath("bob"))
	var st *agentcard.ErrStatusNotOK
	if !errors.As(err, &st) || st.StatusCode != http.StatusUnauthorized {
		t.Errorf("card without a token: %v, want 401", err)
	}
	_, err = agentcard.NewResolver(nil).Resolve(t.Context(), n.url+a2ahost.AgentPath("nobody"),
		agentcard.WithRequestHeader("Authorization", "Bearer "+n.alice))
	if !errors.As(err, &st) || st.StatusCode != http.StatusNotFound {
		t.Errorf("card of an agent not registered: %v, want 404", err)
	}
}

// SendMessage creates a maos task for the agent, as the token's agent;
// GetTask shows it SUBMITTED; CancelTask cancels it in maos.
func TestSendGetCancel(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	sent := sendText(t, c, a2a.NewTextPart("Fix the build\nthe linker fails"), a2a.NewDataPart(map[string]any{"repo": "maos"}))
	if sent.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("sent task state %q", sent.Status.State)
	}
	mt, err := n.admin.Task(ctx, string(sent.ID))
	if err != nil {
		t.Fatal(err)
	}
	if mt.To != "bob" || mt.From != "alice" || mt.Title != "Fix the build" || mt.Description != "Fix the build\nthe linker fails" {
		t.Errorf("maos task to %q from %q title %q description %q", mt.To, mt.From, mt.Title, mt.Description)
	}
	var actx a2ahost.A2AContext
	if err := json.Unmarshal(mt.Context, &actx); err != nil {
		t.Fatalf("maos task context %s: %v", mt.Context, err)
	}
	if actx.A2A.MessageID == "" || len(actx.Data) != 1 || actx.Data[0].(map[string]any)["repo"] != "maos" {
		t.Errorf("maos task context %s: want the message id and the data part", mt.Context)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil || got.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("GetTask: %v, %v", got, err)
	}
	cancelled, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: sent.ID})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %v, %v", cancelled, err)
	}
	if mt, err = n.admin.Task(ctx, string(sent.ID)); err != nil || mt.State != api.TaskCancelled {
		t.Errorf("maos task after cancel: %v, %v", mt, err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: sent.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("second cancel: %v, want ErrTaskNotCancelable", err)
	}
}

// A task bob claims and completes through maos's API reads COMPLETED, its
// result an artifact.
func TestCompletedThroughMaosIsCompleted(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := context.Background()
	sent := sendText(t, c, a2a.NewTextPart("Write the release notes"))
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	claim, err := bob.ClaimTask(ctx, string(sent.ID), "bob")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("GetTask after the claim: %v, %v", got, err)
	}
	if _, err := bob.CompleteTask(ctx, api.TaskCompleteCommand{ID: string(sent.ID), Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "notes written"}}); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("GetTask after the completion: %v, %v", got, err)
	}
	if len(got.Artifacts) != 1 || got.Artifacts[0].Parts[0].Text() != "notes written" {
		t.Errorf("artifacts %+v", got.Artifacts)
	}
}

// What is not built, or not allowed, is refused in A2A's words.
func TestRefusals(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser,
		a2a.NewTextPart("see file"), a2a.NewFileURLPart("https://example.invalid/x", "text/plain"))})
	if !errors.Is(err, a2a.ErrUnsupportedContentType) {
		t.Errorf("file part: %v, want ErrUnsupportedContentType", err)
	}
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("call me back")),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "https://example.invalid/hook"}}})
	if !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Errorf("a push config: %v, want ErrPushNotificationNotSupported", err)
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))
	m.ReferenceTasks = []a2a.TaskID{"task-1"}
	if _, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("referencing no task: %v, want ErrTaskNotFound", err)
	}
	if _, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: "task-20260101-000000-alice-00000000"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask of no task: %v, want ErrTaskNotFound", err)
	}
	// A task of another agent is not bob's.
	res, err := n.admin.CreateTask(ctx, api.TaskCreateCommand{From: "bob", To: "alice", Title: "for alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(res.ID)}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask of alice's task at bob: %v, want ErrTaskNotFound", err)
	}
}

// A message the rules refuse is a task in REJECTED, with the rule's words,
// and no maos task; a blocking send answers it at once.
func TestRefusedByRulesIsRejected(t *testing.T) {
	n := start(t)
	doc, err := rules.Decode([]byte(`{"forbidden_interactions":[{"from":"alice","to":"bob","reason":"alice goes through the lead"}]}`), rules.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.admin.SetRules(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	_, c := n.a2aFor(t, n.alice)
	// A blocking send: REJECTED is terminal, so it answers at once.
	a := <-sendBlocking(t.Context(), c, "do it")
	got := a.task
	if a.err != nil || got == nil {
		t.Fatalf("refused send: %v %v", got, a.err)
	}
	if got.Status.State != a2a.TaskStateRejected || got.Status.Message == nil ||
		!strings.Contains(got.Status.Message.Parts[0].Text(), "alice goes through the lead") {
		t.Fatalf("refused send: %+v", got.Status)
	}
	if _, err := n.admin.Task(t.Context(), string(got.ID)); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("maos task of a refused send: %v, want not found", err)
	}
}

// The message's contextId is kept: GetTask answers it.
func TestContextIDKept(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))
	m.ContextID = "ctx-42"
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: res.(*a2a.Task).ID})
	if err != nil || got.ContextID != "ctx-42" || got.History[0].ID != m.ID {
		t.Fatalf("GetTask: %+v, %v; want contextId ctx-42 and the message's id", got, err)
	}
}

// A JSON-RPC call without a valid token is refused by HTTP, 401 with
// WWW-Authenticate, before any method runs.
func TestRPCWithoutTokenIs401(t *testing.T) {
	n := start(t)
	resp, err := http.Post(n.url+a2ahost.AgentPath("bob"), "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("status %d, WWW-Authenticate %q; want 401 Bearer", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	page, err := n.admin.Tasks(t.Context(), api.TaskQuery{})
	if err != nil || len(page.Tasks) != 0 {
		t.Errorf("tasks after a refused call: %+v, %v", page, err)
	}
}

// An admin token speaks for no agent: the sender is metadata maos_from,
// and without it the message is refused.
func TestAdminTokenNamesSender(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, adminSecret)
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("from the admin"))
	if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("admin without maos_from: %v, want ErrInvalidParams", err)
	}
	m = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("from the admin"))
	m.Metadata = map[string]any{a2ahost.MetaFrom: "alice"}
	got := sendMessage(t, c, m)
	if mt, err := n.admin.Task(t.Context(), string(got.ID)); err != nil || mt.From != "alice" {
		t.Errorf("maos task: %+v, %v; want from alice", mt, err)
	}
}

// A body over MaxRPCBody is a JSON-RPC parse error, and no task.
func TestRPCBodyCapped(t *testing.T) {
	n := start(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` +
		strings.Repeat("a", a2ahost.MaxRPCBody) + `"}]}}}`
	req, _ := http.NewRequest(http.MethodPost, n.url+a2ahost.AgentPath("bob"), strings.NewReader(body))
	resp, err := bearer(n.alice).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error == nil || out.Error.Code != -32700 {
		t.Errorf("oversize body: %+v, %v; want JSON-RPC error -32700", out.Error, err)
	}
	page, err := n.admin.Tasks(t.Context(), api.TaskQuery{})
	if err != nil || len(page.Tasks) != 0 {
		t.Errorf("tasks after an oversize body: %+v, %v", page, err)
	}
}
