package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/tlstest"
)

// nodeTLS loads a node's server and client TLS configs from its files.
func nodeTLS(t testing.TB, f tlstest.Files) (serverTLS, clientTLS *tls.Config) {
	t.Helper()
	files := client.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}
	serverTLS, err := files.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if clientTLS, err = files.ClientConfig(); err != nil {
		t.Fatal(err)
	}
	return serverTLS, clientTLS
}

// Two TLS stream layers of one CA talk; the dialer keeps its loopback
// source IP; a peer whose certificate lacks the dialed IP is refused.
func TestRaftStreamLayerTLS(t *testing.T) {
	needLoopbackIPs(t, "127.0.0.31", "127.0.0.32")
	ca := tlstest.NewCA(t, "maos-test")
	withIPs := func(ips ...string) func(*x509.Certificate) {
		return func(c *x509.Certificate) {
			c.IPAddresses = nil
			for _, ip := range ips {
				c.IPAddresses = append(c.IPAddresses, net.ParseIP(ip))
			}
		}
	}
	layer := func(bind string, f tlstest.Files) *raftStreamLayer {
		s, err := newRaftStreamLayer(bind, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		serverTLS, clientTLS := nodeTLS(t, f)
		s.useTLS(serverTLS, clientTLS, nil)
		return s
	}
	a := layer("127.0.0.31:0", ca.Node(t, "a", withIPs("127.0.0.31")))
	b := layer("127.0.0.32:0", ca.Node(t, "b", withIPs("127.0.0.32")))

	// A round trip through the handshake both ways, from b's own IP.
	type accepted struct {
		from net.Addr
		got  string
		err  error
	}
	done := make(chan accepted, 1)
	go func() {
		c, err := a.Accept()
		if err != nil {
			done <- accepted{err: err}
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		done <- accepted{from: c.RemoteAddr(), got: string(buf), err: err}
	}()
	out, err := b.Dial(raft.ServerAddress(a.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer out.Close()
	if _, ok := out.(*tls.Conn); !ok {
		t.Errorf("dialed a %T, want a *tls.Conn", out)
	}
	if _, err := out.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.got != "ping" {
		t.Fatalf("a read %q, %v; want ping", r.got, r.err)
	}
	if ip := r.from.(*net.TCPAddr).IP.String(); ip != "127.0.0.32" {
		t.Errorf("TLS dial came from %s, want b's loopback IP 127.0.0.32", ip)
	}

	// c's certificate names 127.0.0.1 only; dialed at 127.0.0.31 it is refused.
	cl := layer("127.0.0.31:0", ca.Node(t, "c", withIPs("127.0.0.1")))
	go func() {
		if c, err := cl.Accept(); err == nil {
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}
	}()
	if _, err := b.Dial(raft.ServerAddress(cl.Addr().String()), 5*time.Second); err == nil || !strings.Contains(err.Error(), "not 127.0.0.31") {
		t.Errorf("dial of a peer whose certificate lacks the dialed IP: %v, want a name mismatch", err)
	}
}

// A peer that connects and never completes its handshake costs raft
// nothing: Accept returns at once, and the connection's first read fails
// after the handshake timeout.
func TestRaftStreamLayerTLSHandshakeIsBounded(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	s, err := newRaftStreamLayer("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	serverTLS, clientTLS := nodeTLS(t, ca.Node(t, "a"))
	s.handshakeTimeout = 200 * time.Millisecond
	s.useTLS(serverTLS, clientTLS, nil)

	silent, err := net.Dial("tcp", s.boundAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	in, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// The silent peer keeps its connection open: only the handshake's own
	// timeout can end this read.
	_, err = in.Read(make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "handshake") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read from a silent peer: %v, want the handshake's timeout", err)
	}
	// A second use of the conn reports the same failure rather than hang.
	if _, err := in.Write([]byte("x")); err == nil {
		t.Error("write after a failed handshake succeeded")
	}
}
