package cluster

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

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

// acceptFrom dials ln through s and returns the IP the accepted
// connection comes from.
func acceptFrom(t *testing.T, ln net.Listener, s *raftStreamLayer) net.IP {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	out, err := s.Dial(raft.ServerAddress(ln.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", ln.Addr(), err)
	}
	defer out.Close()
	in, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer in.Close()
	if in.RemoteAddr().String() != out.LocalAddr().String() {
		t.Fatalf("accepted from %s, dialed from %s", in.RemoteAddr(), out.LocalAddr())
	}
	return in.RemoteAddr().(*net.TCPAddr).IP
}

func TestRaftStreamLayerDialsFromItsLoopbackIP(t *testing.T) {
	needLoopbackIPs(t, "127.0.0.21", "127.0.0.22")
	ln, err := net.Listen("tcp", "127.0.0.21:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	for _, tc := range []struct {
		bind, advertise string
		wantSrc         string
	}{
		// A node on its own loopback IP dials from it, advertised or not.
		{"127.0.0.22:0", "", "127.0.0.22"},
		{"127.0.0.22:0", "127.0.0.1:9", "127.0.0.22"},
		// A wildcard bind leaves the source to the kernel: 127.0.0.1
		// towards a loopback peer.
		{"0.0.0.0:0", "127.0.0.1:9", "127.0.0.1"},
	} {
		s, err := newRaftStreamLayer(tc.bind, tc.advertise)
		if err != nil {
			t.Fatalf("bind %s: %v", tc.bind, err)
		}
		if got := acceptFrom(t, ln, s); got.String() != tc.wantSrc {
			t.Errorf("layer bound on %s (advertise %q) dialed from %s, want %s", tc.bind, tc.advertise, got, tc.wantSrc)
		}
		s.Close()
	}
}

func TestRaftStreamLayerAddresses(t *testing.T) {
	// Port 0 without advertise: the bound address, real port.
	s, err := newRaftStreamLayer("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Addr().String(); a != s.boundAddr().String() || strings.HasSuffix(a, ":0") {
		t.Errorf("Addr %s, bound %s: want the same real address", a, s.boundAddr())
	}
	s.Close()

	// An advertise address is what Addr says; the bind stays itself.
	s, err = newRaftStreamLayer("127.0.0.1:0", "127.0.0.1:4567")
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr().String() != "127.0.0.1:4567" || s.boundAddr().String() == "127.0.0.1:4567" {
		t.Errorf("Addr %s bound %s; want the advertise address and the real bind", s.Addr(), s.boundAddr())
	}
	s.Close()

	// A wildcard without advertise is refused, naming the fix.
	if s, err := newRaftStreamLayer("0.0.0.0:0", ""); err == nil {
		s.Close()
		t.Error("a wildcard bind without advertise address was accepted")
	} else if !strings.Contains(err.Error(), "advertise") {
		t.Errorf("wildcard bind error does not say to advertise: %v", err)
	}
	if _, err := newRaftStreamLayer("127.0.0.1:0", "no-port"); err == nil {
		t.Error("an advertise address without port was accepted")
	}
}

func TestSameFamilyLoopback(t *testing.T) {
	v4, v6 := net.ParseIP("127.0.0.22"), net.ParseIP("::1")
	for _, tc := range []struct {
		addr  string
		local net.IP
		want  bool
	}{
		{"127.0.0.1:7071", v4, true},
		{"127.1.2.3:7071", v4, true},
		{"[::1]:7071", v4, false},
		{"[::1]:7071", v6, true},
		{"127.0.0.1:7071", v6, false},
		{"10.0.0.5:7071", v4, false},
		{"localhost:7071", v4, false},
		{"garbage", v4, false},
	} {
		if got := sameFamilyLoopback(tc.addr, tc.local); got != tc.want {
			t.Errorf("sameFamilyLoopback(%q, %s) = %v, want %v", tc.addr, tc.local, got, tc.want)
		}
	}
}
