package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/dialect"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

const adminSecret = "admin-bootstrap-0123456789abcdef"

// node is a one-node cluster behind a loopback API, with its state.
type node struct {
	svc *transporttest.Service
	url string
}

// newNode serves the API with opts; wrap, if not nil, stands in front of
// it (to fake answers). The agents the tests' files and messages are to
// (claude, bob) are registered: a message may name only agents someone
// answers to.
func newNode(t *testing.T, opts transport.ServerOptions, wrap func(http.Handler) http.Handler) *node {
	t.Helper()
	svc := transporttest.New(t)
	svc.Register(t, "claude", "bob")
	var h http.Handler = transport.NewServer(svc, opts)
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &node{svc: svc, url: hs.URL}
}

func (n *node) client(token string) *client.Client {
	return client.NewClient(n.url, nil).WithToken(token)
}

// channelDir writes count channel files from sender into a fresh
// ch/ folder and returns the import root.
func channelDir(t *testing.T, sender string, count int) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range count {
		body := fmt.Sprintf(`{"id":"msg-%d","timestamp":"2026-01-11T16:33:0%dZ","from":%q,"to":"claude","content":"note %d"}`, i, i, sender, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("msg-%d.json", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// refuseSends is a wrap for newNode: it lets the first ok sends (POST
// /v1/messages) through and answers every later one with status and an
// API error (code, message), counting every send in *sends. A 429 says
// Retry-After: 0.
func refuseSends(sends *int, ok, status int, code, message string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/messages" {
				if *sends++; *sends > ok {
					if status == http.StatusTooManyRequests {
						w.Header().Set("Retry-After", "0")
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, message)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
}

// stored counts the messages in the node's state.
func (n *node) stored(t *testing.T) int {
	t.Helper()
	p, err := n.svc.State().MessagesAfter(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Messages)
}

// A send over the node's rate waits as Retry-After says and goes on: no
// file is skipped for it.
func TestImportWaitsOutTheSendRate(t *testing.T) {
	n := newNode(t, transport.ServerOptions{Limits: transport.Limits{SendRate: 1, SendBurst: 1}}, nil)
	start := time.Now()
	rep, err := Import(context.Background(), n.client(""), channelDir(t, "codex", 3), dialect.Options{})
	if err != nil {
		t.Fatalf("import: %v (report %+v)", err, rep)
	}
	if imported, _ := rep.Counts(); imported != 3 || len(rep.Skipped) != 0 {
		t.Errorf("report %+v, want 3 imported, none skipped", rep)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("took %s: the 429s were not waited out", took)
	}
	if got := n.stored(t); got != 3 {
		t.Errorf("%d stored, want 3", got)
	}
}

// The wait is bounded: a node asking for a long one, or answering 429
// again and again, stops the import with the error; no file is skipped.
func TestImportRateWaitIsBounded(t *testing.T) {
	n := newNode(t, transport.ServerOptions{Limits: transport.Limits{SendRate: 0.01, SendBurst: 1}}, nil)
	rep, err := Import(context.Background(), n.client(""), channelDir(t, "codex", 3), dialect.Options{})
	if !errors.Is(err, api.ErrRateLimited) || !strings.Contains(err.Error(), "asks to wait") {
		t.Fatalf("import against a slow rate: %v, want a rate-limit error saying the wait asked", err)
	}
	// One imported: had it waited out the node's 100 s, the second file
	// would have gone in before the third's 429.
	if imported, _ := rep.Counts(); imported != 1 || len(rep.Skipped) != 0 {
		t.Errorf("report %+v, want 1 imported, none skipped", rep)
	}

	tries := 0
	n = newNode(t, transport.ServerOptions{}, refuseSends(&tries, 0, http.StatusTooManyRequests, "rate_limited", "over the send rate"))
	rep, err = Import(context.Background(), n.client(""), channelDir(t, "codex", 3), dialect.Options{})
	if !errors.Is(err, api.ErrRateLimited) || !strings.Contains(err.Error(), "after 11 tries") {
		t.Fatalf("import against a node always at its rate: %v", err)
	}
	if tries != rateRetries+1 || len(rep.Skipped) != 0 || len(rep.Imported) != 0 {
		t.Errorf("%d tries, report %+v; want %d tries and nothing skipped", tries, rep, rateRetries+1)
	}
}

// A token the node does not take stops the import at the first request,
// not one skipped file at a time; so does one it stops taking midway.
func TestImportStopsOnUnauthorized(t *testing.T) {
	n := newNode(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}}, nil)
	rep, err := Import(context.Background(), n.client("maos_not-a-token"), channelDir(t, "codex", 3), dialect.Options{})
	if !errors.Is(err, api.ErrUnauthorized) || rep == nil || len(rep.Skipped) != 0 || len(rep.Imported) != 0 {
		t.Fatalf("import with a bad token: %v, report %+v; want a 401 error and nothing skipped", err, rep)
	}

	sends := 0
	n = newNode(t, transport.ServerOptions{}, refuseSends(&sends, 1, http.StatusUnauthorized, "unauthorized", "the bearer token was revoked"))
	rep, err = Import(context.Background(), n.client(""), channelDir(t, "codex", 3), dialect.Options{})
	if !errors.Is(err, api.ErrUnauthorized) || len(rep.Skipped) != 0 || len(rep.Imported) != 1 || sends != 2 {
		t.Fatalf("token revoked midway: %v, report %+v, %d sends; want the error after 2 sends, 1 imported, none skipped", err, rep, sends)
	}
}

// A token that may not send as a file's sender stops the import before
// anything is sent; the same token imports files of its own agent.
func TestImportNeedsATokenForEverySender(t *testing.T) {
	n := newNode(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}}, nil)
	const codexSecret = "maos_codex-0123456789"
	if _, err := n.svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: "tok-codex", Agent: "codex", Role: api.TokenRoleAgent, Hash: fsm.HashToken(codexSecret)}); err != nil {
		t.Fatal(err)
	}
	root := channelDir(t, "codex", 2)
	other := `{"id":"msg-9","timestamp":"2026-01-11T16:33:09Z","from":"claude","to":"codex","content":"mine"}`
	if err := os.WriteFile(filepath.Join(root, "ch", "msg-9.json"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Import(context.Background(), n.client(codexSecret), root, dialect.Options{})
	if err == nil || !strings.Contains(err.Error(), "ch/msg-9.json: its sender is claude, but the token speaks for agent codex") ||
		!strings.Contains(err.Error(), "needs an admin token") || len(rep.Imported) != 0 || len(rep.Skipped) != 0 {
		t.Fatalf("import with codex's token: %v, report %+v", err, rep)
	}
	if got := n.stored(t); got != 0 {
		t.Errorf("%d stored, want none", got)
	}
	if err := os.Remove(filepath.Join(root, "ch", "msg-9.json")); err != nil {
		t.Fatal(err)
	}
	if rep, err := Import(context.Background(), n.client(codexSecret), root, dialect.Options{}); err != nil || len(rep.Imported) != 2 {
		t.Fatalf("codex imports its own files: %v, %+v", err, rep)
	}
}

// What refuses a file, not the caller, still skips that file alone: the
// rules (403), a secret (422).
func TestImportSkipsFilesTheClusterRefuses(t *testing.T) {
	n := newNode(t, transport.ServerOptions{}, nil)
	if _, err := n.svc.ApplyCommand(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden: []rules.ForbiddenRule{{From: "qc-1", To: "*", Reason: "qc reports go to the lead"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "gemini", Role: "agent"}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "agent-os-paper")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"msg-1.json": `{"from":"qc-1","to":"gemini","content":"phase 1 done"}`,
		"msg-2.json": `{"from":"codex","to":"claude","content":"the key is ghp_` + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k" + `"}`,
		"msg-3.json": `{"from":"codex","to":"claude","content":"fine"}`,
		"msg-4.json": `{"from":"codex","to":"gone","content":"to an agent of the old farm"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Import(context.Background(), n.client(""), root, dialect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.File] = s.Reason
	}
	if len(rep.Imported) != 1 || !strings.Contains(reasons["agent-os-paper/msg-1.json"], "qc reports go to the lead") ||
		!strings.Contains(reasons["agent-os-paper/msg-2.json"], "content.text holds a secret (gitleaks rule github-pat)") ||
		!strings.Contains(reasons["agent-os-paper/msg-4.json"], `agent "gone" (not registered, never sent)`) {
		t.Errorf("report %+v, want msg-3 imported, msg-1 (rules), msg-2 (secret) and msg-4 (no agent gone) skipped", rep)
	}
	// A farm importing mail to agents it does not run (yet) lets names no
	// one answers to through for the import.
	if _, err := n.svc.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "unknown_recipients", Value: json.RawMessage(`"accept"`)}); err != nil {
		t.Fatal(err)
	}
	rep, err = Import(context.Background(), n.client(""), root, dialect.Options{})
	var fresh []string
	for _, im := range rep.Imported {
		if !im.Already {
			fresh = append(fresh, im.File)
		}
	}
	if err != nil || len(fresh) != 1 || fresh[0] != "agent-os-paper/msg-4.json" {
		t.Errorf("import under unknown_recipients accept: %+v, %v; want msg-4 imported", rep, err)
	}
}
