package mcpserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(Config{Agent: "bad id", Client: transport.NewClient("127.0.0.1:1", nil)}); err == nil || !strings.Contains(err.Error(), "bad id") {
		t.Errorf("New with a bad agent id: %v", err)
	}
	if _, err := New(Config{Agent: "claude"}); err == nil {
		t.Error("New without a client: nil error")
	}
}

// TestToolsAreSmall lists the tools and bounds what their definitions cost
// the model: six tools, each with a short description and input schema.
func TestToolsAreSmall(t *testing.T) {
	ctx := context.Background()
	cs := connectTo(t, "claude", "127.0.0.1:1") // no node there
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 6 {
		t.Fatalf("%d tools, want 6", len(res.Tools))
	}
	total := 0
	for _, tl := range res.Tools {
		b, _ := json.Marshal(tl)
		total += len(b)
		if len(tl.Description) > 80 || tl.InputSchema == nil {
			t.Errorf("tool %s: description %q (max 80), input schema %v", tl.Name, tl.Description, tl.InputSchema)
		}
	}
	if total > 8000 {
		t.Errorf("tool definitions are %d bytes of JSON, want at most 8000", total)
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

// connect serves the tools of agent against a fake one-node cluster and
// returns the client session.
func connect(t *testing.T, agent string) *mcp.ClientSession {
	t.Helper()
	hs := httptest.NewServer(transport.NewServer(transporttest.New(t), transport.ServerOptions{}))
	t.Cleanup(hs.Close)
	return connectTo(t, agent, hs.Listener.Addr().String())
}

// connectTo serves the tools of agent against the node at addr and
// returns the client session; both ends close when the test ends.
func connectTo(t *testing.T, agent, addr string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv, err := New(Config{Agent: agent, Client: transport.NewClient(addr, nil)})
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
