package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// raftStreamLayer is the raft.StreamLayer under a node's Raft network
// (raft.NetworkTransport: Raft's RPCs between nodes, not the API):
// plain TCP, like raft's own TCPStreamLayer, with one difference. When the
// node listens on a specific loopback IP (127.0.0.12, say) it dials its
// loopback peers from that IP rather than letting the kernel pick
// 127.0.0.1, so whoever accepts the connection -- a fault-injecting proxy in
// the multi-process tests -- can tell which node it comes from by its
// source address. Any other bind (a routable IP, a wildcard) dials as the
// kernel chooses, exactly as before.
//
// With TLS (useTLS) both directions are mutually authenticated: an
// accepted connection must present a client certificate signed by the
// cluster CA, and a dialed peer must present a server certificate signed
// by it whose SANs hold the address dialed -- peers dial each other by the
// advertised Raft address, usually IP:port, so node certificates carry IP
// SANs. Handshakes are bounded in both directions, so a peer that never
// completes one costs a goroutine for handshakeTimeout, never raft's
// progress.
type raftStreamLayer struct {
	ln        *net.TCPListener
	advertise net.Addr // what peers dial; nil: the bound address
	localIP   net.IP   // source IP for loopback peers; nil: the kernel's choice

	serverTLS        *tls.Config // nil: plain TCP
	clientTLS        *tls.Config
	handshakeTimeout time.Duration
	logger           *slog.Logger
}

// defaultHandshakeTimeout bounds a TLS handshake on an accepted Raft
// connection (a dial is bounded by raft's own dial timeout).
const defaultHandshakeTimeout = 5 * time.Second

// newRaftStreamLayer listens on bind (host:port; port 0 picks a free one).
// advertise, if not empty, is the host:port peers reach this node on;
// without it the bound address is advertised, which must then not be a
// wildcard.
func newRaftStreamLayer(bind, advertise string) (*raftStreamLayer, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport: %w", err)
	}
	ln, ok := l.(*net.TCPListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("cluster: raft transport on %s: not a TCP listener", bind)
	}
	s := &raftStreamLayer{ln: ln}
	bound := ln.Addr().(*net.TCPAddr)
	switch {
	case advertise != "":
		if s.advertise, err = net.ResolveTCPAddr("tcp", advertise); err != nil {
			ln.Close()
			return nil, fmt.Errorf("cluster: raft advertise address %q: %w", advertise, err)
		}
	case bound.IP == nil || bound.IP.IsUnspecified():
		ln.Close()
		return nil, fmt.Errorf("cluster: raft address %s binds every interface; also set the raft advertise address (host:port peers can reach)", bind)
	}
	if bound.IP.IsLoopback() {
		s.localIP = bound.IP
	}
	return s, nil
}

// Dial implements raft.StreamLayer.
func (s *raftStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if s.localIP != nil && sameFamilyLoopback(string(address), s.localIP) {
		d.LocalAddr = &net.TCPAddr{IP: s.localIP}
	}
	if s.clientTLS == nil {
		return d.Dial("tcp", string(address))
	}
	if timeout <= 0 {
		timeout = s.handshakeTimeout
	}
	// The context bounds the TCP connect and the handshake together. An
	// empty ServerName is filled in with the host dialed, IP or name.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	td := tls.Dialer{NetDialer: &d, Config: s.clientTLS}
	c, err := td.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("cluster: raft TLS dial %s: %w", address, err)
	}
	return c, nil
}

// useTLS makes the layer speak TLS: server (a node's API ServerConfig)
// with client certificates required and verified for every accepted
// connection, client (a node's ClientConfig, with its certificate) for
// every dial. Both must be set; call it before the layer is used.
func (s *raftStreamLayer) useTLS(server, client *tls.Config, logger *slog.Logger) {
	s.serverTLS = server.Clone()
	s.serverTLS.ClientAuth = tls.RequireAndVerifyClientCert
	s.clientTLS = client.Clone()
	if s.handshakeTimeout == 0 {
		s.handshakeTimeout = defaultHandshakeTimeout
	}
	s.logger = logger
}

// sameFamilyLoopback reports whether address is an IP:port whose IP is a
// loopback address of the same family as local: the only peers a
// loopback source can reach. A host name is left to the kernel.
func sameFamilyLoopback(address string, local net.IP) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() && (ip.To4() != nil) == (local.To4() != nil)
}

// Accept implements net.Listener. With TLS the handshake is not done here
// -- that would hold up raft's accept loop behind one slow peer -- but on
// the connection's first Read or Write, on raft's goroutine for it, within
// handshakeTimeout.
func (s *raftStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil || s.serverTLS == nil {
		return c, err
	}
	return &raftServerTLSConn{Conn: tls.Server(c, s.serverTLS), timeout: s.handshakeTimeout, logger: s.logger}, nil
}

// raftServerTLSConn is an accepted Raft connection whose handshake runs,
// bounded, before its first Read or Write.
type raftServerTLSConn struct {
	*tls.Conn
	timeout time.Duration
	logger  *slog.Logger
	done    atomic.Bool
}

func (c *raftServerTLSConn) handshake() error {
	if c.done.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// tls.Conn serialises concurrent handshakes: a second caller waits for
	// the first and gets its result.
	if err := c.Conn.HandshakeContext(ctx); err != nil {
		if c.logger != nil && !errors.Is(err, net.ErrClosed) {
			c.logger.Warn("refused a Raft connection: TLS handshake failed (a peer without a node certificate signed by the cluster CA?)",
				"remote", c.RemoteAddr().String(), "error", err)
		}
		return fmt.Errorf("cluster: raft TLS handshake with %s: %w", c.RemoteAddr(), err)
	}
	c.done.Store(true)
	return nil
}

func (c *raftServerTLSConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *raftServerTLSConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Close implements net.Listener.
func (s *raftStreamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener: the advertised address, which raft puts in
// its configuration and peers dial.
func (s *raftStreamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}

// boundAddr is the address actually listened on (the port a port-0 bind
// got).
func (s *raftStreamLayer) boundAddr() net.Addr { return s.ln.Addr() }
