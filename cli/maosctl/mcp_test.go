package maosctl

import (
	"bufio"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

func TestMCPRequiresAgent(t *testing.T) {
	e := newTestEnv(t)
	r := e.run("", "mcp")
	if r.err == nil || !strings.Contains(r.errOut+r.err.Error(), "--agent") {
		t.Fatalf("mcp without --agent: err=%v stderr=%q; want a usage error naming --agent", r.err, r.errOut)
	}
	r = e.run("", "mcp", "--agent", "not a name")
	if r.err == nil || !strings.Contains(r.errOut+r.err.Error(), "not a valid agent id") {
		t.Fatalf("mcp --agent 'not a name': err=%v stderr=%q", r.err, r.errOut)
	}
}

// TestMCPSpeaksProtocol runs the command with JSON-RPC on its input
// and reads the answers: initialize (its serverInfo version is the one
// --version prints), tools/list, and a tools/call against the fake node;
// closing the input ends it cleanly.
func TestMCPSpeaksProtocol(t *testing.T) {
	e := newTestEnv(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	app := App()
	app.Reader, app.Writer, app.ErrWriter = inR, outW, io.Discard
	done := make(chan error, 1)
	go func() {
		done <- app.Run([]string{"maosctl", "--addr", e.addr, "mcp", "--agent", "claude"})
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	call := func(req string, id int) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, req+"\n"); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			var resp struct {
				ID     int            `json:"id"`
				Result map[string]any `json:"result"`
			}
			if json.Unmarshal(lines.Bytes(), &resp) == nil && resp.ID == id {
				return resp.Result
			}
		}
		t.Fatalf("no answer to %s", req)
		return nil
	}
	res := call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, 1)
	if v, _ := res["serverInfo"].(map[string]any)["version"].(string); v == "" || !strings.HasPrefix(versionOutput(t), "maosctl version "+v+" (") {
		t.Errorf("the MCP server's version %q is not the one maosctl --version prints: %q", v, versionOutput(t))
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	res = call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 2)
	var names []string
	for _, tl := range res["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	if want := []string{"complete_task", "create_task", "list_messages", "list_tasks", "lock", "read", "send_message", "share_artifact", "who"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %q, want %q", names, want)
	}
	res = call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"id":"msg-unknown"}}}`, 3)
	if res["isError"] != true {
		t.Fatalf("read of an unknown id = %v; want a tool error", res)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp after stdin closed: %v", err)
		}
	case <-time.After(time.Until(testenv.Deadline(t))):
		t.Fatal("mcp did not end after its input closed")
	}
}
