package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ProxyTargetWait bounds how long a connection accepted before the
// proxy's target is set waits for it; then it is closed.
const ProxyTargetWait = 10 * time.Second

// proxyDialTimeout bounds one dial of the target.
const proxyDialTimeout = 5 * time.Second

// Proxy is a TCP forwarder that can refuse and cut connections by their
// source IP: the harness puts one in front of each maosd's Raft port to
// inject network partitions without root (no iptables, no tc). Each node
// binds Raft on its own loopback IP and dials its peers from it, so the
// proxy of node X tells a connection from node Y by its source address.
//
// A Proxy listens at once; its target (where connections are forwarded)
// may be set later, because a node's real Raft port is known only once it
// started: a connection accepted before that waits up to ProxyTargetWait
// for it. There is no half-close: when either side of a forwarded
// connection closes or fails, the proxy closes both. All methods are safe
// for concurrent use.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	targetWait time.Duration // ProxyTargetWait; tests shorten it
	target     string
	targetSet  chan struct{} // closed once a target is set
	blocked    func(src net.IP) bool
	conns      map[*proxyConn]struct{}
	closed     bool
	stats      ProxyStats
}

// ProxyStats counts what a Proxy did with the connections it accepted.
type ProxyStats struct {
	Accepted   int // connections accepted
	Refused    int // closed at accept: the source was blocked
	Cut        int // open connections closed because a new rule blocked their source
	NoTarget   int // closed after ProxyTargetWait with no target set
	DialFailed int // the target refused or did not answer (its node is down, say)
	Active     int // connections open now (accepted and not yet closed)
}

// proxyConn is one accepted connection and, once dialed, its upstream.
type proxyConn struct {
	src      net.IP
	client   net.Conn
	upstream net.Conn // nil until dialed
	dead     bool     // closed by a rule or by Close; guarded by Proxy.mu
}

// NewProxy listens on addr (host:port; "127.0.0.1:0" picks a free port on
// loopback) and starts accepting. Call SetTarget to make it forward and
// Close to stop it.
func NewProxy(addr string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("harness: proxy: listen %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, targetWait: ProxyTargetWait,
		targetSet: make(chan struct{}), conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address the proxy listens on (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes the proxy forward to addr (host:port): connections that
// wait for a target go there now, later ones too. Connections already
// forwarded keep their upstream.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
	select {
	case <-p.targetSet:
	default:
		close(p.targetSet)
	}
}

// Target is the address the proxy forwards to, "" while none is set.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetBlocked installs the rule that decides, by source IP, which
// connections the proxy refuses: a new connection whose source it blocks
// is closed at accept, and every open connection whose source it now
// blocks is closed at once (both sides). nil blocks nothing.
func (p *Proxy) SetBlocked(rule func(src net.IP) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = rule
	if rule == nil {
		return
	}
	for pc := range p.conns {
		if rule(pc.src) {
			p.killLocked(pc)
			p.stats.Cut++
		}
	}
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Active = len(p.conns)
	return s
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines to end. Calling it again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	for pc := range p.conns {
		p.killLocked(pc)
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return err
}

// killLocked closes both sides of pc and forgets it. p.mu is held.
func (p *Proxy) killLocked(pc *proxyConn) {
	pc.dead = true
	_ = pc.client.Close()
	if pc.upstream != nil {
		_ = pc.upstream.Close()
	}
	delete(p.conns, pc)
}

// forget closes pc and drops it, unless a rule or Close already did.
func (p *Proxy) forget(pc *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !pc.dead {
		p.killLocked(pc)
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (too many open files, say): back off a
			// little rather than spin, and stop if the proxy closed.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		var src net.IP
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			src = a.IP
		}
		pc := &proxyConn{src: src, client: c}
		p.mu.Lock()
		p.stats.Accepted++
		switch {
		case p.closed:
			_ = c.Close()
			p.mu.Unlock()
			return
		case p.blocked != nil && p.blocked(src):
			p.stats.Refused++
			_ = c.Close()
			p.mu.Unlock()
			continue
		}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pc)
	}
}

// serve waits for a target, dials it and copies both ways until either
// side ends.
func (p *Proxy) serve(pc *proxyConn) {
	defer p.wg.Done()
	defer p.forget(pc)
	p.mu.Lock()
	wait := time.NewTimer(p.targetWait)
	p.mu.Unlock()
	defer wait.Stop()
	select {
	case <-p.targetSet:
	case <-p.ctx.Done():
		return
	case <-wait.C:
		p.mu.Lock()
		p.stats.NoTarget++
		p.mu.Unlock()
		return
	}
	target := p.Target()
	dctx, cancel := context.WithTimeout(p.ctx, proxyDialTimeout)
	var d net.Dialer
	up, err := d.DialContext(dctx, "tcp", target)
	cancel()
	if err != nil {
		p.mu.Lock()
		p.stats.DialFailed++
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	if pc.dead { // cut (or the proxy closed) while dialing
		p.mu.Unlock()
		_ = up.Close()
		return
	}
	pc.upstream = up
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, pc.client)
	go pipe(pc.client, up)
	<-done
	p.forget(pc) // closes both sides, which ends the other copy
	<-done
}
