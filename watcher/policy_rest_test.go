package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// A watcher at rest reads no policy (a farm of 1,000 agents polled its
// node 2,000 times a second doing nothing); one holding a message reads
// it every policyPoll, so a change still decides the held message.
func TestPolicyIsPolledOnlyWhileMessagesWait(t *testing.T) {
	was := policyPoll
	t.Cleanup(func() { policyPoll = was }) // last: after the watcher stopped
	policyPoll = time.Millisecond
	svc := transporttest.New(t)
	svc.Register(t, "w")
	apiServer := transport.NewServer(svc, transport.ServerOptions{Blobs: svc})
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/w/policy") {
			reads.Add(1)
		}
		apiServer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cl := client.NewClient(srv.URL, nil)
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: w\n  command: [sh, -c, 'echo answered']\n  context_messages: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(t, "the scheduler's first read of the policy", func() bool { return reads.Load() > 0 })
	at := reads.Load()
	// Hundreds of poll periods for a loop that polls at rest to show itself.
	time.Sleep(300 * time.Millisecond)
	if n := reads.Load(); n != at {
		t.Fatalf("a watcher holding no message read its policy %d more times", n-at)
	}
	if _, err := cl.SetPolicy(context.Background(), "w", api.PolicyRequest{Mode: api.PolicyQuiet}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(context.Background(), &api.Message{ID: "held-1", Channel: "dev", From: "bob", To: api.Recipients{"w"},
		Content: api.Content{Text: "hold me"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "polls while the quiet policy holds a message", func() bool { return reads.Load() > at+10 })
}
