package transport_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// A node nobody listens on is an *UnreachableError in the words every
// client shows; the dial error stays reachable underneath. A caller's
// deadline is not one: the node may be there.
func TestClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := client.NewClient(addr, nil)
	_, err = c.Message(context.Background(), "msg-x", api.Local)
	var ue *client.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("Message on a closed port: %v (%T), want an *UnreachableError", err, err)
	}
	if want := "cannot reach a maos node at http://" + addr + " (connection refused): is maosd running there?"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	var ue2 *url.Error
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &ue2) {
		t.Errorf("%v: the dial error is not underneath", err)
	}
	// The stream dials the same way.
	err = c.Stream(context.Background(), api.StreamQuery{}, func(api.StreamEvent) error { return nil })
	if !errors.As(err, &ue) {
		t.Errorf("Stream on a closed port: %v, want an *UnreachableError", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Message(ctx, "msg-x", api.Local); errors.As(err, &ue) || !errors.Is(err, context.Canceled) {
		t.Errorf("Message with a canceled context: %v, want context.Canceled and no *UnreachableError", err)
	}
	// A name that does not resolve.
	_, err = client.NewClient("no-such-host.invalid:7070", nil).Message(context.Background(), "msg-x", api.Local)
	var dns *net.DNSError
	if !errors.As(err, &ue) || !errors.As(err, &dns) {
		t.Errorf("Message on an unknown host: %v, want an *UnreachableError over a *net.DNSError", err)
	}
}
