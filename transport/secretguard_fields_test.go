package transport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// The guard covers every free text a command stores, as fsm's one table
// declares it, on every route: each request below carries a secret in one
// field only, and is refused naming that field, with nothing proposed.
func TestSecretGuardCoversEveryFreeText(t *testing.T) {
	svc := transporttest.New(t)
	url := agentsServer(t, svc, transport.ServerOptions{Blobs: svc}, "alice", "bob")
	call := func(method, path, body string) reply { return do(t, method, url+path, body, nil) }

	// A task bob holds, for the claimant's reports.
	wantOK(t, call("POST", "/v1/tasks", `{"id":"t-1","from":"alice","to":"bob","title":"build"}`), nil)
	var claim api.TaskResult
	wantOK(t, call("POST", "/v1/tasks/t-1/claim", `{"agent":"bob"}`), &claim)
	pat := fakeGitHubPAT
	msg := func(extra string) string {
		return `{"from":"alice","to":"bob","channel":"ops","content":{"text":"hi"}` + extra + `}`
	}
	report := func(field string) string {
		return fmt.Sprintf(`{"agent":"bob","fence":%d,%s}`, claim.Fence, field)
	}
	for _, c := range []struct {
		method, path, body, field string
	}{
		{"POST", "/v1/messages", msg(`,"metadata":{"k":{"deep":"` + pat + `"}}`), "metadata"},
		{"POST", "/v1/messages", msg(`,"tags":["ok","` + strings.ToLower("x") + `"],"correlation_id":"` + pat + `"`), "correlation_id"},
		{"POST", "/v1/messages", `{"id":"` + pat + `","from":"alice","to":"bob","channel":"ops","content":{"text":"hi"}}`, "id"},
		{"POST", "/v1/tasks", `{"from":"alice","to":"bob","title":"t","context":{"env":"` + pat + `"}}`, "context"},
		{"POST", "/v1/tasks/t-1/progress", report(`"message":"using ` + pat + `"`), "message"},
		{"POST", "/v1/tasks/t-1/handoff", report(`"to":"alice","reason":"token ` + pat + `"`), "reason"},
		{"POST", "/v1/tasks/t-1/complete", report(`"completion":{"status":"failure","error":{"error_type":"auth","error_message":"bad ` + pat + `"}}`), "completion.error.error_message"},
		{"POST", "/v1/tasks/t-1/complete", report(`"completion":{"status":"success","outputs":["out ` + pat + `"]}`), "completion.outputs[0]"},
		{"POST", "/v1/tasks/t-1/complete", report(`"completion":{"status":"success","actions_taken":[{"cmd":"git push ` + pat + `"}]}`), "completion.actions_taken[0]"},
		{"PUT", "/v1/bulletin?by=alice", `{"note":"` + pat + `"}`, "bulletin"},
		{"POST", "/v1/locks", `{"path":"keys/` + pat + `","holder":"alice","ttl":"30s"}`, "path"},
		{"POST", "/v1/agents", `{"id":"carol","description":"my key is ` + pat + `"}`, "description"},
		{"PUT", "/v1/artifacts?from=alice&name=" + pat + ".txt", "plain bytes", "name"},
		{"PUT", "/v1/artifacts?from=alice&name=env.txt", "export GITHUB_TOKEN=" + pat + "\n", "content"},
	} {
		t.Run(c.field, func(t *testing.T) {
			before := len(svc.CallsTo("Apply"))
			m := wantError(t, call(c.method, c.path, c.body), http.StatusUnprocessableEntity, api.CodeSecretFound)
			if !strings.HasPrefix(m, c.field+" holds a secret (gitleaks rule github-pat)") {
				t.Errorf("refusal %q, want it to name %s", m, c.field)
			}
			if strings.Contains(m, pat) {
				t.Errorf("the refusal echoes the secret: %q", m)
			}
			for _, call := range svc.CallsTo("Apply")[before:] {
				if api.Op(call.Arg) != api.OpAuditDenial {
					t.Errorf("%s proposed after the refusal", call.Arg)
				}
			}
		})
	}
	// Nothing of the secret reached the state.
	tasks, err := svc.State().Tasks(api.TaskQuery{})
	dump, _ := json.Marshal(tasks)
	if err != nil || strings.Contains(string(dump), pat) {
		t.Errorf("tasks hold the secret: %s %v", dump, err)
	}
}
