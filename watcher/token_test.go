package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api/client"
)

// An agent with token_file speaks with its own token; one without uses
// the watcher's client as given.
func TestRunUsesEachAgentsToken(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "a.token")
	if err := os.WriteFile(tokFile, []byte("maos_secret-of-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{} // agent in the path → Authorization values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first thing a watcher does is ask for its agent's lease
		// (agentlease.go), then register the agent.
		var reg struct {
			ID string `json:"id"`
		}
		agent, isLease := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/agents/"), "/lease")
		switch {
		case r.Method == http.MethodPost && isLease && !strings.Contains(agent, "/"):
		case r.Method == http.MethodPost && r.URL.Path == "/v1/agents" && json.NewDecoder(r.Body).Decode(&reg) == nil:
			agent = reg.ID
		default:
			agent = ""
		}
		if agent != "" {
			mu.Lock()
			seen[agent] = append(seen[agent], r.Header.Get("Authorization"))
			mu.Unlock()
		}
		http.Error(w, `{"error":{"code":"unavailable","message":"test"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	f, err := Parse([]byte("agents:\n- {id: a, command: [x], token_file: " + tokFile + "}\n- {id: b, command: [x]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: client.NewClient(srv.URL, nil), Logger: slog.New(slog.DiscardHandler),
			BackoffBase: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		na, nb := len(seen["a"]), len(seen["b"])
		mu.Unlock()
		if na > 0 && nb > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no requests for both agents within 5s: %v", seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, h := range seen["a"] {
		if h != "Bearer maos_secret-of-a" {
			t.Errorf("a request for agent a carried Authorization %q, want its token", h)
		}
	}
	for _, h := range seen["b"] {
		if h != "" {
			t.Errorf("a request for agent b carried Authorization %q, want none", h)
		}
	}
}

func TestRunRefusesBadTokenFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	two := filepath.Join(dir, "two")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(two, []byte("tok1\ntok2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{empty, "is empty"},
		{two, "one token on one line"},
	} {
		f, err := Parse([]byte("agents:\n- {id: a, command: [x]}\n- {id: b, command: [x], token_file: " + tc.file + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = Run(context.Background(), f, Options{Client: client.NewClient("127.0.0.1:1", nil), Logger: slog.New(slog.DiscardHandler)})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "agents[1].token_file" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token_file %s: Run = %v, want a ConfigError on agents[1].token_file saying %q", tc.file, err, tc.want)
		}
	}
}
