package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// echoServer echoes every line back on each connection it accepts, until
// the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	NoErr(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// needLoopbackIPs checks that every given 127.0.0.0/8 address can be
// bound. Linux routes the whole block to lo, so there (and in CI) a failure
// is a broken machine and fails the test; macOS binds only 127.0.0.1, so
// elsewhere the test is skipped, saying why.
func needLoopbackIPs(t *testing.T, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			if runtime.GOOS == "linux" {
				t.Fatalf("cannot bind loopback address %s, which Linux routes to lo: %v", ip, err)
			}
			t.Skipf("cannot bind loopback address %s on %s: %v", ip, runtime.GOOS, err)
		}
		ln.Close()
	}
}

// proxyClient is one connection to the proxy from a chosen source IP.
type proxyClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialFrom(t *testing.T, src, addr string) *proxyClient {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	NoErr(t, err)
	t.Cleanup(func() { c.Close() })
	return &proxyClient{t: t, c: c, r: bufio.NewReader(c)}
}

// echo sends a line and returns what came back, or the error.
func (c *proxyClient) echo(line string) (string, error) {
	_ = c.c.SetDeadline(testenv.Deadline(c.t))
	if _, err := fmt.Fprintln(c.c, line); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// mustEcho fails unless a line makes the round trip.
func (c *proxyClient) mustEcho(line string) {
	c.t.Helper()
	got, err := c.echo(line)
	if err != nil || got != line {
		c.t.Fatalf("echo %q through the proxy: got %q, %v", line, got, err)
	}
}

// mustBeClosed fails unless the proxy closed the connection (EOF or reset,
// not a timeout).
func (c *proxyClient) mustBeClosed(what string) {
	c.t.Helper()
	_ = c.c.SetReadDeadline(testenv.Deadline(c.t))
	_, err := c.r.ReadString('\n')
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("%s: want the connection closed by the proxy, got %v", what, err)
	}
}

func TestProxyForwardsOnceTargetIsSet(t *testing.T) {
	echo := echoServer(t)
	p, err := NewProxy("127.0.0.1:0")
	NoErr(t, err)
	t.Cleanup(func() { p.Close() })

	// Accepted before the target is known: it waits, then goes through.
	early := dialFrom(t, "127.0.0.1", p.Addr())
	_, err = fmt.Fprintln(early.c, "early")
	NoErr(t, err)
	NoErr(t, WaitFor(10*time.Second, "the early connection to be accepted", func() error {
		if s := p.Stats(); s.Accepted != 1 || s.Active != 1 {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	}))
	p.SetTarget(echo)
	if got, err := early.r.ReadString('\n'); err != nil || got != "early\n" {
		t.Fatalf("early connection: got %q, %v", got, err)
	}
	early.mustEcho("again")
	dialFrom(t, "127.0.0.1", p.Addr()).mustEcho("late")
	if p.Target() != echo {
		t.Errorf("Target() = %q, want %q", p.Target(), echo)
	}

	// Close ends every connection and the listener.
	NoErr(t, p.Close())
	early.mustBeClosed("after Close")
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the proxy still accepts after Close")
	}
	if s := p.Stats(); s.Active != 0 || s.Accepted != 2 {
		t.Errorf("after Close: %+v", s)
	}
	NoErr(t, p.Close()) // a second Close is harmless
}

func TestProxyBlocksBySourceIP(t *testing.T) {
	const a, b = "127.0.0.41", "127.0.0.42"
	needLoopbackIPs(t, a, b)
	echo := echoServer(t)
	p, err := NewProxy("127.0.0.1:0")
	NoErr(t, err)
	t.Cleanup(func() { p.Close() })
	p.SetTarget(echo)

	fromA, fromB := dialFrom(t, a, p.Addr()), dialFrom(t, b, p.Addr())
	fromA.mustEcho("a1")
	fromB.mustEcho("b1")

	// Blocking a cuts its open connection and refuses new ones; b is
	// untouched.
	p.SetBlocked(func(src net.IP) bool { return src.String() == a })
	fromA.mustBeClosed("a's open connection after a was blocked")
	fromB.mustEcho("b2")
	dialFrom(t, a, p.Addr()).mustBeClosed("a new connection from a while blocked")
	dialFrom(t, b, p.Addr()).mustEcho("b3")
	s := p.Stats()
	if s.Cut != 1 || s.Refused != 1 || s.Active != 2 {
		t.Errorf("while a is blocked: %+v; want 1 cut, 1 refused, 2 active", s)
	}

	// Lifting the rule lets a in again.
	p.SetBlocked(nil)
	dialFrom(t, a, p.Addr()).mustEcho("a2")
	fromB.mustEcho("b4")
}

func TestProxyClosesWhenTargetIsDownOrNeverSet(t *testing.T) {
	p, err := NewProxy("127.0.0.1:0")
	NoErr(t, err)
	t.Cleanup(func() { p.Close() })
	p.mu.Lock()
	p.targetWait = 200 * time.Millisecond
	p.mu.Unlock()
	dialFrom(t, "127.0.0.1", p.Addr()).mustBeClosed("no target within the wait")

	// A target nothing listens on: the proxyClient's connection is closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	NoErr(t, err)
	down := ln.Addr().String()
	ln.Close()
	p.SetTarget(down)
	dialFrom(t, "127.0.0.1", p.Addr()).mustBeClosed("target down")
	if s := p.Stats(); s.NoTarget != 1 || s.DialFailed != 1 || s.Active != 0 {
		t.Errorf("stats %+v; want 1 without target, 1 failed dial, none active", s)
	}
}
