package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(Config{Agent: "bad id", Client: client.NewClient("127.0.0.1:1", nil), Version: "v1"}); err == nil || !strings.Contains(err.Error(), "bad id") {
		t.Errorf("New with a bad agent id: %v", err)
	}
	if _, err := New(Config{Agent: "claude", Version: "v1"}); err == nil {
		t.Error("New without a client: nil error")
	}
	if _, err := New(Config{Agent: "claude", Client: client.NewClient("127.0.0.1:1", nil)}); err == nil {
		t.Error("New without a version: nil error")
	}
}

// listingBudget bounds what the tool listing costs a model on every turn
// (issue 29): 11 tools listed 8,450 bytes (3,412 of input schemas) before
// the merges and without output schemas.
const listingBudget = 6000

// TestToolsAreSmall lists the tools with the SDK's client over its
// in-memory transport and bounds what their definitions cost the model.
// What is counted, for each tool of tools/list as the client decodes it:
//
//   - schema: the bytes of encoding/json's encoding of its inputSchema
//     (compact, no indentation);
//   - text: the bytes of its name plus those of its description;
//   - listing: the bytes of the encoding of the whole tool object (name,
//     description, inputSchema and any outputSchema or annotations),
//     which is what a client passes on to its model.
//
// The sums over the tools of schema and of listing must each be at most
// listingBudget; the test logs all three (go test -v).
func TestToolsAreSmall(t *testing.T) {
	ctx := context.Background()
	cs := session(t, "127.0.0.1:1", "claude") // no node there
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 9 {
		t.Fatalf("%d tools, want 9", len(res.Tools))
	}
	schema, text, listing := 0, 0, 0
	for _, tl := range res.Tools {
		in, _ := json.Marshal(tl.InputSchema)
		all, _ := json.Marshal(tl)
		schema, text, listing = schema+len(in), text+len(tl.Name)+len(tl.Description), listing+len(all)
		if len(tl.Description) > 80 || tl.InputSchema == nil || tl.OutputSchema != nil {
			t.Errorf("tool %s: description %q (max 80), input schema %v, output schema %v (want none)", tl.Name, tl.Description, tl.InputSchema, tl.OutputSchema)
		}
	}
	t.Logf("%d tools: input schemas %d bytes, names and descriptions %d, the whole listing %d", len(res.Tools), schema, text, listing)
	if schema > listingBudget || listing > listingBudget {
		t.Errorf("input schemas %d bytes, whole listing %d: want each at most %d", schema, listing, listingBudget)
	}
	// A node that cannot be reached is a tool error, not a protocol error.
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolWho, Arguments: map[string]any{}})
	if err != nil || !r.IsError {
		t.Fatalf("who with no node = %v, %+v; want a tool error", err, r)
	}
	// In the words maosctl uses (transport.UnreachableError), not a raw
	// dial error.
	if txt, want := r.Content[0].(*mcp.TextContent).Text, "who: cannot reach a maos node at http://127.0.0.1:1 (connection refused): is maosd running there?"; txt != want {
		t.Errorf("who error %q, want %q", txt, want)
	}
	// A limit over the maximum is refused before any request.
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolList, Arguments: map[string]any{"limit": 500}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "at most 100") {
		t.Fatalf("list limit 500 = %v, %+v", err, r)
	}
}

// send_message takes to as a string or a list, as the HTTP API does; with
// reply_to and no to it answers the parent's sender in its thread (what
// reply_to_message did).
func TestSendToStringOrListAndReply(t *testing.T) {
	addr := serveFake(t, "codex", "claude")
	claude, codex := session(t, addr, "claude"), session(t, addr, "codex")
	for _, to := range []any{"codex", []string{"codex"}} {
		var sent SendOutput
		if e := call(t, claude, ToolSend, map[string]any{"to": to, "text": "hi", "title": "retry", "channel": "review"}, &sent); e != "" {
			t.Fatalf("send_message to %#v: %s", to, e)
		}
		var got MessageOutput
		if e := call(t, codex, ToolRead, map[string]any{"id": sent.ID}, &got); e != "" || len(got.To) != 1 || got.To[0] != "codex" || !got.Read {
			t.Fatalf("send_message to %#v stored %+v, %s", to, got, e)
		}
		var re SendOutput
		if e := call(t, codex, ToolSend, map[string]any{"reply_to": sent.ID, "text": "done"}, &re); e != "" {
			t.Fatalf("reply: %s", e)
		}
		var r MessageOutput
		if e := call(t, claude, ToolRead, map[string]any{"id": re.ID}, &r); e != "" || len(r.To) != 1 || r.To[0] != "claude" ||
			r.Channel != "review" || r.Thread != sent.ID || r.InReplyTo != sent.ID || r.Title != "Re: retry" || r.Type != "response" {
			t.Fatalf("reply stored %+v, %s", r, e)
		}
	}
	for _, args := range []map[string]any{{"to": 7, "text": "x"}, {"to": []any{1}, "text": "x"}} {
		if e := call(t, claude, ToolSend, args, &SendOutput{}); e == "" {
			t.Errorf("send_message %v: no error", args)
		}
	}
	if e := call(t, claude, ToolSend, map[string]any{"text": "to nobody"}, &SendOutput{}); !strings.Contains(e, "give to") {
		t.Errorf("send_message without to or reply_to: %q", e)
	}
}

// connect serves the tools of agent against a fake one-node cluster and
// returns the client session.
func connect(t *testing.T, agent string) *mcp.ClientSession {
	t.Helper()
	return session(t, serveFake(t), agent)
}

// serveFake serves the API of a fake one-node cluster, with agents
// registered (those the test addresses), and returns its address.
func serveFake(t *testing.T, agents ...string) string {
	t.Helper()
	svc := transporttest.New(t)
	svc.Register(t, agents...)
	hs := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Blobs: svc}))
	t.Cleanup(hs.Close)
	return hs.Listener.Addr().String()
}

// session serves the tools of agent against the node at addr and returns
// the client session.
func session(t *testing.T, addr, agent string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv, err := New(Config{Agent: agent, Client: client.NewClient(addr, nil), Version: "v1.2.3-test"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A message holding a secret is a tool error that names the field and the
// detection rule, as the API does, and never repeats the secret.
func TestSendWithSecretIsToolError(t *testing.T) {
	cs := connect(t, "claude")
	pat := "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolSend,
		Arguments: map[string]any{"to": []string{"codex"}, "text": "push with " + pat}})
	if err != nil || !r.IsError {
		t.Fatalf("send with a secret = %v, %+v; want a tool error", err, r)
	}
	txt := r.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(txt, "content.text holds a secret (gitleaks rule github-pat)") || strings.Contains(txt, pat) {
		t.Errorf("tool error %q: want the field and rule, not the secret", txt)
	}
}

// call calls tool with args and decodes its structured result into out,
// or returns the tool error's text.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if r.IsError {
		return r.Content[0].(*mcp.TextContent).Text
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", tool, b, err)
	}
	return ""
}

// The task tools: lead delegates, rita finishes in one call (claiming the
// ready task first), lead lists the outcome; what is not rita's to finish
// is a tool error in the API's words.
func TestTaskTools(t *testing.T) {
	addr := serveFake(t, "rita", "bob")
	lead, rita := session(t, addr, "lead"), session(t, addr, "rita")
	var created TaskOutput
	if e := call(t, lead, ToolCreateTask, map[string]any{"to": "rita", "title": "review PR 12", "description": "in #review"}, &created); e != "" {
		t.Fatal(e)
	}
	if !strings.HasPrefix(created.ID, "task-") || !strings.Contains(created.ID, "-lead-") || created.State != "ready" {
		t.Fatalf("create_task = %+v", created)
	}
	var other TaskOutput
	if e := call(t, lead, ToolCreateTask, map[string]any{"to": "bob", "title": "not rita's", "depends_on": []string{created.ID}}, &other); e != "" || other.State != "waiting" {
		t.Fatalf("create_task with a dependency = %+v, %q", other, e)
	}
	var list ListTasksOutput
	if e := call(t, rita, ToolListTasks, map[string]any{"to": "rita", "state": "ready"}, &list); e != "" || len(list.Tasks) != 1 ||
		list.Tasks[0].ID != created.ID || list.Tasks[0].From != "lead" || list.HasMore {
		t.Fatalf("list_tasks = %+v, %q", list, e)
	}
	if e := call(t, rita, ToolCompleteTask, map[string]any{"id": created.ID, "status": "done", "result": "x"}, &TaskOutput{}); !strings.Contains(e, "status") {
		t.Errorf("complete_task with a bad status: %q", e)
	}
	if e := call(t, rita, ToolCompleteTask, map[string]any{"id": other.ID, "result": "x"}, &TaskOutput{}); !strings.Contains(e, "complete_task: claim:") || !strings.Contains(e, "(forbidden)") {
		t.Errorf("complete_task of another's task: %q", e)
	}
	var done TaskOutput
	if e := call(t, rita, ToolCompleteTask, map[string]any{"id": created.ID, "result": "LGTM", "confidence": 0.9}, &done); e != "" || done.State != "succeeded" {
		t.Fatalf("complete_task = %+v, %q", done, e)
	}
	// The dependent is ready now: bob, its assignee, ends it as failed.
	bob := session(t, addr, "bob")
	var failed TaskOutput
	if e := call(t, bob, ToolCompleteTask, map[string]any{"id": other.ID, "status": "failure", "result": "no", "error": "CI is red"}, &failed); e != "" || failed.State != "failed" {
		t.Fatalf("complete_task failure = %+v, %q", failed, e)
	}
	if e := call(t, lead, ToolListTasks, map[string]any{"from": "lead", "limit": 1}, &list); e != "" || len(list.Tasks) != 1 || !list.HasMore ||
		list.Tasks[0].Status != "success" || list.NextAfter == 0 {
		t.Fatalf("list_tasks page 1 = %+v, %q", list, e)
	}
	if e := call(t, lead, ToolListTasks, map[string]any{"from": "lead", "after": list.NextAfter}, &list); e != "" || len(list.Tasks) != 1 ||
		list.Tasks[0].ID != other.ID || list.Tasks[0].Status != "failure" || list.HasMore {
		t.Fatalf("list_tasks page 2 = %+v, %q", list, e)
	}
	if e := call(t, lead, ToolListTasks, map[string]any{"limit": 500}, &list); !strings.Contains(e, "at most 100") {
		t.Errorf("list_tasks limit 500: %q", e)
	}
	if e := call(t, lead, ToolListTasks, map[string]any{"state": "done"}, &list); !strings.Contains(e, "state") {
		t.Errorf("list_tasks bad state: %q", e)
	}
}

// complete_task with requires_approval: the task awaits an approval of
// the proposed action by its creator, whose id the tool answers and
// list_tasks shows; an action with another status is refused.
func TestCompleteTaskRequiresApproval(t *testing.T) {
	svc := transporttest.New(t)
	svc.Register(t, "rita")
	// Once armed, the reads of a task after a completion fail.
	var armed, completed atomic.Bool
	apiServer := transport.NewServer(svc, transport.ServerOptions{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if armed.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/complete") {
			defer completed.Store(true)
		}
		if completed.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/tasks/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"no leader"}}`))
			return
		}
		apiServer.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	addr := hs.Listener.Addr().String()
	lead, rita := session(t, addr, "lead"), session(t, addr, "rita")
	var created TaskOutput
	if e := call(t, lead, ToolCreateTask, map[string]any{"to": "rita", "title": "ship v2.3"}, &created); e != "" {
		t.Fatal(e)
	}
	if e := call(t, rita, ToolCompleteTask, map[string]any{"id": created.ID, "result": "x", "proposed_action": map[string]any{"cmd": "deploy"}}, &TaskOutput{}); !strings.Contains(e, "proposed_action") {
		t.Errorf("complete_task success with an action: %q", e)
	}
	var done TaskOutput
	if e := call(t, rita, ToolCompleteTask, map[string]any{"id": created.ID, "status": "requires_approval", "result": "ready",
		"proposed_action": map[string]any{"version": "2.3", "cmd": "deploy"}}, &done); e != "" || done.State != api.TaskAwaitingApproval || done.ApprovalID == "" {
		t.Fatalf("complete_task requires_approval = %+v, %q", done, e)
	}
	a, err := svc.State().Approval(done.ApprovalID)
	if err != nil || string(a.Action) != `{"cmd":"deploy","version":"2.3"}` || a.From != "rita" || len(a.Approvers) != 1 || a.Approvers[0] != "lead" || a.TaskID != created.ID {
		t.Errorf("its approval %+v, %v", a, err)
	}
	var list ListTasksOutput
	if e := call(t, lead, ToolListTasks, map[string]any{"state": "awaiting_approval"}, &list); e != "" || len(list.Tasks) != 1 ||
		list.Tasks[0].ApprovalID != done.ApprovalID {
		t.Errorf("list_tasks awaiting_approval = %+v, %q", list, e)
	}
	// The completion applied but the task cannot be read back: the tool
	// says so rather than answer without the approval.
	if e := call(t, lead, ToolCreateTask, map[string]any{"to": "rita", "title": "t"}, &created); e != "" {
		t.Fatal(e)
	}
	armed.Store(true)
	if e := call(t, rita, ToolCompleteTask, map[string]any{"id": created.ID, "status": "requires_approval", "result": "x"}, &TaskOutput{}); !strings.Contains(e, "reading its approval failed") ||
		!strings.Contains(e, "no leader") {
		t.Errorf("complete_task, the task unreadable afterwards: %q", e)
	}
}

// send_message to a name no agent answers to is a tool error in the API's
// words: the name, the closest known one and what to do.
func TestSendToUnknownName(t *testing.T) {
	cs := session(t, serveFake(t, "supervisor"), "lead")
	var sent SendOutput
	e := call(t, cs, ToolSend, map[string]any{"to": []string{"supervsior"}, "text": "status?"}, &sent)
	for _, want := range []string{`agent "supervsior" (not registered, never sent; did you mean supervisor?)`, "unknown_recipients accept"} {
		if !strings.Contains(e, want) {
			t.Errorf("send_message to supervsior: %q, want a tool error saying %q", e, want)
		}
	}
}
