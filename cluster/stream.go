package cluster

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is the raft.StreamLayer a node's Raft transport runs on:
// plain TCP, like raft's own TCPStreamLayer, with one difference. When the
// node listens on a specific loopback IP (127.0.0.12, say) it dials its
// loopback peers from that IP rather than letting the kernel pick
// 127.0.0.1, so whoever accepts the connection -- a fault-injecting proxy in
// the multi-process tests -- can tell which node it comes from by its
// source address. Any other bind (a routable IP, a wildcard) dials as the
// kernel chooses, exactly as before.
//
// It is the one place Raft's connections are made, so a TLS stream layer
// would replace it.
type streamLayer struct {
	ln        *net.TCPListener
	advertise net.Addr // what peers dial; nil: the bound address
	localIP   net.IP   // source IP for loopback peers; nil: the kernel's choice
}

// newStreamLayer listens on bind (host:port; port 0 picks a free one).
// advertise, if not empty, is the host:port peers reach this node on;
// without it the bound address is advertised, which must then not be a
// wildcard.
func newStreamLayer(bind, advertise string) (*streamLayer, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport: %w", err)
	}
	ln, ok := l.(*net.TCPListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("cluster: raft transport on %s: not a TCP listener", bind)
	}
	s := &streamLayer{ln: ln}
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
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if s.localIP != nil && sameFamilyLoopback(string(address), s.localIP) {
		d.LocalAddr = &net.TCPAddr{IP: s.localIP}
	}
	return d.Dial("tcp", string(address))
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

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }

// Close implements net.Listener.
func (s *streamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener: the advertised address, which raft puts in
// its configuration and peers dial.
func (s *streamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}

// boundAddr is the address actually listened on (the port a port-0 bind
// got).
func (s *streamLayer) boundAddr() net.Addr { return s.ln.Addr() }
