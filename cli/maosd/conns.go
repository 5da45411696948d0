package maosd

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// clientLimitListener bounds the API connections one client address
// (the remote IP) holds open at once: a connection over the bound is
// closed as soon as it is accepted, before TLS or HTTP read a byte, so
// one client cannot take the node's file descriptors (gossip, Raft and
// the blob store need them too). Beside it the API server closes idle
// keep-alive connections (http.Server.IdleTimeout) and a request body
// that stalls (transport's ServerOptions.BodyStallTimeout); streams, which
// write, hold their connection as long as they run, and count here.
// golang.org/x/net/netutil.LimitListener bounds the total only, which
// one client could still fill.
type clientLimitListener struct {
	net.Listener
	max    int
	logger *slog.Logger

	mu       sync.Mutex
	open     map[string]int // open connections by remote IP
	refused  int            // since the last warning
	lastWarn time.Time
}

// clientLimitWarnEvery paces the warning about refused connections.
const clientLimitWarnEvery = time.Minute

// limitPerClient returns ln bounded to max open connections per client
// IP; max <= 0 returns ln as it is.
func limitPerClient(ln net.Listener, max int, logger *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &clientLimitListener{Listener: ln, max: max, logger: logger, open: map[string]int{}}
}

// Accept returns the next connection whose client is under the bound,
// closing those that are not.
func (l *clientLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.refused++
			warn := time.Since(l.lastWarn) >= clientLimitWarnEvery
			refused := l.refused
			if warn {
				l.lastWarn, l.refused = time.Now(), 0
			}
			l.mu.Unlock()
			_ = c.Close()
			if warn {
				l.logger.Warn("closed API connections of a client over --max-conns-per-client", "client", ip,
					"max_conns_per_client", l.max, "closed_since_last_warning", refused)
			}
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &clientConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *clientLimitListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// remoteIP is c's remote address without its port.
func remoteIP(c net.Conn) string {
	a := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// clientConn gives its slot back once, when it is closed.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
