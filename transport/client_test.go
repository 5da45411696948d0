package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

func TestNewClientAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:7001", "http://127.0.0.1:7001"},
		{"http://127.0.0.1:7001/", "http://127.0.0.1:7001"},
		{"https://node1.example:7001", "https://node1.example:7001"},
		{"localhost:7001//", "http://localhost:7001"},
	} {
		if got := client.NewClient(tc.in, nil).Addr(); got != tc.want {
			t.Errorf("NewClient(%q).Addr() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestClientRoundTrip drives every client method against the server and
// checks both what the service received and what the client returned.
func TestClientRoundTrip(t *testing.T) {
	f := transporttest.New(t)
	base := f.Register(t, "bob") // whom the messages are to: seqs start after
	srv := serve(t, f, transport.ServerOptions{})
	// A bare host:port, as operators give it.
	c := client.NewClient(strings.TrimPrefix(srv.URL, "http://"), nil)
	ctx := t.Context()

	var sent []*api.SendResponse
	for i, ch := range []string{"general", "general", "ops", "general"} {
		res, err := c.Send(ctx, msg(fmt.Sprintf("m%d", i+1), "alice", ch, fmt.Sprintf("text %d", i+1), "bob"))
		if err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
		if res.Seq != base+uint64(i+1) || res.ID != fmt.Sprintf("m%d", i+1) || res.Timestamp.IsZero() {
			t.Fatalf("send %d answered %+v", i+1, res)
		}
		sent = append(sent, res)
	}
	// Idempotent retry through the client.
	if res, err := c.Send(ctx, msg("m2", "alice", "general", "text 2", "bob")); err != nil || res.Seq != base+2 {
		t.Fatalf("retry of m2: %+v, %v; want seq 2", res, err)
	}
	// A message without id gets one from the server. (The retry took
	// index 5 of the log, as a retry does in a cluster.)
	res, err := c.Send(ctx, msg("", "carol", "ops", "no id", "all"))
	if err != nil || !strings.HasPrefix(res.ID, "msg-") || !strings.Contains(res.ID, "-carol-") || res.Seq != base+6 {
		t.Fatalf("send without id: %+v, %v", res, err)
	}

	m, err := c.Message(ctx, "m3", api.Local)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "m3" || m.Seq != base+3 || m.Channel != "ops" || m.Content.Text != "text 3" || !m.Timestamp.Equal(sent[2].Timestamp) ||
		m.Priority != "normal" || m.Type != "chat" {
		t.Errorf("message m3 = %+v", m)
	}
	if _, err := c.Message(ctx, "m3", api.Strong); err != nil {
		t.Fatal(err)
	}
	page, err := c.ChannelPage(ctx, "general", base+1, 1, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].Seq != base+2 || !page.HasMore {
		t.Errorf("page after 1 limit 1 = %+v", page)
	}
	page, err = c.ChannelPage(ctx, "general", 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 3 || page.HasMore {
		t.Errorf("full page has %d messages, has_more %v; want 3, false", len(page.Messages), page.HasMore)
	}
	// Each read linearized at its consistency: the two reads of m3, then
	// the two pages.
	var cons []api.Consistency
	for _, c := range f.CallsTo("Linearize") {
		cons = append(cons, c.Cons)
	}
	if want := []api.Consistency{api.Local, api.Strong, api.Strong, api.Local}; !slices.Equal(cons, want) {
		t.Errorf("Linearize calls at %v, want %v", cons, want)
	}

	chans, err := c.Channels(ctx, api.Local)
	if err != nil {
		t.Fatal(err)
	}
	wantChans := []api.ChannelInfo{{Name: "general", Count: 3, FirstSeq: base + 1, LastSeq: base + 4}, {Name: "ops", Count: 2, FirstSeq: base + 3, LastSeq: base + 6}}
	if !slices.Equal(chans, wantChans) {
		t.Errorf("channels %+v, want %+v", chans, wantChans)
	}

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != "n1" || st.LeaderID != "n1" || len(st.Voters) != 2 || st.Voters[1].Suffrage != "nonvoter" {
		t.Errorf("status %+v", st)
	}
	if err := c.Health(ctx); err != nil {
		t.Errorf("health: %v", err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Errorf("ready: %v", err)
	}
	join := api.JoinRequest{NodeID: "n4", RaftAddr: "127.0.0.1:8004", APIAddr: "127.0.0.1:7004"}
	if err := c.Join(ctx, join); err != nil {
		t.Fatal(err)
	}
	if j := f.Joined(); len(j) != 1 || j[0] != join {
		t.Errorf("joined %+v", j)
	}
	if err := c.Remove(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	if r := f.Removed(); !slices.Equal(r, []string{"n4"}) {
		t.Errorf("removed %v", r)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil || snap.Index != 42 || snap.NodeID != "n1" {
		t.Errorf("snapshot %+v, %v", snap, err)
	}
	tr, err := c.TransferLeadership(ctx, "")
	if err != nil || tr.LeaderID != "n2" {
		t.Errorf("transfer to any: %+v, %v", tr, err)
	}
	tr, err = c.TransferLeadership(ctx, "n3")
	if err != nil || tr.LeaderID != "n3" {
		t.Errorf("transfer to n3: %+v, %v", tr, err)
	}
	if got := f.Transfers(); !slices.Equal(got, []string{"", "n3"}) {
		t.Errorf("transfers %q", got)
	}
}

// TestClientErrors checks that the client turns error bodies back into
// *APIError values that match the sentinels with errors.Is.
func TestClientErrors(t *testing.T) {
	relayed := &api.APIError{Status: 409, Code: "conflict", Message: "x"}
	unknown := fmt.Errorf("cluster: send: leader lost: %w", api.ErrOutcomeUnknown)
	cases := []struct {
		name    string
		setup   func(f *transporttest.Service)
		max     int64
		call    func(ctx context.Context, c *client.Client) error
		is      error // nil: no sentinel must match
		status  int
		code    string
		message string // substring
	}{
		{
			name: "conflict",
			setup: func(f *transporttest.Service) {
				store(t, f, msg("m1", "alice", "general", "first", "bob"))
			},
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "general", "second", "bob"))
				return err
			},
			is: api.ErrConflict, status: 409, code: "conflict", message: "m1",
		},
		{
			name: "not found",
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Message(ctx, "nope", api.Local)
				return err
			},
			is: api.ErrNotFound, status: 404, code: "not_found", message: "nope",
		},
		{
			name: "id with a slash is one path segment",
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Message(ctx, "a/b", api.Local)
				return err
			},
			is: api.ErrNotFound, status: 404, code: "not_found", message: "message a/b",
		},
		{
			name:  "no leader",
			setup: func(f *transporttest.Service) { f.Fail("Apply", api.ErrNoLeader) },
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "general", "x", "bob"))
				return err
			},
			is: api.ErrNoLeader, status: 503, code: "no_leader",
		},
		{
			name:  "outcome unknown",
			setup: func(f *transporttest.Service) { f.Fail("Apply", unknown) },
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "general", "x", "bob"))
				return err
			},
			is: api.ErrOutcomeUnknown, status: 503, code: "outcome_unknown", message: unknown.Error(),
		},
		{
			name: "an op the cluster's version does not allow yet",
			setup: func(f *transporttest.Service) {
				f.Fail("Apply", &api.ClusterVersionError{Op: api.OpSend, Needs: 2, Runs: 1})
			},
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "general", "x", "bob"))
				return err
			},
			is: api.ErrClusterVersion, status: 409, code: "cluster_version",
			message: "op send needs cluster version 2; the cluster runs 1 until every voter is upgraded",
		},
		{
			name:  "not leader",
			setup: func(f *transporttest.Service) { f.Fail("Remove", api.ErrNotLeader) },
			call:  func(ctx context.Context, c *client.Client) error { return c.Remove(ctx, "n2") },
			is:    api.ErrNotLeader, status: 503, code: "not_leader",
		},
		{
			name: "invalid message",
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "", "x", "bob"))
				return err
			},
			is: api.ErrInvalid, status: 400, code: "invalid", message: "channel: required",
		},
		{
			name: "invalid join",
			call: func(ctx context.Context, c *client.Client) error {
				return c.Join(ctx, api.JoinRequest{NodeID: "N4", RaftAddr: "a:1", APIAddr: "a:2"})
			},
			is: api.ErrInvalid, status: 400, code: "invalid", message: "node_id",
		},
		{
			name: "too large",
			max:  256,
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "general", strings.Repeat("x", 300), "bob"))
				return err
			},
			is: api.ErrTooLarge, status: 413, code: "too_large",
		},
		{
			name: "bad page limit",
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.ChannelPage(ctx, "general", 0, 1001, api.Local)
				return err
			},
			is: api.ErrBadRequest, status: 400, code: "bad_request", message: "limit",
		},
		{
			name:  "not ready",
			setup: func(f *transporttest.Service) { f.Fail("Ready", errors.New("catching up")) },
			call:  func(ctx context.Context, c *client.Client) error { return c.Ready(ctx) },
			is:    api.ErrNotReady, status: 503, code: "not_ready", message: "catching up",
		},
		{
			name:  "relayed APIError",
			setup: func(f *transporttest.Service) { f.Fail("Apply", relayed) },
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Send(ctx, msg("m1", "alice", "general", "x", "bob"))
				return err
			},
			is: api.ErrConflict, status: 409, code: "conflict", message: "x",
		},
		{
			name:  "internal",
			setup: func(f *transporttest.Service) { f.Fail("Snapshot", errors.New("disk full")) },
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Snapshot(ctx)
				return err
			},
			is: nil, status: 500, code: "internal", message: "disk full",
		},
	}
	sentinels := []error{api.ErrConflict, api.ErrNotFound, api.ErrInvalid, api.ErrNoLeader, api.ErrNotLeader,
		api.ErrOutcomeUnknown, api.ErrTooLarge, api.ErrBadRequest, api.ErrNotReady, api.ErrClusterVersion}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := transporttest.New(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			srv := serve(t, f, transport.ServerOptions{MaxMessageBytes: tc.max})
			err := tc.call(t.Context(), client.NewClient(srv.URL, nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range sentinels {
				if got, want := errors.Is(err, s), s == tc.is; got != want {
					t.Errorf("errors.Is(err, %q) = %v, want %v (err: %v)", s, got, want, err)
				}
			}
			var apiErr *api.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("%T %v is not an *APIError", err, err)
			}
			if apiErr.Status != tc.status || apiErr.Code != tc.code || !strings.Contains(apiErr.Message, tc.message) {
				t.Errorf("APIError %+v, want status %d code %s message with %q", apiErr, tc.status, tc.code, tc.message)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tc.status)) || !strings.Contains(err.Error(), tc.code) {
				t.Errorf("error text %q does not show status and code", err)
			}
		})
	}
}

// TestClientNonAPIAnswers: answers that are not the API's error body (a
// proxy's page) or not JSON still give errors, not panics or zero values.
func TestClientNonAPIAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/cluster/status":
			http.Error(w, "bad gateway from the proxy", http.StatusBadGateway)
		case "/v1/cluster/snapshot":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"","message":"no code"}}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"channels": [`))
		}
	}))
	t.Cleanup(srv.Close)
	c := client.NewClient(srv.URL, nil)

	_, err := c.Status(t.Context())
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || apiErr.Code != api.CodeInternal || !strings.Contains(apiErr.Message, "bad gateway from the proxy") {
		t.Errorf("plain-text 502: %#v", err)
	}
	_, err = c.Snapshot(t.Context())
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Code != api.CodeInternal || !strings.Contains(apiErr.Message, "no code") {
		t.Errorf("error body without code: %#v", err)
	}
	_, err = c.Channels(t.Context(), api.Local)
	if err == nil || errors.As(err, &apiErr) || !strings.Contains(err.Error(), "decode") {
		t.Errorf("truncated 200 answer: %v", err)
	}
}

// TestClientForwarding: Forwarding marks requests with HeaderForwarded, so
// the service sees IsForwarded; the client it was made from stays plain.
func TestClientForwarding(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	plain := client.NewClient(srv.URL, nil)
	fwd := plain.Forwarding()
	if fwd.Addr() != plain.Addr() {
		t.Errorf("forwarding client talks to %s, want %s", fwd.Addr(), plain.Addr())
	}
	ctx := t.Context()
	ops := []struct {
		svc  string
		call func(c *client.Client) error
	}{
		{"Apply", func(c *client.Client) error {
			_, err := c.Send(ctx, msg("", "alice", "general", "x", "bob"))
			return err
		}},
		{"Linearize", func(c *client.Client) error {
			_, err := c.Message(ctx, "nope", api.Strong)
			return err
		}},
		{"Status", func(c *client.Client) error { _, err := c.Status(ctx); return err }},
		{"Join", func(c *client.Client) error {
			return c.Join(ctx, api.JoinRequest{NodeID: "n4", RaftAddr: "a:1", APIAddr: "a:2"})
		}},
		{"Remove", func(c *client.Client) error { return c.Remove(ctx, "n4") }},
		{"TransferLeadership", func(c *client.Client) error { _, err := c.TransferLeadership(ctx, ""); return err }},
	}
	for _, op := range ops {
		// plain, forwarding, plain again: Forwarding must not change plain.
		for i, c := range []*client.Client{plain, fwd, plain} {
			_ = op.call(c)
			calls := f.CallsTo(op.svc)
			if len(calls) != i+1 {
				t.Fatalf("%s: service got %d calls, want %d", op.svc, len(calls), i+1)
			}
			if got, want := calls[i].Forwarded, c == fwd; got != want {
				t.Errorf("%s via client %d: IsForwarded = %v, want %v", op.svc, i, got, want)
			}
		}
	}
}

func TestClientClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(addr, nil)
	calls := map[string]func() error{
		"status": func() error { _, err := c.Status(t.Context()); return err },
		"send": func() error {
			_, err := c.Send(t.Context(), msg("m1", "alice", "general", "x", "bob"))
			return err
		},
		"health": func() error { return c.Health(t.Context()) },
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Fatalf("%s against a closed port: no error", name)
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: error %q does not mention %s", name, err, addr)
		}
		var apiErr *api.APIError
		if errors.As(err, &apiErr) {
			t.Errorf("%s: a connection failure came back as an API error %+v", name, apiErr)
		}
		if errors.Is(err, api.ErrConflict) || errors.Is(err, api.ErrOutcomeUnknown) {
			t.Errorf("%s: connection failure matches an API sentinel: %v", name, err)
		}
	}
}

func TestClientCanceledContext(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := client.NewClient(srv.URL, nil).Send(ctx, msg("m1", "alice", "general", "x", "bob"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("send with a canceled context: %v, want context.Canceled", err)
	}
	if f.NumStored() != 0 {
		t.Errorf("a canceled send was stored")
	}
}

// TestClientConcurrentSends shares one client between goroutines: every send
// gets its own seq, 1..n without gaps.
func TestClientConcurrentSends(t *testing.T) {
	f := transporttest.New(t)
	base := f.Register(t, "bob")
	srv := serve(t, f, transport.ServerOptions{})
	c := client.NewClient(srv.URL, nil)
	const workers, each = 8, 16
	seqs := make(chan uint64, workers*each)
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				res, err := c.Send(t.Context(), msg(fmt.Sprintf("w%d-%d", w, i), "alice", "general", "x", "bob"))
				if err != nil {
					errs <- err
					continue
				}
				seqs <- res.Seq
			}
		})
	}
	wg.Wait()
	close(seqs)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var got []uint64
	for s := range seqs {
		got = append(got, s)
	}
	slices.Sort(got)
	if len(got) != workers*each {
		t.Fatalf("%d sends succeeded, want %d", len(got), workers*each)
	}
	for i, s := range got {
		if s != base+uint64(i+1) {
			t.Fatalf("seqs %v are not %d..%d", got, base+1, base+workers*each)
		}
	}
}
