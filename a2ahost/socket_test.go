package a2ahost_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/maos-project/maos/a2ahost"
)

// Served over a Unix socket (maosd's <data dir>/api.sock), whose requests
// have RemoteAddr "@" and no TLS, the A2A agents work as over TCP: the
// in-process API calls carry that caller on, and alice's send names her.
func TestOverUnixSocket(t *testing.T) {
	n := start(t)
	dir, err := os.MkdirTemp("", "a2asock") // short: a socket's path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: n.handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+n.alice)
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}
		defer tr.CloseIdleConnections()
		return tr.RoundTrip(r)
	})}
	ctx := t.Context()
	card, err := agentcard.NewResolver(hc).Resolve(ctx, "http://maosd.local"+a2ahost.AgentPath("bob"))
	if err != nil {
		t.Fatalf("card over the socket: %v", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	sent := sendText(t, c, a2a.NewTextPart("Over the socket"))
	mt, err := n.admin.Task(ctx, string(sent.ID))
	if err != nil {
		t.Fatal(err)
	}
	if mt.From != "alice" || mt.To != "bob" || mt.Title != "Over the socket" {
		t.Errorf("maos task from %q to %q title %q; want alice's to bob, \"Over the socket\"", mt.From, mt.To, mt.Title)
	}
}
