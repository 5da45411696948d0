package system

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/mcpserver"
)

// mcpSession connects the SDK's client to a maos MCP server for agent,
// backed by node, over in-memory transports.
func mcpSession(t *testing.T, ctx context.Context, agent string, node *clustertest.Node) *mcp.ClientSession {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Config{Agent: agent, Client: node.Client, Channel: "ops", Version: "v0.0.0-test"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls tool and decodes its structured result into out; it fails
// the test on a protocol error or a tool error.
func mcpCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args, out any) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", tool, mcpText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, b, err)
	}
}

func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPRoundTrip drives the MCP server with the SDK's client against a
// 3-node cluster: another agent writes to claude; claude lists (titles, no
// bodies), reads (body, marked read) and replies (to the sender, in the
// thread); a bad id comes back as a tool error with the API's message.
func TestMCPRoundTrip(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	node := c.Follower()
	for _, id := range []string{"claude", "codex"} {
		if _, err := c.Leader().Client.RegisterAgent(ctx, api.RegisterAgentCommand{ID: id}); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
	cs := mcpSession(t, ctx, "claude", node)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		// No output schema: the listing costs the model context on every
		// turn, and the answer's JSON names its fields anyway.
		if tl.Description == "" || tl.InputSchema == nil || tl.OutputSchema != nil {
			t.Errorf("tool %s: description %q, input schema %v, output schema %v (want none)", tl.Name, tl.Description, tl.InputSchema, tl.OutputSchema)
		}
	}
	slices.Sort(names)
	want := []string{"complete_task", "create_task", "list_messages", "list_tasks", "lock", "read", "send_message", "share_artifact", "who"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %q, want %q", names, want)
	}

	// codex writes to claude through another node.
	m := clustertest.Msg("codex", "review", "the retry loop never backs off; see client.go:88")
	m.To, m.Title, m.Type, m.Priority = api.Recipients{"claude"}, "retry logic", "request", "high"
	sent, err := c.Leader().Client.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}

	var list mcpserver.ListOutput
	mcpCall(t, ctx, cs, mcpserver.ToolList, map[string]any{"unread": true, "channel": "review"}, &list)
	if len(list.Messages) != 1 {
		t.Fatalf("list_messages = %+v, want one message", list)
	}
	if it := list.Messages[0]; it.ID != sent.ID || it.Title != "retry logic" || it.From != "codex" || it.Priority != "high" || it.Read {
		t.Fatalf("list item = %+v, want %s 'retry logic' from codex, unread", it, sent.ID)
	}
	if raw, _ := json.Marshal(list); strings.Contains(string(raw), "never backs off") {
		t.Fatalf("list_messages leaks the body: %s", raw)
	}
	// A filter that matches nothing lists nothing.
	var none mcpserver.ListOutput
	mcpCall(t, ctx, cs, mcpserver.ToolList, map[string]any{"channel": "elsewhere"}, &none)
	if len(none.Messages) != 0 {
		t.Fatalf("list_messages channel=elsewhere = %+v", none)
	}

	before, err := node.Client.InboxCounts(ctx, "claude", api.Strong)
	if err != nil || before.Unread != 1 {
		t.Fatalf("counts before read = %+v, %v", before, err)
	}
	var read mcpserver.MessageOutput
	mcpCall(t, ctx, cs, mcpserver.ToolRead, map[string]any{"id": sent.ID}, &read)
	if read.Text != m.Content.Text || read.From != "codex" || read.Channel != "review" || !read.Read {
		t.Fatalf("read = %+v", read)
	}
	after, err := node.Client.InboxCounts(ctx, "claude", api.Strong)
	if err != nil || after.Unread != 0 || after.Total != 1 {
		t.Fatalf("counts after read = %+v, %v; want 0 unread of 1", after, err)
	}

	var reply mcpserver.SendOutput
	mcpCall(t, ctx, cs, mcpserver.ToolSend, map[string]any{"reply_to": sent.ID, "text": "added exponential backoff"}, &reply)
	got, err := c.Leader().Client.Message(ctx, reply.ID, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if got.From != "claude" || !slices.Equal(got.To, []string{"codex"}) || got.InReplyTo != sent.ID ||
		got.ThreadID != sent.ID || got.Channel != "review" || got.Title != "Re: retry logic" || got.Type != "response" {
		t.Fatalf("reply = %+v", got)
	}
	inbox, err := node.Client.Inbox(ctx, "codex", api.InboxQuery{Unread: true}, api.Strong)
	if err != nil || len(inbox.Messages) != 1 || inbox.Messages[0].ID != reply.ID {
		t.Fatalf("codex's inbox = %+v, %v; want the reply", inbox, err)
	}

	// send_message without a channel goes to the server's default (ops);
	// codex's own session lists the reply by its thread (the root's id).
	var note mcpserver.SendOutput
	mcpCall(t, ctx, cs, mcpserver.ToolSend, map[string]any{"to": []string{"codex"}, "text": "done", "title": "status"}, &note)
	if nm, err := node.Client.Message(ctx, note.ID, api.Strong); err != nil || nm.Channel != "ops" || nm.From != "claude" {
		t.Fatalf("send_message stored %+v, %v; want channel ops from claude", nm, err)
	}
	// private: true stores a private message, and a reply to it is private.
	var secret mcpserver.SendOutput
	mcpCall(t, ctx, cs, mcpserver.ToolSend, map[string]any{"to": []string{"codex"}, "text": "the key is in vault", "private": true}, &secret)
	if sm, err := node.Client.Message(ctx, secret.ID, api.Strong); err != nil || sm.Visibility != api.VisibilityPrivate {
		t.Fatalf("send_message private=true stored %+v, %v; want visibility private", sm, err)
	}
	codex := mcpSession(t, ctx, "codex", c.Leader())
	var secretReply mcpserver.SendOutput
	mcpCall(t, ctx, codex, mcpserver.ToolSend, map[string]any{"reply_to": secret.ID, "text": "got it"}, &secretReply)
	if rm, err := node.Client.Message(ctx, secretReply.ID, api.Strong); err != nil || rm.Visibility != api.VisibilityPrivate {
		t.Fatalf("a reply to a private message stored %+v, %v; want visibility private", rm, err)
	}
	var thread mcpserver.ListOutput
	mcpCall(t, ctx, codex, mcpserver.ToolList, map[string]any{"thread": sent.ID}, &thread)
	if len(thread.Messages) != 1 || thread.Messages[0].ID != reply.ID {
		t.Fatalf("codex list thread=%s = %+v; want only the reply", sent.ID, thread)
	}

	// Tool errors carry the API's message.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRead, Arguments: map[string]any{"id": "msg-nope"}})
	if err != nil {
		t.Fatalf("read unknown: protocol error %v", err)
	}
	if !res.IsError || !strings.Contains(mcpText(res), "read: ") || !strings.Contains(mcpText(res), "not_found") {
		t.Fatalf("read unknown = isError %v %q; want a not_found tool error", res.IsError, mcpText(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolSend, Arguments: map[string]any{"to": []string{"codex"}, "text": "x", "priority": "sky-high"}})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), "priority") {
		t.Fatalf("send bad priority = %v, %+v %q; want a tool error naming priority", err, res, mcpText(res))
	}

	// Locks: acquire, check, a second holder refused with the holder named, release.
	var lk mcpserver.LockOutput
	mcpCall(t, ctx, cs, mcpserver.ToolLock, map[string]any{"action": "acquire", "path": "src/retry.go", "ttl": "1m"}, &lk)
	if lk.Outcome != api.LockGranted || lk.Holder != "claude" || lk.Token == 0 {
		t.Fatalf("acquire = %+v", lk)
	}
	var chk mcpserver.LockOutput
	mcpCall(t, ctx, cs, mcpserver.ToolLock, map[string]any{"action": "check", "path": "src/retry.go", "token": lk.Token}, &chk)
	if chk.Outcome != "current" || chk.Holder != "claude" {
		t.Fatalf("check = %+v", chk)
	}
	res, err = codex.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolLock, Arguments: map[string]any{"action": "acquire", "path": "src/retry.go"}})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), "claude") {
		t.Fatalf("codex acquire held lock = %v, %q; want a tool error naming claude", err, mcpText(res))
	}
	var rel mcpserver.LockOutput
	mcpCall(t, ctx, cs, mcpserver.ToolLock, map[string]any{"action": "release", "path": "src/retry.go", "token": lk.Token}, &rel)
	if rel.Outcome != api.LockReleased {
		t.Fatalf("release = %+v", rel)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolLock, Arguments: map[string]any{"action": "steal", "path": "x"}})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), "steal") {
		t.Fatalf("bad action = %v, %q", err, mcpText(res))
	}

	// who lists the heartbeats the node knows of.
	if _, err := node.Client.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Source: api.SourceHook, Task: "backoff"}); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 10*time.Second, "codex's presence on the MCP server's node", func() bool {
		var who mcpserver.WhoOutput
		mcpCall(t, ctx, cs, mcpserver.ToolWho, map[string]any{}, &who)
		return slices.ContainsFunc(who.Agents, func(w mcpserver.WhoItem) bool {
			return w.Agent == "codex" && w.Task == "backoff" && w.Source == api.SourceHook
		})
	})
}
