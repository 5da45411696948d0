package watcher

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// renewNode is a node whose lease renewal requests the test sees and may
// change: batch counts the renewals of each POST /v1/leases/renew, single
// the lone renewals; rewrite (if set) edits a batch's answer.
type renewNode struct {
	cl      *client.Client
	mu      sync.Mutex
	batches []int
	single  atomic.Int64
	noBatch bool                                     // answer the batch route 404, as an older node
	rewrite func(res *api.AgentLeaseRenewManyResult) // under mu
}

func newRenewNode(t *testing.T) *renewNode {
	svc := transporttest.New(t)
	apiServer := transport.NewServer(svc, transport.ServerOptions{Blobs: svc})
	n := &renewNode{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/leases/renew":
			n.batch(w, r, apiServer)
			return
		case strings.HasSuffix(r.URL.Path, "/lease/renew"):
			n.single.Add(1)
		}
		apiServer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	n.cl = client.NewClient(srv.URL, nil)
	return n
}

func (n *renewNode) batch(w http.ResponseWriter, r *http.Request, next http.Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.noBatch {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no route POST /v1/leases/renew"}}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var cmd api.AgentLeaseRenewManyCommand
	_ = json.Unmarshal(body, &cmd)
	n.batches = append(n.batches, len(cmd.Renewals))
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	out := rec.Body.Bytes()
	if n.rewrite != nil && rec.Code == http.StatusOK {
		var res api.AgentLeaseRenewManyResult
		if err := json.Unmarshal(out, &res); err == nil {
			n.rewrite(&res)
			out, _ = json.Marshal(res)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

func (n *renewNode) batchSizes() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]int(nil), n.batches...)
}

// runThree runs agents a, b and c with a one-second lease in one process.
func runThree(t *testing.T, cl *client.Client, logs io.Writer) {
	f, err := Parse([]byte("agents:\n" +
		"- {id: a, command: [sh, -c, 'echo a'], lease_ttl: 1s}\n" +
		"- {id: b, command: [sh, -c, 'echo b'], lease_ttl: 1s}\n" +
		"- {id: c, command: [sh, -c, 'echo c'], lease_ttl: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.NewTextHandler(logs, nil)), BackoffBase: 10 * time.Millisecond,
			Heartbeat: time.Hour, Node: "n1", Instance: "i1"})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func heldBy(t *testing.T, cl *client.Client, agent, node string) bool {
	t.Helper()
	l, err := cl.AgentLease(context.Background(), agent, api.Strong)
	return err == nil && l.Holder.Node == node && time.Now().Before(l.ExpiresAt)
}

// The leases a process holds are renewed together: one request (one log
// entry) per period carries all three, and no lone renewal is sent.
func TestLeasesOfAProcessRenewTogether(t *testing.T) {
	n := newRenewNode(t)
	runThree(t, n.cl, io.Discard)
	waitFor(t, "three periods of renewals carrying all three leases", func() bool {
		full := 0
		for _, k := range n.batchSizes() {
			if k == 3 {
				full++
			}
		}
		return full >= 3
	})
	if s := n.single.Load(); s != 0 {
		t.Errorf("%d lone renewals besides the batches", s)
	}
	for _, a := range []string{"a", "b", "c"} {
		if !heldBy(t, n.cl, a, "n1") {
			t.Errorf("agent %s's lease is not held live by n1", a)
		}
	}
}

// A node without the batch route (an older build) gets one renewal per
// lease, and the leases stay held.
func TestLeaseRenewalsFallBackToOneEach(t *testing.T) {
	n := newRenewNode(t)
	n.noBatch = true
	var logs lockedBuffer
	runThree(t, n.cl, &logs)
	waitFor(t, "lone renewals of every lease for two periods", func() bool { return n.single.Load() >= 6 })
	for _, a := range []string{"a", "b", "c"} {
		if !heldBy(t, n.cl, a, "n1") {
			t.Errorf("agent %s's lease is not held live by n1", a)
		}
	}
	if logs.count("lease is lost") != 0 {
		t.Errorf("a lease was lost:\n%s", logs.String())
	}
}

// One refused renewal in a batch loses that agent's lease only.
func TestRefusedRenewalLosesThatLeaseOnly(t *testing.T) {
	n := newRenewNode(t)
	var logs lockedBuffer
	n.mu.Lock()
	n.rewrite = func(res *api.AgentLeaseRenewManyResult) {
		for i := range res.Results {
			if res.Results[i].Agent == "b" {
				res.Results[i].Lease = nil
				res.Results[i].Error = &api.APIError{Status: http.StatusConflict, Code: api.CodeFenced, Message: "agent b: taken over (the test)"}
			}
		}
	}
	n.mu.Unlock()
	runThree(t, n.cl, &logs)
	waitFor(t, "b's lease lost", func() bool { return logs.count("agent=b") > 0 && logs.count("lease is lost") > 0 })
	// Two more periods for a loss that spreads to a or c to show itself.
	periods := len(n.batchSizes())
	waitFor(t, "two more periods of renewals", func() bool { return len(n.batchSizes()) >= periods+2 })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "lease is lost") && !strings.Contains(line, "agent=b") {
			t.Errorf("another agent's lease was lost: %s", line)
		}
	}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
