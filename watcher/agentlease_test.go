package watcher

import (
	"context"
	"errors"
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

// startLeased runs a watcher of agent "ha" (lease_ttl 1s) beside node
// node, whose command answers "answered by NODE"; stop ends it and waits.
func startLeased(t *testing.T, cl *client.Client, node string) (stop func()) {
	t.Helper()
	f, err := Parse(fmt.Appendf(nil, "agents:\n- id: ha\n  role: dev\n  command: [sh, -c, 'echo answered by %s']\n  context_messages: 0\n  lease_ttl: 1s\n", node))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 50 * time.Millisecond, Node: node, Instance: "inst-" + node})
	}()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run beside %s: %v", node, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func mailHA(t *testing.T, cl *client.Client, n int) *api.Message {
	t.Helper()
	m := &api.Message{ID: fmt.Sprintf("msg-20261128-090000-lead-%08x", n), From: "lead", To: api.Recipients{"ha"}, Channel: "work",
		Content: api.Content{Text: fmt.Sprintf("question %d", n)}}
	res, err := cl.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.Message(context.Background(), m.ID, api.Strong)
	if err != nil || got.Seq != res.Seq {
		t.Fatalf("read back %s: %+v, %v", m.ID, got, err)
	}
	return got
}

// answerOf waits for ha's reply to m and returns its text.
func answerOf(t *testing.T, cl *client.Client, m *api.Message) string {
	t.Helper()
	var text string
	waitFor(t, "the reply to "+m.ID, func() bool {
		r, err := cl.Message(context.Background(), ReplyID("ha", m), api.Strong)
		if err == nil {
			text = strings.TrimSpace(r.Content.Text)
		}
		return err == nil
	})
	return text
}

func leaseOf(t *testing.T, cl *client.Client) *api.AgentLease {
	t.Helper()
	l, err := cl.AgentLease(context.Background(), "ha", api.Strong)
	if err != nil {
		return nil
	}
	return l
}

// Two watchers of one agent: the first holds the lease and answers, the
// second stands by (listed); when the first stops it releases, and the
// second takes over at once, resuming from the replicated cursor.
func TestStandbyTakesOverWhenTheHolderStops(t *testing.T) {
	_, cl := apiNode(t)
	stopA := startLeased(t, cl, "n1")
	waitFor(t, "n1 holds the lease", func() bool { l := leaseOf(t, cl); return l != nil && l.Holder.Node == "n1" })
	startLeased(t, cl, "n2")
	waitFor(t, "n2 stands by", func() bool {
		l := leaseOf(t, cl)
		return l != nil && len(l.Standbys) == 1 && l.Standbys[0].Node == "n2"
	})
	if got := answerOf(t, cl, mailHA(t, cl, 1)); got != "answered by n1" {
		t.Fatalf("first answer %q, want n1's", got)
	}
	first := leaseOf(t, cl)
	stopA()
	waitFor(t, "n2 takes over", func() bool { l := leaseOf(t, cl); return l != nil && l.Holder.Node == "n2" && !l.Expired })
	l := leaseOf(t, cl)
	if l.Reason != api.LeaseReasonReleased || l.Fence <= first.Fence {
		t.Errorf("takeover = %+v, want reason released and a fence above %d", l, first.Fence)
	}
	m2 := mailHA(t, cl, 2)
	if got := answerOf(t, cl, m2); got != "answered by n2" {
		t.Fatalf("second answer %q, want n2's", got)
	}
	waitFor(t, "the cursor passes the second message", func() bool {
		c, err := cl.Cursor(context.Background(), "ha", api.Strong)
		return err == nil && c.Seq >= m2.Seq
	})
	page, err := cl.Audit(context.Background(), 0, api.MaxPageLimit, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	var takeovers []string
	for _, ev := range page.Events {
		if ev.Label == "AGENT_TAKEOVER" {
			takeovers = append(takeovers, ev.Line)
		}
	}
	if len(takeovers) != 1 || !strings.Contains(takeovers[0], "[n1→n2] AGENT_TAKEOVER: ha from n1/inst-n1") {
		t.Errorf("takeovers in the audit = %q, want one n1→n2", takeovers)
	}
}

// A holder that died without releasing (here a lease taken by hand):
// the standby takes over once the lease lapsed, answers the message that
// waited, and the dead holder's late reply under its old fence is
// refused, so the message is answered once.
func TestStandbyTakesOverALapsedLease(t *testing.T) {
	_, cl := apiNode(t)
	ctx := context.Background()
	dead := api.LeaseHolder{Node: "n9", Instance: "dead"}
	got, err := cl.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: "ha", LeaseHolder: dead, TTL: api.LockTTL(time.Second)})
	if err != nil || got.Outcome != api.AgentLeaseGranted {
		t.Fatalf("acquire by hand = %+v, %v", got, err)
	}
	if _, err := cl.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "ha", Role: "dev"}); err != nil {
		t.Fatal(err)
	}
	m := mailHA(t, cl, 1)
	startLeased(t, cl, "n2")
	if got := answerOf(t, cl, m); got != "answered by n2" {
		t.Fatalf("answer %q, want the standby's", got)
	}
	l := leaseOf(t, cl)
	if l.Holder.Node != "n2" || l.Reason != api.LeaseReasonLapsed || l.Fence <= got.Lease.Fence {
		t.Fatalf("lease = %+v, want taken over by n2 after the lapse", l)
	}
	late := answer(m, "ha", "late answer from the dead holder")
	_, err = cl.SendFenced(ctx, late, got.Lease.Fence)
	if !errors.Is(err, api.ErrFenced) || !strings.Contains(err.Error(), fmt.Sprintf("fence %d is not the current lease's (fence %d, held by n2/inst-n2)", got.Lease.Fence, l.Fence)) {
		t.Fatalf("late reply = %v, want refused by the fence", err)
	}
	if r, err := cl.Message(ctx, ReplyID("ha", m), api.Strong); err != nil || strings.TrimSpace(r.Content.Text) != "answered by n2" {
		t.Fatalf("stored reply = %+v, %v; want n2's only", r, err)
	}
}

// A holder whose lease was taken (released and granted to another by
// hand) notices at its next renewal, stops answering and stands by; when
// the other releases, it takes the lease back and answers what came
// meanwhile.
func TestHolderThatLostTheLeaseStandsBy(t *testing.T) {
	_, cl := apiNode(t)
	ctx := context.Background()
	startLeased(t, cl, "n1")
	waitFor(t, "n1 holds the lease", func() bool { l := leaseOf(t, cl); return l != nil && l.Holder.Node == "n1" })
	other := api.LeaseHolder{Node: "n9", Instance: "usurper"}
	var res api.AgentLeaseResult
	// n1 may notice the release and ask again between the release and the
	// usurper's acquire: then release its new grant and try again.
	for try := 0; res.Outcome != api.AgentLeaseGranted; try++ {
		if try == 10 {
			t.Fatalf("the usurper never got the lease: %+v", res)
		}
		mine := leaseOf(t, cl)
		if _, err := cl.ReleaseAgentLease(ctx, api.AgentLeaseReleaseCommand{Agent: "ha", LeaseHolder: mine.Holder, Fence: mine.Fence}); err != nil {
			t.Fatal(err)
		}
		var err error
		if res, err = cl.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: "ha", LeaseHolder: other, TTL: api.LockTTL(10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "n1 stands by", func() bool {
		l := leaseOf(t, cl)
		return l != nil && len(l.Standbys) == 1 && l.Standbys[0].Node == "n1"
	})
	m := mailHA(t, cl, 1)
	if _, err := cl.ReleaseAgentLease(ctx, api.AgentLeaseReleaseCommand{Agent: "ha", LeaseHolder: other, Fence: res.Lease.Fence}); err != nil {
		t.Fatal(err)
	}
	if got := answerOf(t, cl, m); got != "answered by n1" {
		t.Fatalf("answer %q, want n1's after it took the lease back", got)
	}
	if l := leaseOf(t, cl); l.Holder.Node != "n1" || l.Fence <= res.Lease.Fence {
		t.Errorf("lease = %+v, want n1's again under a new fence", l)
	}
}

// lease_ttl is bounded, with the limits in the error.
func TestLeaseTTLBounds(t *testing.T) {
	for _, ttl := range []string{"500ms", "11m"} {
		_, err := Parse(fmt.Appendf(nil, "agents:\n- id: ha\n  command: [true]\n  lease_ttl: %s\n", ttl))
		if err == nil || !strings.Contains(err.Error(), "lease_ttl: must be 1s to 10m0s") {
			t.Errorf("lease_ttl %s: %v, want the limits named", ttl, err)
		}
	}
	f, err := Parse([]byte("agents:\n- id: ha\n  command: [true]\n"))
	if err != nil || time.Duration(f.Agents[0].LeaseTTL) != api.DefaultAgentLeaseTTL {
		t.Errorf("default lease_ttl = %v, %v", f, err)
	}
}

// A holder whose renewals cannot get through (its node cut off) stops
// serving once none was accepted for a ttl by its own clock, so it never
// answers past the time a standby may have taken over; when the node is
// reachable again it asks anew, is granted a new fence (the old lease
// lapsed) and answers what came meanwhile.
func TestHolderStopsWhenRenewalsFail(t *testing.T) {
	svc := transporttest.New(t)
	apiServer := transport.NewServer(svc, transport.ServerOptions{Blobs: svc})
	var cut atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() && strings.Contains(r.URL.Path, "/lease") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"no_leader","message":"cut off by the test"}}`))
			return
		}
		apiServer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cl := client.NewClient(srv.URL, nil)
	f, err := Parse([]byte("agents:\n- id: ha\n  command: [sh, -c, 'echo answered']\n  context_messages: 0\n  lease_ttl: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.NewTextHandler(&logs, nil)), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 50 * time.Millisecond, Node: "n1", Instance: "i1"})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(t, "n1 holds the lease", func() bool { l := leaseOf(t, cl); return l != nil && l.Holder.Node == "n1" })
	before := leaseOf(t, cl)
	cut.Store(true)
	waitFor(t, "the holder stops", func() bool {
		return logs.count("no renewal of the agent's lease accepted for a ttl; stopping") == 1 && logs.count("lost the agent's lease; standing by") == 1
	})
	m := mailHA(t, cl, 1)
	cut.Store(false)
	if got := answerOf(t, cl, m); got != "answered" {
		t.Fatalf("answer %q", got)
	}
	if l := leaseOf(t, cl); l.Holder.Node != "n1" || l.Fence <= before.Fence || l.Reason != api.LeaseReasonLapsed {
		t.Errorf("lease after the cut = %+v, want n1's under a new fence after the lapse (was %d)", l, before.Fence)
	}
}
