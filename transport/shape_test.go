package transport_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// What apply decodes is bounded and refused before it is proposed: JSON
// nested past api.MaxJSONDepth (Go's decoder gives up at 10,000, so such an
// entry used to commit and then fail on every node), invalid UTF-8, and
// control characters in titles and ids. The 400 names the field; nothing
// reaches the log.
func TestShapeRefusedBeforeProposal(t *testing.T) {
	svc := transporttest.New(t)
	url := agentsServer(t, svc, transport.ServerOptions{MaxMessageBytes: 1 << 20}, "alice", "bob")
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	msg := func(extra string) string {
		return `{"from":"alice","to":"bob","channel":"ops","content":{"text":"hi"}` + extra + `}`
	}
	for _, c := range []struct{ name, path, body, want string }{
		{"metadata 9998 deep", "/v1/messages", msg(`,"metadata":` + deep(9998)), "metadata: JSON nested 9998 deep, at most 64"},
		{"metadata 65 deep", "/v1/messages", msg(`,"metadata":` + deep(65)), "metadata: JSON nested 65 deep, at most 64"},
		{"metadata not UTF-8", "/v1/messages", msg(`,"metadata":{"a":"` + "\xff\xfe" + `"}`), "metadata: not valid UTF-8"},
		{"task context deep", "/v1/tasks", `{"from":"alice","to":"bob","title":"t","context":` + deep(100) + `}`, "context: JSON nested 100 deep, at most 64"},
		{"task title escape", "/v1/tasks", `{"from":"alice","to":"bob","title":"a\u001b[2Jb"}`, "title: control character U+001B"},
		{"approval title escape", "/v1/approvals", `{"from":"alice","approvers":["bob"],"title":"ok\u001b]0;pwned\u0007","action":{"x":1}}`, "title: control character U+001B"},
		{"message title C1 control", "/v1/messages", msg(`,"tags":["a"],"title":"x\u009bm"`), "title"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(svc.CallsTo("Apply"))
			m := wantError(t, do(t, "POST", url+c.path, c.body, nil), http.StatusBadRequest, api.CodeInvalid)
			if !strings.Contains(m, c.want) {
				t.Errorf("refusal %q, want %q", m, c.want)
			}
			if n := len(svc.CallsTo("Apply")) - before; n != 0 {
				t.Errorf("%d proposals after the refusal", n)
			}
		})
	}
	// At the bound it is stored, and reads back.
	var res api.SendResponse
	wantOK(t, do(t, "POST", url+"/v1/messages", msg(`,"id":"m-deep","metadata":`+deep(api.MaxJSONDepth)), nil), &res)
	var m api.Message
	wantOK(t, do(t, "GET", url+"/v1/messages/m-deep", "", nil), &m)
	if len(m.Metadata) == 0 {
		t.Errorf("stored message has no metadata")
	}
}

// agentsServer serves the one-node API of svc with opts (its logger
// discarded), after registering agents; it returns the server's URL.
func agentsServer(t *testing.T, svc *transporttest.Service, opts transport.ServerOptions, agents ...string) string {
	t.Helper()
	for _, a := range agents {
		if _, err := svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: a}); err != nil {
			t.Fatal(err)
		}
	}
	opts.Logger = discard
	hs := httptest.NewServer(transport.NewServer(svc, opts))
	t.Cleanup(hs.Close)
	return hs.URL
}
